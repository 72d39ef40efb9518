"""The read side: what people read of the results, computed from the files under --out and never written by a
run. table/ (the models x tasks table), statistics/ (intervals, ranks, best sets, --compare), views/ (text, CSV,
markdown, pandas, heatmap), page/ (the HTML report); each imports only the ones before it, and nothing here is
imported by the runner (tests/test_architecture.py)."""
