"""The offline sources: real text that ships with every Python, read without importing it.

* `pydoc`: the language reference topics that `help()` shows (`pydoc_data.topics`).
* `stdlib`: the docstrings of standard-library modules, read from their source files
  with `ast` (importing every module would run its side effects), and those of the
  modules written in C (`builtins`, `math`, `itertools`, ...), which have no source
  to read and are imported instead: they only define functions and types. A module
  without a docstring is read from the implementation it re-exports (`decimal` from
  `_pydecimal.py`), a C one by the type it is named after (`mmap.mmap`).
* `packages`: the metadata and long descriptions of the installed distributions, their
  changelogs left out (a release note is rarely the answer to a question).

Names weigh more than prose: a document's name and the first line of its docstring
count three and two times in the first stage, a function's or class's name twice in
the second. A function's name run together ("findall") is ranked by its words too
("find all", `compounds`). Each passage carries a stable document id: `pydoc:<topic>`,
`stdlib:<module>[.<name>]` or `packages:<dist>`.

Each source is searched in two stages, as a person would: `find` ranks whole documents
(a topic, a module, a distribution) with BM25, then `read` splits one document into
passages and ranks those. The stdlib is only parsed in the second stage, module by
module, when a search reaches it: the first stage needs nothing but each file's
docstring and the names it defines, which a tokenizer and a regular expression give at
a fraction of the cost of parsing ~550 files. With the index cache, a document read
once is read back by later runs (`passage_cache`), not parsed again.
"""

from __future__ import annotations

import abc
import ast
import contextlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import io
import os
import re
import sys
import sysconfig
import tokenize
import warnings
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NotRequired, TypedDict

from . import manual
from .associations import Associations
from .compounds import Compounds
from .passage_cache import PassageCache, SavedPassage
from .ranking import BM25Index, Query
from .shapes import chunk
from .text import split_identifier, terms

if TYPE_CHECKING:
    from importlib.metadata import PackageMetadata

__all__ = [
    "CORPORA",
    "EXPANSION",
    "FUSION_K",
    "SOURCES",
    "Corpus",
    "Document",
    "Indexes",
    "Passage",
    "load_corpus",
]

# Reciprocal rank fusion's constant (Cormack et al. 2009): 60 is the usual choice.
FUSION_K = 60
# How much a term the query brings with it (`associations`) weighs against one it says.
EXPANSION = 0.5


class Passage(TypedDict):
    """One cited piece of text: where it is (source, document, section) and its rank."""

    source: str
    id: str  # the stable document id: "pydoc:with", "stdlib:contextlib.suppress"
    document: str
    section: str
    text: str  # its blocks (prose, code, tables) as `shapes.chunk` writes them
    score: float  # BM25 within its document: comparable inside one document only
    module: NotRequired[str]  # the module a documentation page's passage documents
    relevance: NotRequired[float]  # the comparable score (`relevance.Scorer`)
    also_topics: NotRequired[list[str]]  # other subtopics that found it (`merge`)


@dataclass(frozen=True, slots=True)
class Document:
    """A unit the first stage ranks: its id within the source, a title to cite, its text."""

    id: str
    title: str
    text: str
    # What it defines, one line each: a name and its docstring's first line.
    entries: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Indexes:
    """A source's first stage: BM25 over its documents, and over their entries."""

    documents: BM25Index
    entries: BM25Index
    entry_of: tuple[str, ...]  # the id of each entry's document
    associations: Associations  # which terms share a unit (the query expansion)


@dataclass(frozen=True, slots=True)
class _Piece:
    section: str
    text: str
    name: str = ""  # the qualified name it documents, "" for the document itself
    module: str = ""  # the module it documents, when the source says (`docs`)


