"""The `docs` source: Python's own documentation, the pages people read.

The library reference, the language reference, the tutorial, the HOWTOs, the glossary
and the interpreter's usage pages, read from the reStructuredText sources that the
system's documentation package installs beside the HTML (Debian's `python3.X-doc`:
`/usr/share/doc/python3.X/html/_sources/`). Where the machine has none, the source is
left out and the agent answers from the others (`pydoc`, `stdlib`, `packages`): the
same documentation's topics and docstrings, shorter.

The FAQ is left out on purpose: the maintainers keep its questions as a held-out set.

A page is a document (`library/asyncio-task`); its sections, and each function,
class or method it documents, are the citable units, with stable ids as Sphinx writes
its anchors: `docs:library/asyncio-task#asyncio.gather`,
`docs:tutorial/classes#private-variables`. A library page's passages also name the
module the page documents (`module`), so a report can say which module answers.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .shapes import chunk

__all__ = [
    "PARTS",
    "Section",
    "deprecated_modules",
    "documentation_root",
    "page_sections",
    "page_title",
    "pages",
    "slug",
]

# The parts of the documentation that answer a user's questions (not the C API, the
# release notes, or the FAQ).
PARTS = ("library", "reference", "tutorial", "howto", "using", "glossary")

_HEADING_RULE = re.compile(r"""^([=\-~^*"'#+.`:_])\1{2,}\s*$""")
_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(?:py:)?([\w-]+)::\s*(.*)$")
_LABEL = re.compile(r"^\s*\.\.\s+_[^:]+:\s*$")
_COMMENT = re.compile(r"^\s*\.\.(?:\s|$)(?!.*::)")
_OPTION = re.compile(r"^\s+:[\w-]+:")
# Directives that document a name: each is a unit of its own, cited by that name.
_NAMED = frozenset(
    {
        "function",
        "method",
        "class",
        "exception",
        "attribute",
        "data",
        "decorator",
        "decoratormethod",
        "classmethod",
        "staticmethod",
        "coroutinefunction",
        "coroutinemethod",
        "awaitablefunction",
        "awaitablemethod",
        "abstractmethod",
        "property",
        "opcode",
        "cmdoption",
        "option",
        "envvar",
        "pdbcommand",
    }
)
_MEMBERS = frozenset(
    {
        "method",
        "attribute",
        "classmethod",
        "staticmethod",
        "coroutinemethod",
        "awaitablemethod",
        "abstractmethod",
        "property",
        "decoratormethod",
    }
)
# Directives whose body is read as prose, with a word to say what it is.
_ADMONITIONS = {
    "note": "Note.",
    "warning": "Warning.",
    "seealso": "See also.",
    "important": "Important.",
    "tip": "Tip.",
    "caution": "Caution.",
    "attention": "Attention.",
    "hint": "Hint.",
    "impl-detail": "CPython implementation detail.",
    "availability": "Availability:",
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
}
# Directives whose body is code.
_CODE = frozenset({"code-block", "code", "doctest", "testcode", "sourcecode", "productionlist"})
# Directives with nothing a reader wants (index entries, build instructions).
_DROP = frozenset(
    {
        "index",
        "toctree",
        "sectionauthor",
        "moduleauthor",
        "highlight",
        "include",
        "literalinclude",
        "testsetup",
        "testcleanup",
        "testoutput",
        "audit-event",
        "raw",
        "only",
        "tabularcolumns",
        "rubric",
        "glossary",
        "image",
        "figure",
        "csv-table",
        "list-table",
    }
)
_ROLE = re.compile(r":[\w:+-]+:`([^`]*)`")
_LITERAL = re.compile(r"``([^`]+)``")
# Emphasis, not a signature's `*args, **kwargs`: its stars stand apart from words.
_EMPHASIS = re.compile(
    r"(?<![\w*])\*\*(\S[^*\n]*?)\*\*(?![\w*])|(?<![\w*])\*(\S[^*\n]*?)\*(?![\w*])"
)
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_{1,2}")
_SUBSTITUTION = re.compile(r"\|(\w+)\|")


def documentation_root() -> Path | None:
    """Where this interpreter's documentation sources are, None when the machine has none.

    `$RESEARCH_AGENT_DOCS` names another directory (the `_sources` of a documentation
    build); an empty value turns the source off.
    """
    configured = os.environ.get("RESEARCH_AGENT_DOCS")
    if configured is not None:
        root = Path(configured) if configured else None
    else:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        root = Path(f"/usr/share/doc/python{version}/html/_sources")
    return root if root is not None and (root / "library").is_dir() else None


def pages(root: Path) -> Iterator[tuple[str, Path]]:
    """The pages to index, as (page id, path): `library/os`, sorted."""
    for part in PARTS:
        single = root / f"{part}.rst.txt"
        if single.is_file():
            yield part, single
            continue
        directory = root / part
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.rst.txt")):
            name = path.name.removesuffix(".rst.txt")
            if name != "index":
                yield f"{part}/{name}", path


@dataclass(frozen=True, slots=True)
class Section:
    """One citable unit of a page: a section, or a name the page documents."""

    anchor: str  # Sphinx's anchor: "asyncio.gather", "private-variables"
    heading: str  # the section's title path, "Coroutines and Tasks > Running Tasks"
    module: str  # the module it documents, "" when none
    text: str  # clean text (reST markup removed), blocks as `shapes` reads them

    @property
    def first_line(self) -> str:
        return self.text.strip().split("\n", 1)[0][:200]


# A `module` directive whose options say `:deprecated:` (PEP 594's modules, `optparse`).
_DEPRECATED_MODULE = re.compile(
    r"^\.\. module::[ \t]*(\S+)[ \t]*\n(?:[ \t]+:.*\n)*?[ \t]+:deprecated:", re.M
)


def deprecated_modules(text: str) -> list[str]:
    """The modules a page documents as deprecated (its `module` directive says so)."""
    return _DEPRECATED_MODULE.findall(text)


def page_title(text: str) -> str:
    """The page's first heading, "" without one."""
    lines = text.splitlines()
    for i in range(len(lines) - 1):
        if _is_heading(lines, i):
            return _clean(lines[i].strip())
    return ""


def page_sections(text: str) -> list[Section]:
    """A page's units in order: its sections, and each documented name apart."""
    lines = text.expandtabs().splitlines()
    found: list[Section] = []
    headings: list[tuple[str, str]] = []  # (underline character, title), outermost first
    module = ""
    anchor, heading = "", ""
    body: list[str] = []
    classes: list[tuple[int, str]] = []  # enclosing class directives: (indent, name)

    def flush() -> None:
        cleaned = _clean_block("\n".join(body))
        if cleaned.strip():
            found.append(Section(anchor or "top", heading, module, cleaned))

    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_heading(lines, i):
            flush()
            title = _clean(line.strip())
            rule = lines[i + 1].strip()[0]
            levels = [c for c, _ in headings]
            headings = headings[: levels.index(rule)] if rule in levels else headings
            headings.append((rule, title))
            anchor, heading, body, classes = slug(title), " > ".join(t for _, t in headings), [], []
            i += 2
            continue
        if _HEADING_RULE.match(line) and i + 2 < len(lines) and _is_heading(lines, i + 1):
            i += 1  # an overline: the heading follows
            continue
        directive = _DIRECTIVE.match(line)
        if directive is None:
            if not _LABEL.match(line) and not _COMMENT.match(line):
                body.append(line)
            i += 1
            continue
        indent, kind, argument = len(directive[1]), directive[2], directive[3].strip()
        block_end = _block_end(lines, i, indent)
        if kind in ("module", "currentmodule"):
            module = argument
            i = block_end if kind == "module" else i + 1
            continue
        if kind in _NAMED:
            flush()
            classes = [(d, c) for d, c in classes if d < indent]
            name = _signature_name(argument)
            if kind in _MEMBERS and classes and "." not in name:
                name = f"{classes[-1][1]}.{name}"
            qualified = f"{module}.{name}" if module and kind not in _OPTIONLIKE else name
            if kind in ("class", "exception"):
                classes.append((indent, name))
            signature = _clean(argument)
            anchor = qualified
            body = [signature, ""]
            i += 1
            while i < len(lines) and _OPTION.match(lines[i]):
                i += 1  # the directive's options (:noindex:, :async:)
            continue
        if kind in _DROP:
            i = block_end
            continue
        # Said at the directive's indentation, so the unit's body dedents as one.
        if kind in _ADMONITIONS:
            body += ["", directive[1] + f"{_ADMONITIONS[kind]} {argument}".strip(), ""]
        elif kind in _CODE:
            body += ["", directive[1] + "Example:", ""]
        elif argument:
            body += ["", directive[1] + argument, ""]
        i += 1
        while i < len(lines) and _OPTION.match(lines[i]):
            i += 1
    flush()
    return found


_OPTIONLIKE = frozenset({"cmdoption", "option", "envvar", "pdbcommand", "opcode"})


def passages(section: Section) -> Iterator[str]:
    """A unit's passages, as `shapes.chunk` cuts them."""
    yield from chunk(section.text)


def _is_heading(lines: list[str], i: int) -> bool:
    if i + 1 >= len(lines):
        return False
    title, rule = lines[i], lines[i + 1]
    return (
        bool(title.strip())
        and not title.startswith(" ")
        and _HEADING_RULE.match(rule) is not None
        and len(rule.strip()) >= len(title.strip())
        and not title.lstrip().startswith("..")
    )


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The line after the directive at `start` and its indented body."""
    i = start + 1
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
        i += 1
    return i


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _signature_name(argument: str) -> str:
    name = re.split(r"[\s(\[]", argument.strip(), maxsplit=1)[0]
    return name.rstrip(":")


def slug(title: str) -> str:
    """Sphinx's anchor for a heading: lower case, words joined by hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "top"


def _clean(text: str) -> str:
    """Inline reST markup removed: roles, literals, emphasis, links."""

    def role(match: re.Match[str]) -> str:
        inner = match[1]
        if "<" in inner and inner.endswith(">"):
            label = inner[: inner.index("<")].strip()
            return label or inner[inner.index("<") + 1 : -1]
        return inner.lstrip("~!")

    text = _ROLE.sub(role, text)
    text = _LINK.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _EMPHASIS.sub(lambda m: m[1] or m[2], text)
    text = _SUBSTITUTION.sub(r"\1", text)
    return text.replace("\\", "")


def _clean_block(text: str) -> str:
    """A unit's body as plain text: markup removed, `::` literal blocks introduced by ':'."""
    head, _, rest = text.partition("\n")
    lines = [head, *textwrap.dedent(rest).split("\n")] if rest else [head]
    out: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped == "::":
            out.append(":")  # a literal block follows
            continue
        if stripped.endswith("::"):
            line = line.rstrip()[:-1]
        out.append(line)
    # Cleaned as a whole: a role's text can run over a line break.
    return _clean("\n".join(out))
