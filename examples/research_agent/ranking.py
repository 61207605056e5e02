"""Queries and BM25 ranking (bm25s: sparse-matrix BM25, the Lucene variant).

Query syntax: plain words are ranked by BM25; words in double quotes must also appear
in every result: `"cancellation" asyncio task` finds passages that mention
cancellation, best first for asyncio and task. Words are stemmed, so `"cancellation"`
also matches "cancelled" and "cancel()".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

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
    """BM25 over a fixed list of documents, each given as its list of terms."""

    def __init__(self, documents: Sequence[Sequence[str]], *, b: float = 0.75) -> None:
        """`b` is BM25's length normalisation: 0 ignores a document's length, 1 divides
        by it (bm25s' default is 0.75)."""
        self._sets = [frozenset(doc) for doc in documents]
        self._bm25 = bm25s.BM25(b=b)
        if documents:
            self._bm25.index([list(doc) for doc in documents], show_progress=False)

    def __len__(self) -> int:
        return len(self._sets)

    def rank(self, query: Query, limit: int) -> list[tuple[int, float]]:
        """The best `limit` (position, score) pairs: a positive score, every required term."""
        if not self._sets:
            return []
        scores = np.asarray(self._bm25.get_scores(list(query.terms)))
        ranked: list[tuple[int, float]] = []
        # A stable sort keeps ties in document order, so runs are reproducible.
        for position in np.argsort(-scores, kind="stable"):
            score = float(scores[position])
            if score <= 0 or len(ranked) >= limit:
                break
            if query.required <= self._sets[position]:
                ranked.append((int(position), score))
        return ranked

    def document_frequencies(self) -> Counter[str]:
        """How many documents contain each term."""
        return Counter(term for terms_of_doc in self._sets for term in terms_of_doc)

    def coverage(self, position: int, query: Query) -> float:
        """The share of the query's terms that document `position` contains."""
        return len(self._sets[position] & set(query.terms)) / len(query.terms)
