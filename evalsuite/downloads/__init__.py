"""`evalsuite download TASK --data-root DIR`: a public benchmark's files, fetched into the layout its card reads.

Flow: the card's entry in the source table (sources.py: where each file is published, its published checksum or
size, how it unpacks, where it lands) -> a resumable HTTP transfer into DIR/.evalsuite-download (transfer.py) -> the
published checksum (checksums.py) -> a safe unpack into a temporary folder beside the target, then renamed into
place (unpack.py) -> the card's own reader, built with its official count check (layout_check.py). fetch.py strings
the steps together; hub.py lists a Hugging Face dataset folder with the sizes and hashes the hub publishes; model.py
holds the entries' shape.

Datasets behind a form, a registration or a login have a `Manual` entry instead: the command prints the page and
the steps and writes nothing. The facts are data, kept in one table keyed by card name rather than in the cards:
a card's fields (all but its prompts) are part of its feature-cache key, so a `download:` block in the YAML would
invalidate every cache already extracted for that card whenever a mirror or checksum changed.
"""
