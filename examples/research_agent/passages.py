"""A passage's blocks as Markdown or HTML: prose, code blocks and tables keep their shape."""

from __future__ import annotations

import html

from .shapes import Block, Kind, blocks, table_rows

__all__ = ["to_html", "to_markdown"]


def to_markdown(text: str) -> str:
    """The passage as Markdown: paragraphs, fenced code blocks, pipe tables."""
    return "\n\n".join(_markdown(block) for block in blocks(text))


def to_html(text: str) -> str:
    """The passage as HTML: `<p>`, `<pre><code>` and `<table>` elements, escaped."""
    return "".join(_html(block) for block in blocks(text))


def _markdown(block: Block) -> str:
    if block.kind is Kind.CODE:
        return "```\n" + "\n".join(block.lines) + "\n```"
    if block.kind is Kind.TABLE:
        rows = table_rows(block)
        if not rows:
            return ""
        width = max(len(row) for row in rows)
        lines = [_row(rows[0], width), "|" + " --- |" * width]
        lines += [_row(row, width) for row in rows[1:]]
        return "\n".join(lines)
    # A README's "## Usage" inside a passage is text, not a heading of the report.
    line = block.lines[0]
    return "\\" + line if line[:1] in "#>-+*=" else line


def _row(cells: list[str], width: int) -> str:
    padded = [*cells, *[""] * (width - len(cells))]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in padded) + " |"


def _html(block: Block) -> str:
    e = html.escape
    if block.kind is Kind.CODE:
        return f"<pre><code>{e(chr(10).join(block.lines))}</code></pre>"
    if block.kind is Kind.TABLE:
        rows = table_rows(block)
        if not rows:
            return ""
        head = "".join(f"<th>{e(cell)}</th>" for cell in rows[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:]
        )
        return f'<table class="passage"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    return f"<p>{e(block.lines[0])}</p>"
