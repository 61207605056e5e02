"""One relevance score for every passage, whatever source or subtopic found it.

BM25 scores are comparable inside one document only: a passage's score depends on
that document's lengths and term counts. To merge findings from three sources and
several subtopics into one ranking, every passage is scored again against the same
question with the same statistics:

    relevance = sum of idf(t) over the question's terms t the passage has
                / sum of idf(t) over all the question's terms

where idf comes from the document frequencies of all the sources together, so a
rare word ("delimiter", "chomp") weighs more than a common one ("file", "object"),
and a word no source knows weighs the most. A term found in the passage's name (its
document id and the function or class it documents) counts for the passage with a
bonus: the passage is *about* it. The score is in 0..1.

A passage is relevant when it has the words that carry at least half (`FLOOR`) of the
weight of the query that found it, and a quarter (`QUESTION_FLOOR`) of the question's.
A coverage entry is `covered` only when one of its passages is relevant (see `merge`).

Its figures on the evaluation set: `python -m examples.research_agent.eval`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .ranking import parse_query
from .sources import Corpus, Passage
from .text import split_identifier, terms

__all__ = ["FLOOR", "NAME_BONUS", "QUESTION_FLOOR", "SOURCE_WEIGHTS", "Scorer"]

FLOOR = 0.5
# A subtopic's passage must also be about the question: "won" in "Who won the World
# Cup?" is a subtopic of its own, and Pdb's "display won't realize" is not an answer.
QUESTION_FLOOR = 0.25
NAME_BONUS = 0.3
# Package descriptions are other people's READMEs: they answer a question about the
# standard library less often, so they rank below it at equal relevance.
SOURCE_WEIGHTS: Mapping[str, float] = {"pydoc": 1.0, "stdlib": 1.0, "packages": 0.6, "web": 1.0}


@dataclass(frozen=True, slots=True)
class _Weighted:
    terms: tuple[str, ...]
    weights: tuple[float, ...]
    total: float


class Scorer:
    """Scores passages against a query with the document frequencies of all sources."""

    def __init__(self, frequencies: Counter[str], documents: int) -> None:
        self._frequencies = frequencies
        self._documents = max(documents, 1)
        self._queries: dict[str, _Weighted] = {}

    @classmethod
    def of(cls, corpora: Iterable[Corpus]) -> Scorer:
        frequencies: Counter[str] = Counter()
        documents = 0
        for corpus in corpora:
            frequencies += corpus.document_frequencies()
            documents += len(corpus)
        return cls(frequencies, documents)

    def idf(self, term: str) -> float:
        # A word no document has weighs as much as one that only one document has.
        found = max(self._frequencies.get(term, 0), 1)
        return math.log(1 + self._documents / found)

    def relevance(self, query: str, passage: Passage) -> float:
        """The passage's relevance to `query` in 0..1 (1: every query word, in its name)."""
        weighted = self._weighted(query)
        if not weighted.total:
            return 0.0
        name = set(terms(_name_words(passage)))
        body = set(terms(f"{passage['section']} {passage['text']}")) | name
        found = sum(w for t, w in zip(weighted.terms, weighted.weights, strict=True) if t in body)
        named = sum(w for t, w in zip(weighted.terms, weighted.weights, strict=True) if t in name)
        share = (found + NAME_BONUS * named) / ((1 + NAME_BONUS) * weighted.total)
        return share * SOURCE_WEIGHTS.get(passage["source"], 1.0)

    def relevant(self, query: str, passage: Passage, *, floor: float = FLOOR) -> bool:
        """Whether the passage has the words that carry `floor` of the query's weight."""
        return self.share(query, passage) >= floor

    def share(self, query: str, passage: Passage) -> float:
        """The share of the query's weight that the passage's words carry (0..1)."""
        weighted = self._weighted(query)
        if not weighted.total:
            return 0.0
        body = set(terms(f"{_name_words(passage)} {passage['section']} {passage['text']}"))
        found = sum(w for t, w in zip(weighted.terms, weighted.weights, strict=True) if t in body)
        return found / weighted.total

    def _weighted(self, query: str) -> _Weighted:
        if query not in self._queries:
            try:
                found = parse_query(query).terms
            except ValueError:
                found = ()
            weights = tuple(self.idf(t) for t in found)
            self._queries[query] = _Weighted(found, weights, sum(weights))
        return self._queries[query]


def _name_words(passage: Passage) -> str:
    """The words of a passage's id: "stdlib:contextlib.suppress" -> "contextlib suppress",
    "docs:library/asyncio-task#asyncio.gather" -> "asyncio task asyncio gather"."""
    name = passage.get("id", "").partition(":")[2]
    # A documentation page's part ("library/", "tutorial/") is not what it is about.
    name = name.rpartition("/")[2].replace("#", ".")
    return " ".join(split_identifier(part) for part in name.replace("-", ".").split("."))
