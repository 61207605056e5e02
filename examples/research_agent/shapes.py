"""Passages that keep their shape: prose, code blocks and grid tables.

Documentation text (pydoc topics, docstrings) is plain text in reST's layout: prose
paragraphs, literal blocks indented under a paragraph that ends with a colon, doctest
lines (`>>>`), grammar rules (`::=`), and grid tables (`+---+` rules, `|` cells). A
passage keeps each as a block, in one string that reads well as plain text:

* a prose paragraph is one line (its whitespace collapsed);
* a code block is its lines, dedented, each indented by four spaces (a blank line in
  it is four spaces, so it never splits the block);
* a table is its lines, dedented (they start with `+` or `|`);

and blocks are separated by a blank line. `blocks(passage)` reads them back for the
Markdown and HTML reports.
"""

from __future__ import annotations

import enum
import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Block", "Kind", "blocks", "chunk", "table_rows"]

_INDENT = "    "
_RULE = re.compile(r"^[=*~^#-]{3,}$")  # a heading's underline, reST or Markdown
_TABLE_RULE = re.compile(r"^\+[-=+]+\+$")


class Kind(enum.Enum):
    PROSE = "prose"
    CODE = "code"
    TABLE = "table"


@dataclass(frozen=True, slots=True)
class Block:
    kind: Kind
    lines: tuple[str, ...]

    @property
    def words(self) -> int:
        return sum(len(line.split()) for line in self.lines)

    def encode(self) -> str:
        if self.kind is Kind.PROSE:
            return " ".join(" ".join(self.lines).split())
        if self.kind is Kind.CODE:
            return "\n".join(_INDENT + line if line.strip() else _INDENT for line in self.lines)
        return "\n".join(self.lines)


def blocks(passage: str) -> list[Block]:
    """The blocks of a passage made by `chunk` (a plain string is one prose block)."""
    found: list[Block] = []
    for part in passage.split("\n\n"):
        lines = part.split("\n")
        if not part.strip():
            continue
        if all(line.startswith(_INDENT) or not line for line in lines) and part.startswith(_INDENT):
            code = tuple(line[len(_INDENT) :].rstrip() for line in lines)
            found.append(Block(Kind.CODE, code))
        elif _is_table(lines):
            found.append(Block(Kind.TABLE, tuple(lines)))
        else:
            found.append(Block(Kind.PROSE, (" ".join(part.split()),)))
    return found


def table_rows(table: Block) -> list[list[str]]:
    """A grid table's rows of cells, a row's wrapped lines joined (header row first)."""
    rows: list[list[str]] = []
    pending: list[list[str]] = []
    for line in (*table.lines, "+"):
        if line.startswith("+") or set(line.replace("|", "")) <= {"=", ""}:
            if pending:
                width = max(len(cells) for cells in pending)
                joined = [
                    " ".join(
                        " ".join(cells[i].split()) for cells in pending if i < len(cells)
                    ).strip()
                    for i in range(width)
                ]
                rows.append(joined)
                pending = []
            continue
        pending.append(line.strip().strip("|").split("|"))
    return rows


def chunk(text: str, *, target: int = 110, minimum: int = 25) -> Iterator[str]:
    """Split `text` into passages of about `target` words along block boundaries.

    Short blocks are merged with the next one; a prose paragraph longer than twice the
    target is cut between sentences, a code block between lines, a table between rows.
    """
    pending: list[Block] = []
    size = 0
    for block in _blocks_of(text):
        for piece in _limit(block, 2 * target):
            if pending and size + piece.words > target:
                yield _join(pending)
                pending, size = [], 0
            pending.append(piece)
            size += piece.words
            if size >= minimum and size >= target // 2:
                yield _join(pending)
                pending, size = [], 0
    if pending:
        yield _join(pending)


def _join(pieces: list[Block]) -> str:
    return "\n\n".join(piece.encode() for piece in pieces)


def _is_table(lines: list[str]) -> bool:
    return (
        bool(lines)
        and _TABLE_RULE.match(lines[0].strip()) is not None
        and (all(line.strip()[:1] in "+|" for line in lines if line.strip()))
    )


def _blocks_of(text: str) -> Iterator[Block]:
    """The source text's blocks: tables and literal blocks kept, prose paragraphs flat."""
    introduces_code = False
    for part in re.split(r"\n[ \t]*\n", text.expandtabs()):
        lines = [line.rstrip() for line in part.split("\n") if line.strip()]
        lines = [line for line in lines if not _RULE.match(line.strip())]
        if not lines:
            continue
        dedented = textwrap.dedent("\n".join(lines)).split("\n")
        indented = all(line.startswith(" ") for line in lines)
        if _is_table(dedented):
            block = Block(Kind.TABLE, tuple(dedented))
        elif _is_code(dedented, indented=indented, introduced=introduces_code):
            block = Block(Kind.CODE, tuple(dedented))
        else:
            block = Block(Kind.PROSE, (" ".join(" ".join(lines).split()),))
        # A literal block follows a sentence that ends with a colon ("For example:");
        # pydoc's admonitions ("Note:", "See also:") are indented and introduce prose.
        last = lines[-1].strip()
        admonition = indented and len(block.lines[0].split()) <= 2
        introduces_code = block.kind is Kind.PROSE and last.endswith(":") and not admonition
        yield block


def _is_code(lines: list[str], *, indented: bool, introduced: bool) -> bool:
    first = lines[0].lstrip()
    if first.startswith(">>>") or any("::=" in line for line in lines):
        return True
    return indented and introduced


def _limit(block: Block, most: int) -> Iterable[Block]:
    """`block` in pieces of at most `most` words."""
    if block.words <= most:
        return [block]
    if block.kind is Kind.PROSE:
        return [Block(Kind.PROSE, (piece,)) for piece in _sentences(block.lines[0], most)]
    return _split_lines(block, most)


def _split_lines(block: Block, most: int) -> Iterator[Block]:
    """A long code block cut between lines, a long table between rows (header repeated)."""
    header: tuple[str, ...] = ()
    body = block.lines
    if block.kind is Kind.TABLE:
        # The header ends at the `+===+` rule; without one, the first row is the header.
        end = next((i for i, line in enumerate(body) if "=" in line and line[0] in "+|"), 0)
        header, body = body[: end + 1], body[end + 1 :]
    current: list[str] = []
    count = sum(len(line.split()) for line in header)
    for line in body:
        current.append(line)
        words = count + sum(len(item.split()) for item in current)
        boundary = block.kind is Kind.CODE or line.startswith("+")
        if words >= most // 2 and boundary:
            yield Block(block.kind, (*header, *current))
            current = []
    if current and any(not line.startswith("+") for line in current):
        yield Block(block.kind, (*header, *current))


def _sentences(paragraph: str, most: int) -> Iterator[str]:
    """`paragraph` in pieces of at most `most` words, cut between sentences where it can."""
    current: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z\"(])", paragraph):
        tokens = sentence.split()
        # A sentence that is itself too long (a grammar rule, a table) is cut by words.
        for start in range(0, len(tokens), most):
            current += tokens[start : start + most]
            if len(current) >= most // 2:
                yield " ".join(current)
                current = []
    if current:
        yield " ".join(current)
