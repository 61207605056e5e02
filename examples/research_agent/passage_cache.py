"""A document's passages, split and tokenised once, kept beside its source's saved index.

Reading a document (`Corpus.read`) splits it into passages (a stdlib module's by parsing
its source with `ast`, a documentation page's by its sections) and each passage into
index terms. Once the indexes are read back from the cache, that was about half of an
offline run, repeated for the same documents at every run. So what a document's
passages are is saved too, one file per document, in its source's saved index
(`index_cache`): that directory's key already says what the source is built from (the
interpreter, the code, the source's fingerprint), and each file is stamped with what
its document's passages are read from beyond that (its files' sizes and times,
`Corpus.stamp`). A file is used only for the same key, document and stamp: a changed
file is read again, never answered from its old passages.

Saving is atomic and may race: a file is written under a temporary name and renamed
over its place, so a reader sees a whole file or none, and two runs saving the same
document at once leave one of two identical files. A file that cannot be read is
derived again (and saved over); one that cannot be written is not saved: the cache only
ever saves time, it never fails a search.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FORMAT", "PassageCache", "SavedPassage"]

# The layout of a saved file; a change of layout changes it.
FORMAT = 1

# What a damaged file can raise while it is read: OSError (gone, unreadable), JSON's
# ValueError (UnicodeDecodeError too), TypeError or LookupError for a valid file of the
# wrong shape.
_UNREADABLE = (OSError, ValueError, TypeError, LookupError)


@dataclass(frozen=True, slots=True)
class SavedPassage:
    """One passage as `Corpus.pieces` gave it, and its index terms."""

    section: str
    text: str
    name: str
    module: str
    terms: tuple[str, ...]


class PassageCache:
    """The saved passages of one source's documents, in `directory`, for index `key`."""

    def __init__(self, directory: Path, key: str) -> None:
        """`directory` is made inside the saved index (which must exist) on the first save."""
        self.directory = directory
        self.key = key

    def get(self, document: str, stamp: str) -> list[SavedPassage] | None:
        """The saved passages of `document` as of `stamp`; None when there are none (or
        they were saved for another key or stamp, or cannot be read)."""
        try:
            data = json.loads(self._place(document).read_text(encoding="utf-8"))
            if [data["format"], data["key"], data["document"], data["stamp"]] != [
                FORMAT,
                self.key,
                document,
                stamp,
            ]:
                return None
            return [_passage(row) for row in data["passages"]]
        except _UNREADABLE:
            return None

    def put(self, document: str, stamp: str, passages: Sequence[SavedPassage]) -> bool:
        """Save `passages` as `document`'s as of `stamp`; False when it cannot be written."""
        data = {
            "format": FORMAT,
            "key": self.key,
            "document": document,
            "stamp": stamp,
            # A term never holds a space (`text.terms`): one string per passage is a
            # fraction of a list's size and time to read.
            "passages": [
                [p.section, p.text, p.name, p.module, " ".join(p.terms)] for p in passages
            ],
        }
        try:
            # Not `parents=True`: a saved index that another run just removed (its key
            # changed) is not made again half-empty; this document goes unsaved.
            self.directory.mkdir(exist_ok=True)
            handle, staged = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    json.dump(data, file)
                os.replace(staged, self._place(document))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(staged)
                raise
        except OSError:
            return False
        return True

    def _place(self, document: str) -> Path:
        # A document id may hold any character ("library/os", "os.path"): name by its hash.
        name = hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self.directory / f"{name}.json"


def _passage(row: object) -> SavedPassage:
    if not (isinstance(row, list) and len(row) == 5 and all(isinstance(c, str) for c in row)):
        raise TypeError("not a saved passage")
    section, text, name, module, terms = row
    return SavedPassage(section, text, name, module, tuple(terms.split()))
