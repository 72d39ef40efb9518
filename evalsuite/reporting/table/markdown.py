"""A label (model, task, metric name) as literal Markdown text, for the report's and the leaderboard's tables.

`<`, `>` and `&` become entities, which every renderer shows as text, so a label's `<script>` never becomes HTML
in a README or an issue; the other punctuation that starts markup (emphasis, code, links, table cells,
strike-through) gets a backslash, which CommonMark and GitHub read as the character itself. A line break would
end the table row, so the label is put on one line.
"""

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKUP = frozenset("\\`*_[]|~")


def escape_markdown(text) -> str:
    one_line = " ".join(str(text).splitlines())
    return "".join(_ENTITIES.get(char) or (f"\\{char}" if char in _MARKUP else char) for char in one_line)
