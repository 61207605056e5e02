"""The offline sources: real text that ships with every Python, read without importing it.

* `pydoc`: the language reference topics that `help()` shows (`pydoc_data.topics`).
* `stdlib`: the docstrings of standard-library modules, read from their source files
  with `ast` (importing every module would run its side effects).
* `packages`: the metadata and long descriptions of the installed distributions.

Each source is searched in two stages, as a person would: `find` ranks whole documents
(a topic, a module, a distribution) with BM25, then `read` splits one document into
passages and ranks those. The stdlib is only parsed in the second stage, module by
module, when a search reaches it: the first stage needs nothing but each file's
docstring and the names it defines, which a tokenizer and a regular expression give at
a fraction of the cost of parsing ~550 files.
"""

from __future__ import annotations

import abc
import ast
import importlib.metadata
import io
import os
import re
import sysconfig
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from .ranking import BM25Index, Query
from .text import chunk, split_identifier, terms

__all__ = ["SOURCES", "Corpus", "Document", "Passage", "load_corpus"]


class Passage(TypedDict):
    """One cited piece of text: where it is (source, document, section) and its rank."""

    source: str
    document: str
    section: str
    text: str
    score: float  # BM25 within its document: comparable inside one document only
    relevance: NotRequired[float]  # share of the query's words it contains (the analysis)


@dataclass(frozen=True, slots=True)
class Document:
    """A unit the first stage ranks: its id within the source, a title to cite, its text."""

    id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class _Piece:
    section: str
    text: str


class Corpus(abc.ABC):
    """A source's documents, a BM25 index over them, and their passages on demand."""

    name: str
    description: str

    def __init__(self, documents: list[Document]) -> None:
        self.documents = {doc.id: doc for doc in documents}
        self._ids = list(self.documents)
        self._index = BM25Index([terms(doc.text) for doc in self.documents.values()])
        self._pieces: dict[str, tuple[list[_Piece], BM25Index]] = {}

    def __len__(self) -> int:
        return len(self.documents)

    def find(self, query: Query, limit: int) -> list[str]:
        """The ids of the `limit` best documents for `query`."""
        return [self._ids[position] for position, _ in self._index.rank(query, limit)]

    def read(self, document: str, query: Query, limit: int) -> list[Passage]:
        """The `limit` best passages of `document` for `query`; raises KeyError if unknown."""
        doc = self.documents[document]
        if document not in self._pieces:
            pieces = list(self.pieces(doc))
            index = BM25Index([terms(f"{p.section} {p.text}") for p in pieces])
            self._pieces[document] = (pieces, index)
        pieces, index = self._pieces[document]
        return [
            Passage(
                source=self.name,
                document=doc.title,
                section=pieces[position].section,
                text=pieces[position].text,
                score=round(score, 3),
            )
            for position, score in index.rank(query, limit)
        ]

    @abc.abstractmethod
    def pieces(self, doc: Document) -> Iterator[_Piece]:
        """Split one document into passages (the second stage)."""


class PydocCorpus(Corpus):
    name = "pydoc"
    description = "the Python language reference topics shown by help() (pydoc_data.topics)"

    @classmethod
    def load(cls) -> PydocCorpus:
        from pydoc_data.topics import topics

        documents = [
            Document(id=key, title=f"{_first_line(text)} (pydoc topic {key!r})", text=text)
            for key, text in sorted(topics.items())
        ]
        return cls(documents)

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        body = doc.text.split("\n", 2)[-1]  # the title and its underline are the document's
        for text in chunk(body):
            yield _Piece(section="", text=text)