class Corpus(abc.ABC):
    """A source's documents, a BM25 index over them, and their passages on demand."""

    name: str
    description: str
    # The modules the source knows to be deprecated (the documentation says so).
    deprecated: frozenset[str] = frozenset()
    # BM25's length normalisation in the first stage: a big module is not less about
    # each of its functions for having many of them.
    length_normalisation = 0.75

    def __init__(self, documents: list[Document], indexes: Indexes | None = None) -> None:
        """The documents, and their indexes: built unless given (read from a cache)."""
        self.documents = {doc.id: doc for doc in documents}
        self._ids = list(self.documents)
        self.indexes = indexes or self._build(list(self.documents.values()))
        self._pieces: dict[str, tuple[list[SavedPassage], BM25Index]] = {}
        self._saved: PassageCache | None = None

    def keep_passages(self, cache: PassageCache) -> None:
        """Read each document's passages from `cache` when saved there, and save them there
        when derived (`passage_cache`; the index cache gives each source its own)."""
        self._saved = cache

    def stamp(self, doc: Document) -> str:
        """What `doc`'s passages are read from beyond the source's fingerprint, cheaply: it
        changes when they may have ("": the document itself, or the fingerprint, says)."""
        return ""

    @classmethod
    def _build(
        cls, documents: list[Document], units: Sequence[Sequence[str]] | None = None
    ) -> Indexes:
        """`units`: the term lists the expansion counts co-occurrences in (default: the
        entries, a name and its first line each; the documents if there are none)."""
        # A document's terms are its text's and its entries'; an entry is ranked with
        # its document's name: "os walk Directory tree generator". Each text is split
        # into terms once.
        entry_of: list[str] = []
        entry_terms: list[list[str]] = []
        texts = [terms(doc.text) for doc in documents]
        # The prose's words, to cut a name such as "findall" into "find all".
        compounds = Compounds({term for text in texts for term in text})
        document_terms: list[list[str]] = []
        for doc, own in zip(documents, texts, strict=True):
            title = terms(doc.title)
            for entry in doc.entries:
                # An entry opens with its name: "findall Return a list of all ...".
                found = terms(entry)
                own += found
                entry_of.append(doc.id)
                # The words of a name such as "findall" that its first line does not
                # say already ("Return a list of all matches"): saying "find" twice
                # would make `findmatch` ("Find a match") twice as much about it.
                halves = compounds.terms(entry.split(maxsplit=1)[0]) if entry.strip() else ()
                entry_terms.append(title + found + [t for t in halves if t not in found])
            document_terms.append(own)
        return Indexes(
            documents=BM25Index(document_terms, b=cls.length_normalisation),
            entries=BM25Index(entry_terms),
            entry_of=tuple(entry_of),
            associations=Associations.of(units or entry_terms or document_terms),
        )

    def expansion(self, query: Query) -> dict[str, float]:
        """The terms `query` brings with it, and their weights (`associations`)."""
        found = self.indexes.associations.expand(query.terms)
        return {term: EXPANSION * weight for term, weight in found.items()}

    @classmethod
    @abc.abstractmethod
    def load(cls) -> Corpus:
        """Read the source's documents and build their indexes."""

    @classmethod
    @abc.abstractmethod
    def fingerprint(cls) -> str:
        """What the documents are read from, cheaply: it changes when they may have.

        The index cache keys a saved index by it (`index_cache`).
        """

    def state(self) -> dict[str, object]:
        """What else than documents and indexes the source needs, as JSON (for a cache)."""
        return {}

    @classmethod
    def restore(
        cls, documents: list[Document], indexes: Indexes, state: dict[str, object]
    ) -> Corpus:
        """The source from its saved documents, indexes and `state`."""
        return cls(documents, indexes)

    def __len__(self) -> int:
        return len(self.documents)

    def document_frequencies(self) -> Counter[str]:
        """How many of the source's documents contain each term (for `relevance`)."""
        return self.indexes.documents.document_frequencies()

    def find(self, query: Query, limit: int) -> list[str]:
        """The ids of the `limit` best documents for `query`.

        Two rankings are fused by reciprocal rank (`FUSION_K`): the documents', and the
        order in which their entries (a function and its first line) first rank. A
        module whose one function is exactly what is asked ("walk: Directory tree
        generator") is found even when the module as a whole is about much else.
        """
        indexes = self.indexes
        extra = self.expansion(query)
        by_document = [self._ids[p] for p, _ in indexes.documents.rank(query, limit * 3, extra)]
        if not len(indexes.entries):
            return by_document[:limit]
        by_entry = list(
            dict.fromkeys(
                indexes.entry_of[p] for p, _ in indexes.entries.rank(query, limit * 10, extra)
            )
        )
        fused: dict[str, float] = {}
        for ranking in (by_document, by_entry):
            for rank, document in enumerate(ranking, start=1):
                fused[document] = fused.get(document, 0.0) + 1 / (FUSION_K + rank)
        # sorted() is stable: at equal scores, the document ranking's order stays.
        return sorted(fused, key=lambda document: -fused[document])[:limit]

    def read(self, document: str, query: Query, limit: int) -> list[Passage]:
        """The `limit` best passages of `document` for `query`; raises KeyError if unknown."""
        doc = self.documents[document]
        pieces, index = self._passages(doc)
        ranked = index.rank(query, limit, self.expansion(query))
        return [self._passage(doc, pieces[position], score) for position, score in ranked]

    def opening(self, document: str) -> Passage | None:
        """`document`'s first passage (score 0), None if it has none; raises KeyError if
        unknown. What it says it is about, when no passage has a word of the query."""
        doc = self.documents[document]
        pieces, _ = self._passages(doc)
        return self._passage(doc, pieces[0], 0.0) if pieces else None

    def _passages(self, doc: Document) -> tuple[list[SavedPassage], BM25Index]:
        if doc.id not in self._pieces:
            self._pieces[doc.id] = self._derive(doc)
        return self._pieces[doc.id]

    def _passage(self, doc: Document, piece: SavedPassage, score: float) -> Passage:
        passage = Passage(
            source=self.name,
            id=self.document_id(doc.id, piece.name),
            document=doc.title,
            section=piece.section,
            text=piece.text,
            score=round(score, 3),
        )
        if piece.module:
            passage["module"] = piece.module
        return passage

    def _derive(self, doc: Document) -> tuple[list[SavedPassage], BM25Index]:
        """`doc`'s passages and their index: read back when saved for its stamp, else
        split, tokenised and indexed (and saved, when a passage cache is kept)."""
        cache = self._saved
        stamp = "" if cache is None else self.stamp(doc)
        if cache is not None and (saved := cache.get(doc.id, stamp)) is not None:
            return saved
        pieces = list(self.pieces(doc))
        # The name a passage documents counts twice: `suppress` for "suppress".
        named = [f"{split_identifier(p.name.replace('.', '_'))} " * 2 for p in pieces]
        index = BM25Index(
            [terms(f"{n}{p.section} {p.text}") for n, p in zip(named, pieces, strict=True)]
        )
        derived = [SavedPassage(p.section, p.text, p.name, p.module) for p in pieces]
        if cache is not None:
            cache.put(doc.id, stamp, derived, index)
        return derived, index

    def document_id(self, document: str, name: str) -> str:
        """The stable id of a passage of `document` about `name` ("" for the document)."""
        return f"{self.name}:{document}"

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
            Document(
                id=key,
                title=f"{_first_line(text)} (pydoc topic {key!r})",
                text=_weighted(key.replace("-", " "), _first_line(text), text),
            )
            for key, text in sorted(topics.items())
        ]
        return cls(documents)

    @classmethod
    def fingerprint(cls) -> str:
        spec = importlib.util.find_spec("pydoc_data.topics")
        return _stat(Path(spec.origin)) if spec is not None and spec.origin else ""

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        from pydoc_data.topics import topics

        # The topic as written, not `doc.text` (whose first lines repeat its name to
        # weigh it); the title and its underline are the document's.
        body = topics[doc.id].split("\n", 2)[-1]
        for text in chunk(body):
            yield _Piece(section="", text=text)


