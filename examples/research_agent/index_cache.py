"""The sources' indexes, built once and kept on disk, in the user's cache directory.

Building the stdlib's index reads ~550 files and ~11,000 definitions: most of an
offline run. The indexes only change when what they are built from changes, so each is
saved under a key of exactly that: the interpreter (implementation and version), the
index code (a hash of the modules that build it), bm25s' version and the source's own
`fingerprint` (the pydoc topics file, the list of stdlib modules, the installed
distributions). A run whose key has a saved index loads it (NumPy arrays and JSON, no
pickle); any other run builds the index and saves it. What a search derives from each
document it reads (its passages and their BM25 index) is saved in the same directory as
it goes (`passage_cache`), under the same key.

A cache that cannot be read (a half-written or corrupt file, another format) is
rebuilt: reading it is an optimisation, never a reason for the run to fail. So is a
cache that cannot be written (a read-only home): the built index is used, unsaved. What
happened, and why, is in the returned `Loaded`; the command line says it on stderr.

Saving is atomic: an index is written to a temporary directory next to its place and
renamed into it, so a reader never sees half of one, and two runs saving at once keep
one of the two identical results.
"""

from __future__ import annotations

import enum
import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import bm25s

from .associations import Associations
from .passage_cache import PassageCache
from .ranking import BM25Index
from .sources import CORPORA, Corpus, Document, Indexes

__all__ = ["FORMAT", "IndexCache", "Loaded", "Origin"]

# The layout of a saved index; a change of layout changes it (3: saved passages).
FORMAT = 3
# The modules whose code decides what an index holds.
_CODE = (
    "sources.py",
    "manual.py",
    "associations.py",
    "ranking.py",
    "text.py",
    "compounds.py",
    "shapes.py",  # how a document is cut into the passages saved with it
    "passage_cache.py",
    "index_cache.py",
)
_PASSAGES = "passages"
_META = "corpus.json"

# What a corrupt file can raise while it is read: NumPy's EOFError and ValueError,
# JSON's ValueError, KeyError or TypeError for a valid file of the wrong shape.
_UNREADABLE = (OSError, EOFError, ValueError, LookupError, TypeError)


class Origin(enum.Enum):
    """Where a loaded index came from."""

    CACHE = "cache"  # read back from the cache
    BUILT = "built"  # built: the cache had none for this key (and it is saved now)
    REBUILT = "rebuilt"  # built: the cache had one that could not be read


@dataclass(frozen=True, slots=True)
class Loaded:
    """A source's index, where it came from, and why it was (re)built or not saved."""

    corpus: Corpus
    origin: Origin
    reason: str = ""  # why it was built or rebuilt; "" when read back
    not_saved: str = ""  # why a built index could not be saved; "" when it was

    def describe(self) -> str:
        """One line for the user: "from cache", or what was built and why."""
        if self.origin is Origin.CACHE:
            return "from the index cache"
        saved = f"; not cached: {self.not_saved}" if self.not_saved else "; cached"
        return f"{self.origin.value}: {self.reason}{saved}"


class IndexCache:
    """Saved indexes in `directory`, one subdirectory per source and key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def load(self, name: str) -> Loaded:
        """The named source's index: read back if saved under its key, else built (and saved)."""
        kind = CORPORA[name]
        key = self.key(name)
        place = self.directory / f"{name}-{key}"
        origin, reason = Origin.BUILT, "no saved index for this interpreter and code"
        if place.is_dir():
            try:
                corpus = _read(kind, place, key)
            except _UNREADABLE as exc:
                origin = Origin.REBUILT
                reason = f"the saved index in {place} was unreadable ({type(exc).__name__})"
            else:
                corpus.keep_passages(PassageCache(place / _PASSAGES, key))
                return Loaded(corpus, Origin.CACHE)
        corpus = kind.load()
        try:
            self._save(name, corpus, key, place)
        except OSError as exc:
            return Loaded(corpus, origin, reason, not_saved=f"{type(exc).__name__}: {exc}")
        corpus.keep_passages(PassageCache(place / _PASSAGES, key))
        return Loaded(corpus, origin, reason)

    def key(self, name: str) -> str:
        """What the named source's index is built from, hashed (16 hex digits)."""
        digest = hashlib.sha256()
        here = Path(__file__).parent
        for part in (
            str(FORMAT),
            sys.implementation.cache_tag or sys.implementation.name,
            sys.version,
            bm25s.__version__,
            *((here / module).read_text(encoding="utf-8") for module in _CODE),
            CORPORA[name].fingerprint(),
        ):
            digest.update(part.encode("utf-8", "replace"))
            digest.update(b"\0")
        return digest.hexdigest()[:16]

    def _save(self, name: str, corpus: Corpus, key: str, place: Path) -> None:
        """Write the index to `place`, atomically; raises OSError when it cannot."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.directory, prefix=f".{name}-") as work:
            staged = Path(work) / "index"
            _write(corpus, staged, key)
            # An older index of this source (another key, or unreadable) is of no use.
            for old in self.directory.glob(f"{name}-*"):
                shutil.rmtree(old, ignore_errors=True)
            try:
                staged.rename(place)
            except OSError:
                # Another run renamed its own (identical) index into place first.
                if not place.is_dir():
                    raise


def _write(corpus: Corpus, directory: Path, key: str) -> None:
    indexes = corpus.indexes
    indexes.documents.save(directory / "documents")
    indexes.entries.save(directory / "entries")
    indexes.associations.save(directory / "associations")
    meta = {
        "format": FORMAT,
        "key": key,
        "documents": [
            [doc.id, doc.title, doc.text, list(doc.entries)] for doc in corpus.documents.values()
        ],
        "entry_of": list(indexes.entry_of),
        "state": corpus.state(),
    }
    # Written last: a directory without it is not a saved index.
    (directory / _META).write_text(json.dumps(meta), encoding="utf-8")


def _read(kind: type[Corpus], directory: Path, key: str) -> Corpus:
    meta = json.loads((directory / _META).read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("key") != key:
        raise ValueError("another format or key")
    documents = [
        Document(id=str(i), title=str(title), text=str(text), entries=tuple(map(str, entries)))
        for i, title, text, entries in meta["documents"]
    ]
    indexes = Indexes(
        documents=BM25Index.load(directory / "documents"),
        entries=BM25Index.load(directory / "entries"),
        entry_of=tuple(str(i) for i in meta["entry_of"]),
        associations=Associations.load(directory / "associations"),
    )
    if len(indexes.documents) != len(documents) or len(indexes.entries) != len(indexes.entry_of):
        raise ValueError("the indexes and the documents disagree")
    state = meta["state"]
    if not isinstance(state, dict):
        raise TypeError("the saved state is not an object")
    return kind.restore(documents, indexes, state)
