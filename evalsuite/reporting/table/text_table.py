"""The plain aligned text table every command prints (header, a line of dashes, rows)."""

def format_table(header: list[str], body: list[list[str]]) -> str:
    """A plain aligned text table (header, dashes, rows)."""
    widths = [max(len(str(r[i])) for r in [header] + body) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