class StdlibCorpus(Corpus):
    name = "stdlib"
    description = "docstrings of the standard library's modules, read from source with ast"

    # Not documentation a reader wants: tests, demos, the IDE, bundled installers, and
    # distutils (deprecated, gone in Python 3.12; setuptools has its own copy).
    _SKIP = frozenset(
        {
            "test",
            "tests",
            "idlelib",
            "lib2to3",
            "turtledemo",
            "ensurepip",
            "pydoc_data",
            "distutils",
        }
    )
    # Anchored on the newline, not on `^` with re.M: a pattern that opens with a literal
    # is searched for that character first, ten times faster over the ~9 MB of source.
    # Private definitions too: each ends the one before it (its docstring is not theirs).
    _DEFINITION = re.compile(r"\n[ \t]*+(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)")

    # Modules written in C whose documentation is not for a reader of the library (or
    # that warn or write to the terminal when imported).
    _SKIP_C = frozenset(
        {"audioop", "nis", "ossaudiodev", "spwd", "readline", "xxsubtype", "xxlimited"}
    )

    def __init__(
        self,
        documents: list[Document],
        root: Path,
        c_modules: Collection[str],
        sources: Mapping[str, Sequence[Path]] | None = None,
        indexes: Indexes | None = None,
    ) -> None:
        super().__init__(documents, indexes)
        self.root = root
        # The modules written in C: imported for their docstrings when read.
        self.c_modules = frozenset(c_modules)
        # The files each module's documentation is read from (`_implementation`).
        self.sources = {module: tuple(paths) for module, paths in (sources or {}).items()}

    @classmethod
    def fingerprint(cls) -> str:
        # Which modules there are; their text is the interpreter's own (its version is
        # in the cache key).
        root = Path(sysconfig.get_paths()["stdlib"])
        found = [str(root), *sys.builtin_module_names]
        for directory in (root, root / "lib-dynload"):
            with contextlib.suppress(OSError):  # no lib-dynload: nothing there to list
                found += sorted(os.listdir(directory))
        return "\n".join(found)

    def state(self) -> dict[str, object]:
        return {
            "root": str(self.root),
            "c_modules": sorted(self.c_modules),
            "sources": {m: [str(p) for p in paths] for m, paths in self.sources.items()},
        }

    @classmethod
    def restore(
        cls, documents: list[Document], indexes: Indexes, state: dict[str, object]
    ) -> StdlibCorpus:
        root, c_modules, sources = state["root"], state["c_modules"], state["sources"]
        if not (isinstance(root, str) and isinstance(c_modules, list)):
            raise ValueError("not a saved stdlib state")
        if not isinstance(sources, dict):
            raise ValueError("not a saved stdlib state")
        paths = {str(module): [Path(str(p)) for p in found] for module, found in sources.items()}
        return cls(documents, Path(root), [str(m) for m in c_modules], paths, indexes)

    @classmethod
    def load(cls, root: Path | None = None) -> StdlibCorpus:
        root = root or Path(sysconfig.get_paths()["stdlib"])
        documents = []
        sources: dict[str, list[Path]] = {}
        for module, path in cls._modules(root):
            source = path.read_text(encoding="utf-8", errors="replace")
            docstring = _module_docstring(source)
            read = [(path, source)]
            if not docstring.strip():
                read = cls._implementation(root, path, source)
                docstring = next(filter(None, (_module_docstring(text) for _, text in read)), "")
            sources[module] = [where for where, _ in read]
            entries = tuple(entry for _, text in read for entry in cls._definitions(text))
            text = _weighted(split_identifier(module.replace(".", "_")), docstring)
            documents.append(Document(id=module, title=module, text=text, entries=entries))
        c_modules = dict(cls._c_modules(root))
        for module, loaded in c_modules.items():
            entries = tuple(
                f"{split_identifier(name)} {_summary(str(value.__doc__))}"
                for name, value in _members(loaded)
            )
            text = _weighted(split_identifier(module), _c_docstring(module, loaded))
            documents.append(Document(id=module, title=module, text=text, entries=entries))
        documents.sort(key=lambda doc: doc.id)
        return cls(documents, root, list(c_modules), sources)

    @classmethod
    def _implementation(cls, root: Path, path: Path, source: str) -> list[tuple[Path, str]]:
        """The files that document a module without a docstring, and their sources.

        A module such as `decimal` only re-exports its implementation (`from _decimal
        import *`, else `from _pydecimal import *`): the documentation is in the first
        private module it star-imports that has a source file. A package such as
        `zoneinfo` or `tomllib` re-exports names from its private modules
        (`zoneinfo/_tzpath.py`): it is documented by them too. Otherwise, its own.
        """
        for private in _STAR_IMPORT.findall(source):
            candidate = root / f"{private.replace('.', '/')}.py"
            if candidate.is_file():
                return [(candidate, candidate.read_text(encoding="utf-8", errors="replace"))]
        found = [(path, source)]
        if path.name == "__init__.py":
            found += [
                (private, private.read_text(encoding="utf-8", errors="replace"))
                for private in sorted(path.parent.glob("_*.py"))
                if not private.name.startswith("__")
            ]
        return found

    @classmethod
    def _definitions(cls, source: str) -> Iterator[str]:
        """Each function's or class's name, with its docstring's first line if it has one.

        Found with regular expressions, not parsed: a docstring is the string that
        opens on the line after the colon that ends the signature (which can span
        lines), before the next definition.
        """
        text = "\n" + source  # a definition on the first line follows a newline too
        found = list(cls._DEFINITION.finditer(text))
        ends = [*(match.start() for match in found[1:]), len(text)][: len(found)]
        for match, end in zip(found, ends, strict=True):
            name = match[1]
            if name.startswith("_"):
                continue
            doc = _DOCSTRING.search(text, match.end(), min(end, match.end() + 800))
            # A one-line docstring's closing quotes are not its words.
            first = doc[1].strip().rstrip("\"'").rstrip() if doc is not None else ""
            yield f"{split_identifier(name)} {first}"

    @classmethod
    def _c_modules(cls, root: Path) -> Iterator[tuple[str, ModuleType]]:
        """The public modules written in C (built in, or in lib-dynload), imported."""
        dynload = root / "lib-dynload"
        shared = dynload.iterdir() if dynload.is_dir() else iter(())
        names = {*sys.builtin_module_names, *(p.name.split(".", 1)[0] for p in shared)}
        for name in sorted(names):
            if name.startswith("_") or name in cls._SKIP_C or not name.isidentifier():
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a deprecated module warns when imported
                try:
                    yield name, importlib.import_module(name)
                except ImportError:
                    continue

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

    def document_id(self, document: str, name: str) -> str:
        return f"stdlib:{document}.{name}" if name else f"stdlib:{document}"

    def stamp(self, doc: Document) -> str:
        # A C module's documentation is the interpreter's own (its version is in the key).
        if doc.id in self.c_modules:
            return ""
        return "\n".join(f"{path} {_stat(path)}" for path in self._files(doc.id))

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        module = doc.id
        if module in self.c_modules:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a deprecated module warns when imported
                loaded = importlib.import_module(module)
            yield from _c_pieces(module, loaded)
            return
        for path in self._files(module):
            yield from self._file_pieces(module, path)

    def _files(self, module: str) -> Sequence[Path]:
        """The source files a pure-Python module's passages are read from."""
        return self.sources.get(module) or (self._path(module),)

    def _file_pieces(self, module: str, path: Path) -> Iterator[_Piece]:
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            return
        for qualname, node in _documented(tree):
            docstring = _docstring(node)
            if not docstring:
                continue
            line = getattr(node, "lineno", 1)
            section = f"{module}.{qualname}" if qualname else module
            where = f"{section} ({path.relative_to(self.root)}:{line})"
            for text in chunk(docstring):
                yield _Piece(section=where, text=text, name=qualname)

    def _path(self, module: str) -> Path:
        relative = module.replace(".", "/")
        path = self.root / f"{relative}.py"
        return path if path.exists() else self.root / relative / "__init__.py"


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
            # Four fields read one by one: `.json` transforms every field of every
            # distribution, a tenth of a second for nothing.
            meta = dist.metadata
            name = _field(meta, "Name")
            key = re.sub(r"[-_.]+", "-", name).lower()
            if not key or key in seen or key in cls._OWN:
                continue
            seen.add(key)
            parts = [
                split_identifier(name.replace("-", "_")),
                _field(meta, "Summary"),
                _field(meta, "Keywords"),
                # The long description: its header, or the body (as `.json` reads it).
                _without_changelog(_field(meta, "Description")),
            ]
            documents.append(
                Document(id=key, title=f"{name} {dist.version}", text="\n\n".join(parts))
            )
        documents.sort(key=lambda doc: doc.id)
        return cls(documents)

    @classmethod
    def fingerprint(cls) -> str:
        # The distributions installed where `importlib.metadata` looks: their metadata
        # directories' names (name and version) and times.
        found = []
        for entry in sys.path:
            # Not a directory (a zip, or gone): no distributions there.
            with contextlib.suppress(OSError), os.scandir(entry or ".") as listing:
                found += [
                    f"{item.path} {_stat(Path(item.path))}"
                    for item in listing
                    if item.name.endswith((".dist-info", ".egg-info"))
                ]
        return "\n".join(sorted(found))

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        # Every passage of a README is about what its summary says ("Retry code until it
        # succeeds"): the summary is each passage's heading.
        summary = doc.text.split("\n\n", 2)[1] if doc.text.count("\n\n") >= 2 else ""
        for text in chunk(doc.text):
            # Badges, link lists and HTML say little: keep passages with some prose.
            if len(re.findall(r"\b[a-z]{3,}\b", text)) >= 5:
                yield _Piece(section=summary, text=text)


