"""Queries and BM25 ranking (bm25s: sparse-matrix BM25, the Lucene variant).

Query syntax: plain words are ranked by BM25; words in double quotes must also appear
in every result: `"cancellation" asyncio task` finds passages that mention
cancellation, best first for asyncio and task. Words are stemmed, so `"cancellation"`
also matches "cancelled" and "cancel()".
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from .text import terms

__all__ = ["BM25Index", "Query", "QuerySyntaxError", "parse_query"]

_QUOTED = re.compile(r'"([^"]*)"')


class QuerySyntaxError(ValueError):
    """The query cannot be searched as written; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: its stemmed terms and the ones every result must contain."""

    text: str
    terms: tuple[str, ...]
    required: frozenset[str]

    @property
    def has_syntax(self) -> bool:
        """Whether the query uses more than plain words (quotes, for now)."""
        return '"' in self.text


def parse_query(text: str) -> Query:
    """Parse `text`; raises QuerySyntaxError for an unbalanced quote or no searchable word."""
    if text.count('"') % 2:
        raise QuerySyntaxError(f"unbalanced double quote in {text!r}")
    required = frozenset(t for phrase in _QUOTED.findall(text) for t in terms(phrase))
    ordered = tuple(dict.fromkeys(terms(text.replace('"', " "))))
    if not ordered:
        raise QuerySyntaxError(f"no searchable word in {text!r} (only stopwords or symbols)")
    return Query(text=text, terms=ordered, required=required)


class BM25Index:
    """BM25 over a fixed list of documents, each given as its list of terms.

    It can be saved to a directory and loaded back (`save`, `load`): bm25s' own files
    (NumPy arrays and JSON, no pickle) and the document frequencies, so a big index is
    built once, not at every run (`index_cache`).
    """

    _FREQUENCIES = "frequencies.json"

    def __init__(self, documents: Sequence[Sequence[str]], *, b: float = 0.75) -> None:
        """`b` is BM25's length normalisation: 0 ignores a document's length, 1 divides
        by it (bm25s' default is 0.75)."""
        self._size = len(documents)
        self._frequencies = Counter(term for doc in documents for term in set(doc))
        self._bm25 = bm25s.BM25(b=b)
        if documents:
            self._bm25.index([list(doc) for doc in documents], show_progress=False)

    @classmethod
    def load(cls, directory: Path) -> BM25Index:
        """The index `save` wrote to `directory`; raises OSError or ValueError if unreadable."""
        meta = json.loads((directory / cls._FREQUENCIES).read_text(encoding="utf-8"))
        size, frequencies = meta["size"], meta["frequencies"]
        if not isinstance(size, int) or not isinstance(frequencies, dict):
            raise ValueError(f"{directory}: not a saved index")
        index = cls.__new__(cls)
        index._size = size
        index._frequencies = Counter(frequencies)
        if not size:  # nothing to rank: bm25s saved nothing
            index._bm25 = bm25s.BM25()
            return index
        index._bm25 = bm25s.BM25.load(directory, mmap=False, show_progress=False)
        if index._bm25.scores["num_docs"] != size:
            raise ValueError(f"{directory}: the index has a different number of documents")
        return index

    def save(self, directory: Path) -> None:
        """Write the index to `directory` (created if needed), for `load`."""
        directory.mkdir(parents=True, exist_ok=True)
        if self._size:
            self._bm25.save(directory, show_progress=False)
        meta = {"size": self._size, "frequencies": self._frequencies}
        (directory / self._FREQUENCIES).write_text(json.dumps(meta), encoding="utf-8")

    def __len__(self) -> int:
        return self._size

    def rank(
        self, query: Query, limit: int, extra: Mapping[str, float] | None = None
    ) -> list[tuple[int, float]]:
        """The best `limit` (position, score) pairs: a positive score, every required term.

        `extra` adds terms the query does not say, each at its weight (a term's BM25
        score times the weight): the expansion `associations` learns.
        """
        if not self._size:
            return []
        scores = np.asarray(self._bm25.get_scores(list(query.terms)), dtype=float)
        for term, weight in (extra or {}).items():
            if term in self._frequencies:
                scores = scores + weight * np.asarray(self._bm25.get_scores([term]))
        # A document has a term exactly when its BM25 score for that term alone is
        # positive (Lucene's idf is always positive).
        for term in query.required:
            scores = np.where(self._has(term), scores, 0.0)
        ranked: list[tuple[int, float]] = []
        # A stable sort keeps ties in document order, so runs are reproducible.
        for position in np.argsort(-scores, kind="stable"):
            score = float(scores[position])
            if score <= 0 or len(ranked) >= limit:
                break
            ranked.append((int(position), score))
        return ranked

    def document_frequencies(self) -> Counter[str]:
        """How many documents contain each term."""
        return Counter(self._frequencies)

    def coverage(self, position: int, query: Query) -> float:
        """The share of the query's terms that document `position` contains."""
        found = sum(bool(self._has(term)[position]) for term in query.terms)
        return found / len(query.terms)

    def _has(self, term: str) -> np.ndarray:  # of bools
        if term not in self._frequencies:
            return np.zeros(self._size, dtype=bool)
        return np.asarray(self._bm25.get_scores([term])) > 0