class StdlibCorpus(Corpus):
    name = "stdlib"
    description = "docstrings of the standard library's modules, read from source with ast"

    # Not documentation a reader wants: tests, demos, the IDE, bundled installers.
    _SKIP = frozenset(
        {"test", "tests", "idlelib", "lib2to3", "turtledemo", "ensurepip", "pydoc_data"}
    )
    _DEFINITION = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z]\w*)", re.M)

    def __init__(self, documents: list[Document], root: Path) -> None:
        super().__init__(documents)
        self.root = root

    @classmethod
    def load(cls, root: Path | None = None) -> StdlibCorpus:
        root = root or Path(sysconfig.get_paths()["stdlib"])
        documents = []
        for module, path in cls._modules(root):
            source = path.read_text(encoding="utf-8", errors="replace")
            names = " ".join(split_identifier(n) for n in cls._DEFINITION.findall(source))
            docstring = _module_docstring(source)
            text = f"{split_identifier(module.replace('.', '_'))} {docstring} {names}"
            documents.append(Document(id=module, title=module, text=text))
        return cls(documents, root)

    @classmethod
    def _modules(cls, root: Path) -> Iterator[tuple[str, Path]]:
        """Public pure-Python modules under `root`, as (dotted name, path), sorted."""
        for directory, subdirs, files in os.walk(root):
            here = Path(directory)
            # Packages only: a directory is a package when it has an __init__.py.
            subdirs[:] = sorted(
                d
                for d in subdirs
                if d.isidentifier()
                and not d.startswith("_")
                and d not in cls._SKIP
                and (here / d / "__init__.py").exists()
            )
            parts = here.relative_to(root).parts
            for name in sorted(files):
                if not name.endswith(".py") or not name[:-3].isidentifier():
                    continue
                if name == "__init__.py":
                    if parts:
                        yield ".".join(parts), here / name
                elif not name.startswith("_"):
                    yield ".".join((*parts, name[:-3])), here / name

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        module = doc.id
        relative = module.replace(".", "/")
        path = self.root / f"{relative}.py"
        if not path.exists():
            path = self.root / relative / "__init__.py"
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            return
        for qualname, node in _documented(tree):
            docstring = ast.get_docstring(node)
            if not docstring:
                continue
            line = getattr(node, "lineno", 1)
            section = f"{module}.{qualname}" if qualname else module
            for text in chunk(docstring):
                yield _Piece(section=f"{section} ({path.relative_to(self.root)}:{line})", text=text)


class PackagesCorpus(Corpus):
    name = "packages"
    description = "metadata and long descriptions of the installed distributions"

    # This project's own README is not outside text: leave it out.
    _OWN = frozenset({"agentmesh"})

    @classmethod
    def load(cls) -> PackagesCorpus:
        seen: set[str] = set()
        documents = []
        for dist in importlib.metadata.distributions():
            # The metadata as JSON (PEP 566): the long description is its "description".
            meta = dist.metadata.json
            name = str(meta.get("name", ""))
            key = re.sub(r"[-_.]+", "-", name).lower()
            if not key or key in seen or key in cls._OWN:
                continue
            seen.add(key)
            keywords = meta.get("keywords", "")
            parts = [
                split_identifier(name.replace("-", "_")),
                str(meta.get("summary", "")),
                keywords if isinstance(keywords, str) else " ".join(keywords),
                str(meta.get("description", "")),
            ]
            documents.append(
                Document(id=key, title=f"{name} {dist.version}", text="\n\n".join(parts))
            )
        documents.sort(key=lambda doc: doc.id)
        return cls(documents)

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        for text in chunk(doc.text):
            # Badges, link lists and HTML say little: keep passages with some prose.
            if len(re.findall(r"\b[a-z]{3,}\b", text)) >= 5:
                yield _Piece(section="", text=text)


SOURCES = ("pydoc", "stdlib", "packages")


def load_corpus(name: str) -> Corpus:
    """Build the named source's index (a fraction of a second each)."""
    loaders: dict[str, Callable[[], Corpus]] = {
        "pydoc": PydocCorpus.load,
        "stdlib": StdlibCorpus.load,
        "packages": PackagesCorpus.load,
    }
    return loaders[name]()


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def _module_docstring(source: str) -> str:
    """The module's docstring from its first tokens, without parsing the whole file."""
    skip = {tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in skip:
                continue
            if token.type == tokenize.STRING:
                value = ast.literal_eval(token.string)
                return value if isinstance(value, str) else ""
            return ""
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return ""


_Documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _documented(tree: ast.Module) -> Iterator[tuple[str, _Documented]]:
    """The module and its public classes and functions (methods too), with qualified names."""
    yield "", tree
    stack: list[tuple[str, _Documented]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                if child.name.startswith("_"):
                    continue
                qualname = f"{prefix}{child.name}"
                yield qualname, child
                if isinstance(child, ast.ClassDef):
                    stack.append((f"{qualname}.", child))