class DocsCorpus(Corpus):
    """Python's documentation pages (`manual`): one document per page, cited by section."""

    name = "docs"
    description = "Python's documentation: library reference, language reference, tutorial"

    def __init__(
        self,
        documents: list[Document],
        root: Path,
        indexes: Indexes | None = None,
        deprecated: Collection[str] = (),
    ) -> None:
        super().__init__(documents, indexes)
        self.root = root
        self.deprecated = frozenset(deprecated)

    @classmethod
    def load(cls) -> DocsCorpus:
        root = manual.documentation_root()
        if root is None:
            raise FileNotFoundError("no Python documentation sources on this machine")
        documents = []
        deprecated: list[str] = []
        # The expansion learns from each section: a unit of meaning, unlike a page.
        units: list[list[str]] = []
        for page, path in manual.pages(root):
            text = path.read_text(encoding="utf-8", errors="replace")
            deprecated += manual.deprecated_modules(text)
            sections = manual.page_sections(text)
            if not sections:
                continue
            units += [
                terms(f"{s.heading.rsplit(' > ', 1)[-1]} {s.anchor.replace('.', ' ')} {s.text}")
                for s in sections
            ]
            title = manual.page_title(text) or page
            module = next((s.module for s in sections if s.module), "")
            name = split_identifier(module.replace(".", "_")) if module else ""
            body = "\n\n".join(f"{s.heading}\n{s.text}" for s in sections)
            entries = tuple(
                f"{split_identifier(s.anchor.rsplit('.', 1)[-1].replace('-', '_'))} "
                f"{s.heading.rsplit(' > ', 1)[-1]} {s.first_line}"
                for s in sections
            )
            documents.append(
                Document(
                    id=page,
                    title=f"{title} ({page})",
                    text=_weighted(f"{name} {title}", sections[0].text, body),
                    entries=entries,
                )
            )
        documents.sort(key=lambda doc: doc.id)
        return cls(documents, root, cls._build(documents, units), deprecated)

    @classmethod
    def fingerprint(cls) -> str:
        root = manual.documentation_root()
        if root is None:
            return ""
        return "\n".join(f"{page} {_stat(path)}" for page, path in manual.pages(root))

    def state(self) -> dict[str, object]:
        return {"root": str(self.root), "deprecated": sorted(self.deprecated)}

    @classmethod
    def restore(
        cls, documents: list[Document], indexes: Indexes, state: dict[str, object]
    ) -> DocsCorpus:
        root, deprecated = state["root"], state.get("deprecated", [])
        if not isinstance(root, str) or not isinstance(deprecated, list):
            raise ValueError("not a saved docs state")
        return cls(documents, Path(root), indexes, [str(m) for m in deprecated])

    def document_id(self, document: str, name: str) -> str:
        return f"docs:{document}#{name}" if name else f"docs:{document}"

    def stamp(self, doc: Document) -> str:
        return _stat(self._page(doc))

    def pieces(self, doc: Document) -> Iterator[_Piece]:
        path = self._page(doc)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for section in manual.page_sections(text):
            where = section.heading
            if "." in section.anchor:  # a name it documents (a heading's anchor has none)
                where = f"{section.heading} > {section.anchor}"
            for passage in chunk(section.text):
                yield _Piece(where, passage, name=section.anchor, module=section.module)

    def _page(self, doc: Document) -> Path:
        return self.root / f"{doc.id}.rst.txt"


