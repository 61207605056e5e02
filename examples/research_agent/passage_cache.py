"""A document's passages and their BM25 index, made once, kept beside its source's index.

Reading a document (`Corpus.read`) splits it into passages (a stdlib module's by parsing
its source with `ast`, a documentation page's by its sections), each passage into index
terms, and indexes them for BM25. Once the sources' indexes are read back from the
cache, that was about half of an offline run, repeated for the same documents at every
run. So it is saved too, one directory per document, inside its source's saved index
(`index_cache`): that directory's key already says what the source is built from (the
interpreter, the code, the source's fingerprint), and each document's is named by what
its passages are read from beyond that (its files' sizes and times, `Corpus.stamp`). A
document whose file changed has another name: it is read again, never answered from
its old passages.

Saving is atomic and may race: a document's directory is written under a temporary
name and renamed into place, so a reader sees a whole one or none, and two runs saving
the same document at once keep one of two identical results (what is derived from the
same files by the same code is the same). A saved document that cannot be read is made
again and saved over; one that cannot be written is not saved, and the first such
failure is logged (`passages_unsaved`): the cache only ever saves time, it never fails a
search.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from .ranking import BM25Index

__all__ = ["FORMAT", "PassageCache", "SavedPassage"]

# The layout of a saved document; a change of layout changes it.
FORMAT = 1
_META = "passages.json"

# What a damaged or vanished file can raise while it is read: OSError, NumPy's EOFError
# and ValueError, JSON's ValueError (UnicodeDecodeError too), TypeError or LookupError
# for a valid file of the wrong shape.
_UNREADABLE = (OSError, EOFError, ValueError, TypeError, LookupError)

_log = structlog.get_logger("examples.research_agent.passage_cache")


@dataclass(frozen=True, slots=True)
class SavedPassage:
    """One passage as `Corpus.pieces` gave it."""

    section: str
    text: str
    name: str
    module: str


class PassageCache:
    """The saved passages of one source's documents, in `directory`, for index `key`."""

    def __init__(self, directory: Path, key: str) -> None:
        """`directory` is made inside the saved index (which must exist) on the first save."""
        self.directory = directory
        self.key = key
        self._failed = False  # a save failed: said once, not for every document after it

    def get(self, document: str, stamp: str) -> tuple[list[SavedPassage], BM25Index] | None:
        """The saved passages of `document` as of `stamp`, and their index; None when
        there are none (or they cannot be read)."""
        place = self._place(document, stamp)
        try:
            meta = json.loads((place / _META).read_text(encoding="utf-8"))
            if [meta["format"], meta["key"], meta["document"], meta["stamp"]] != [
                FORMAT,
                self.key,
                document,
                stamp,
            ]:
                return None
            passages = [_passage(row) for row in meta["passages"]]
            index = BM25Index.load(place)
        except _UNREADABLE:
            return None
        if len(index) != len(passages):
            return None
        return passages, index

    def put(
        self, document: str, stamp: str, passages: Sequence[SavedPassage], index: BM25Index
    ) -> bool:
        """Save `passages` and their `index` as `document`'s as of `stamp`; False when
        they cannot be written."""
        meta = {
            "format": FORMAT,
            "key": self.key,
            "document": document,
            "stamp": stamp,
            "passages": [[p.section, p.text, p.name, p.module] for p in passages],
        }
        place = self._place(document, stamp)
        try:
            # Not `parents=True`: a saved index that another run just removed (its key
            # changed) is not made again half-empty; this document goes unsaved.
            self.directory.mkdir(exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.directory, prefix=".") as work:
                staged = Path(work) / "document"
                index.save(staged)
                # Written last: a directory without it is not a saved document.
                (staged / _META).write_text(json.dumps(meta), encoding="utf-8")
                _move(staged, place, Path(work) / "replaced")
        except OSError as exc:
            if not self._failed:
                self._failed = True
                _log.warning("passages_unsaved", directory=str(self.directory), reason=str(exc))
            return False
        return True

    def _place(self, document: str, stamp: str) -> Path:
        # A document id may hold any character ("library/os", "os.path"): named by a
        # hash, of its stamp too, so that a changed file is never looked up as before.
        digest = hashlib.sha256(f"{document}\0{stamp}".encode("utf-8", "surrogatepass"))
        return self.directory / digest.hexdigest()[:32]


def _move(staged: Path, place: Path, aside: Path) -> None:
    """Rename `staged` to `place`; a saved one there (unreadable, since it is being made
    again) is first moved `aside`, into the temporary directory that goes after."""
    try:
        staged.rename(place)
        return
    except OSError:
        if not place.is_dir():
            raise
    # Another run may have just saved the same (identical) document: replacing it with
    # ours is harmless, and leaves no unreadable one behind.
    with contextlib.suppress(OSError):
        place.rename(aside)
    try:
        staged.rename(place)
    except OSError:
        # Another run renamed its own into place first: ours is not needed.
        if not place.is_dir():
            raise


def _passage(row: object) -> SavedPassage:
    if not (isinstance(row, list) and len(row) == 4 and all(isinstance(c, str) for c in row)):
        raise TypeError("not a saved passage")
    section, text, name, module = row
    return SavedPassage(section, text, name, module)
