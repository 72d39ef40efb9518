"""How to install an optional extra, as this installation needs it said: a checkout installed with `pip install -e .`
takes `pip install -e '.[vlm]'` in that checkout (`pip install 'evalsuite[vlm]'` would fetch evalsuite from the
package index over it); an installed wheel takes `pip install 'evalsuite[vlm]'`. The kind of install is read from
pip's record of it (PEP 610 `direct_url.json`); where there is none, both are said."""

import json
from importlib import metadata
from urllib.parse import unquote, urlparse


def install_extra(extra: str = "vlm") -> str:
    """The pip command that installs `extra` into this installation of evalsuite."""
    checkout = _editable_checkout()
    if checkout is None:
        return f"pip install 'evalsuite[{extra}]' (from a checkout: pip install -e '.[{extra}]')"
    if checkout:
        return f"pip install -e '.[{extra}]' in the checkout {checkout}"
    return f"pip install 'evalsuite[{extra}]'"


def _editable_checkout() -> str | None:
    """The folder of an editable install, "" for an installed wheel, None when pip left no record of which."""
    # Every record of the name: run from a checkout, its evalsuite.egg-info (no pip record) may come first.
    records = [dist.read_text("direct_url.json") for dist in metadata.distributions(name="evalsuite")]
    if not records:
        return None
    text = next((record for record in records if record), None)
    if text is None:  # installed from an index: pip writes direct_url.json only for direct (URL, path) installs
        return ""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not (record.get("dir_info") or {}).get("editable"):
        return ""
    url = urlparse(record.get("url", ""))
    return unquote(url.path) if url.scheme == "file" and url.path else "."