# The documentation pages where the machine has them; the other sources everywhere.
SOURCES = (
    ("docs", "pydoc", "stdlib", "packages")
    if manual.documentation_root() is not None
    else ("pydoc", "stdlib", "packages")
)
CORPORA: Mapping[str, type[Corpus]] = {
    "docs": DocsCorpus,
    "pydoc": PydocCorpus,
    "stdlib": StdlibCorpus,
    "packages": PackagesCorpus,
}


def load_corpus(name: str) -> Corpus:
    """Build the named source's index (a fraction of a second each; `index_cache` keeps it)."""
    return CORPORA[name].load()


def _stat(path: Path) -> str:
    """A file's size and modification time, "" when it cannot be read."""
    try:
        found = path.stat()
    except OSError:
        return ""
    return f"{found.st_size} {found.st_mtime_ns}"


def _field(meta: PackageMetadata, key: str) -> str:
    """A metadata field's first value, "" when absent (`meta[key]` warns then)."""
    found = meta.get_all(key)
    return str(found[0]) if found else ""


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


# `from _private import *`, at any indentation (decimal's is inside a `try:`).
_STAR_IMPORT = re.compile(r"^[ \t]*from[ \t]+(_[\w.]+)[ \t]+import[ \t]+\*", re.M)

# The colon that ends a signature, then a docstring's opening quotes and first line.
# (One-quoted too: `functools.cache` has 'Simple lightweight unbounded cache. ...'.)
_DOCSTRING = re.compile(r""":[ \t]*(?:#[^\n]*)?\n[ \t]*[rRuU]?(?:"{3}|'{3}|"|')\\?\s*([^\n]*)""")


