"""Which words go together: a query expansion learned from the sources' own text.

BM25 only meets the words a question uses. A person asks to "run code when the program
exits"; the documentation says "functions registered are executed upon normal interpreter
termination" under `atexit`. The words that answer co-occur, in the sources themselves,
with the words that ask: in the short units every source is ranked by in its first stage
(a function's name and first line, a documentation section's heading and first line),
"hash" goes with "hashlib", "digest", "hmac"; "wildcard" with "fnmatch" and "glob".

So each source counts, when its index is built, which terms share a unit (a sparse
unit x term incidence, NumPy arrays, saved with the index): the sections of the
documentation pages, the functions' first lines of the stdlib. At query time a term's
associates are the terms whose units overlap most with its own (the cosine of their
incidence columns, Ochiai's coefficient):

    association(t, u) = count(t, u) / sqrt(count(t) * count(u))

keeping at most `PER_TERM` associates of each query term, each at least `FLOOR` and in
`MIN_UNITS` units with it; terms in more than `_COMMON` of the units ("return", "in")
neither expand nor are added, and a source of fewer than `MIN_CORPUS` units learns
nothing. Offline, no model: a few milliseconds a query on 2 cores.
The expansion is fused with BM25, never in place of it: a source ranks its documents by
the question's words and by the expanded query, fused by reciprocal rank (`sources`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["FLOOR", "MIN_CORPUS", "MIN_UNITS", "PER_TERM", "Associations"]

PER_TERM = 3
FLOOR = 0.2
MIN_UNITS = 3
# A term in more units than this share of them says little about any one question.
_COMMON = 0.05
# Fewer units than this (pydoc's 85 topics, a few hundred package descriptions) make
# chance look like meaning: such a source learns no expansion.
MIN_CORPUS = 1000


class Associations:
    """Terms that share units, counted once when a source is indexed."""

    _FILE = "associations.npz"
    _VOCABULARY = "associations.json"

    def __init__(self, vocabulary: Sequence[str], indptr: np.ndarray, indices: np.ndarray) -> None:
        """`indptr`/`indices`: each unit's term numbers (CSR rows of unit x term)."""
        self._vocabulary = list(vocabulary)
        self._number = {term: n for n, term in enumerate(self._vocabulary)}
        self._units = len(indptr) - 1
        self._indptr = indptr.astype(np.int64)
        self._indices = indices.astype(np.int32)
        counts = np.bincount(self._indices, minlength=len(self._vocabulary))
        self._counts = counts.astype(np.int64)
        # The transpose: each term's units (CSC), for its co-occurrences.
        order = np.argsort(self._indices, kind="stable")
        rows = np.repeat(np.arange(self._units, dtype=np.int32), np.diff(self._indptr))
        self._units_of = rows[order]
        self._term_ptr = np.concatenate([[0], np.cumsum(self._counts)])
        self._cache: dict[str, list[tuple[str, float]]] = {}

    @classmethod
    def of(cls, units: Iterable[Iterable[str]]) -> Associations:
        """Count the terms of each unit (a unit's repeated terms count once)."""
        number: dict[str, int] = {}
        indptr = [0]
        indices: list[int] = []
        for unit in units:
            found = {number.setdefault(term, len(number)) for term in unit}
            indices += sorted(found)
            indptr.append(len(indices))
        vocabulary = sorted(number, key=number.__getitem__)
        return cls(vocabulary, np.asarray(indptr), np.asarray(indices, dtype=np.int32))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.savez(directory / self._FILE, indptr=self._indptr, indices=self._indices)
        (directory / self._VOCABULARY).write_text(json.dumps(self._vocabulary), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> Associations:
        """What `save` wrote; raises OSError or ValueError when it cannot be read."""
        vocabulary = json.loads((directory / cls._VOCABULARY).read_text(encoding="utf-8"))
        with np.load(directory / cls._FILE, allow_pickle=False) as saved:
            indptr, indices = saved["indptr"], saved["indices"]
        if not isinstance(vocabulary, list) or (len(indices) and indices.max() >= len(vocabulary)):
            raise ValueError(f"{directory}: not saved associations")
        return cls([str(term) for term in vocabulary], indptr, indices)

    def associates(self, term: str) -> list[tuple[str, float]]:
        """The terms that go with `term`, strongest first, with their association."""
        if term in self._cache:
            return self._cache[term]
        found: list[tuple[str, float]] = []
        n = self._number.get(term)
        # A rare term's units say what it means; a common one's say nothing in particular.
        if (
            n is not None
            and self._units >= MIN_CORPUS
            and MIN_UNITS <= self._counts[n] <= _COMMON * self._units
        ):
            units = self._units_of[self._term_ptr[n] : self._term_ptr[n + 1]]
            rows = [self._indices[self._indptr[u] : self._indptr[u + 1]] for u in units]
            together = np.bincount(np.concatenate(rows), minlength=len(self._vocabulary))
            together[n] = 0
            common = self._counts > _COMMON * self._units
            together[common] = 0
            candidates = np.flatnonzero(together >= MIN_UNITS)
            if len(candidates):
                size = self._counts[candidates] * self._counts[n]
                score = together[candidates] / np.sqrt(size)
                best = np.argsort(-score, kind="stable")[:PER_TERM]
                found = [
                    (self._vocabulary[candidates[b]], round(float(score[b]), 3))
                    for b in best
                    if score[b] >= FLOOR
                ]
        self._cache[term] = found
        return found

    def expand(self, terms: Sequence[str]) -> dict[str, float]:
        """The terms a query of `terms` brings with it, each with its strongest association."""
        extra: dict[str, float] = {}
        for term in terms:
            for associate, weight in self.associates(term):
                if associate not in terms:
                    extra[associate] = max(extra.get(associate, 0.0), weight)
        return extra