def _summary(docstring: str, words: int = 30) -> str:
    """The opening `words` words of a docstring (a C one may open with a signature)."""
    return " ".join(docstring.split()[:words])


def _weighted(name: str, docstring: str, rest: str = "") -> str:
    """A document's first-stage text: its name three times, its first line twice."""
    first = _first_line(docstring) if docstring.strip() else ""
    return "\n".join([name, name, name, first, first, docstring, rest])


# A Markdown or reST heading that starts a package's release history.
_CHANGELOG = re.compile(
    r"^(?:#+[ \t]*)?(?:change ?log|changes|history|release notes|release history|"
    r"news|what's new)\b[^\n]*(?:\n[=~^*-]{3,})?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


def _without_changelog(description: str) -> str:
    """A long description cut where its release history starts."""
    found = _CHANGELOG.search(description)
    return description if found is None else description[: found.start()]


def _members(module: ModuleType) -> list[tuple[str, object]]:
    """A C module's public functions and classes that have a docstring."""
    return [
        (name, value)
        for name, value in sorted(vars(module).items())
        if not name.startswith("_")
        and (callable(value) or isinstance(value, type))
        and getattr(value, "__doc__", None)
    ]


def _c_docstring(module: str, loaded: ModuleType) -> str:
    """A C module's docstring; without one, that of the type it is named after.

    `mmap` documents itself in `mmap.mmap` ("Maps length bytes from the file ...").
    """
    if loaded.__doc__:
        return loaded.__doc__
    namesake = getattr(loaded, module, None)
    return str(namesake.__doc__) if isinstance(namesake, type) and namesake.__doc__ else ""


def _c_pieces(module: str, loaded: ModuleType) -> Iterator[_Piece]:
    """A C module's passages: its docstring, then each public member's (methods too)."""
    for text in chunk(loaded.__doc__ or ""):
        yield _Piece(section=f"{module} (built in)", text=text)
    for name, value in _members(loaded):
        documented: list[tuple[str, object]] = [(name, value)]
        if isinstance(value, type):
            documented += [
                (f"{name}.{attr}", member)
                for attr, member in sorted(vars(value).items())
                if not attr.startswith("_")
                and callable(member)
                and getattr(member, "__doc__", None)
            ]
        for qualname, member in documented:
            for text in chunk(str(member.__doc__)):
                yield _Piece(section=f"{module}.{qualname} (built in)", text=text, name=qualname)


def _module_docstring(source: str) -> str:
    """The module's docstring from its first tokens, without parsing the whole file."""
    skip = {tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE}
    # A few modules assign it instead (`__doc__ = """..."""`, hashlib): that counts too.
    assignment = [(tokenize.NAME, "__doc__"), (tokenize.OP, "=")]
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in skip:
                continue
            if assignment and (token.type, token.string) == assignment[0]:
                assignment.pop(0)
                continue
            if token.type == tokenize.STRING and len(assignment) in (0, 2):
                value = ast.literal_eval(token.string)
                return value if isinstance(value, str) else ""
            return ""
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return ""


def _docstring(node: _Documented) -> str | None:
    """`ast.get_docstring`, and for a module a top-level `__doc__ = "..."` as well."""
    found = ast.get_docstring(node)
    if found or not isinstance(node, ast.Module):
        return found
    for statement in node.body:
        if (
            isinstance(statement, ast.Assign)
            and [getattr(t, "id", None) for t in statement.targets] == ["__doc__"]
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            return inspect.cleandoc(statement.value.value)
    return None


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
