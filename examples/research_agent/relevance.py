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

A query word the passage does not have, but a word that goes with it (`associations`:
"hash" and "digest"), counts for the passage at that association's strength (0.2 to 1),
so a passage that says the same thing in other words is not dropped as irrelevant.

The words alone miss a passage that says the same thing in other words ("remove a folder"
and "delete a directory tree"): `MEANING` of a passage's relevance is the cosine of the
question's and the passage's vectors (`meaning`: static word vectors, each word weighted
by its idf), the rest its share of the words. It orders what is found (and so which four
relevant passages a search keeps); whether a passage is relevant at all, and whether it
answers, still counts the words.

A passage is relevant when it has the words that carry at least half (`FLOOR`) of the
weight of the query that found it, and a tenth (`QUESTION_FLOOR`) of the question's.
When no passage a search found reaches half, the best of them sets the floor
(`RELATIVE` of its share, never under `LOWEST`): a question in other words than the
sources' ("a list used as a default argument keeps its items") still gets the passages
that come closest, while a passage that matched one common word does not.
Whether it *answers* (`merge`) counts only the words it has.
A coverage entry is `covered` only when one of its passages is relevant (see `merge`).

Its figures on the evaluation set: `python -m examples.research_agent.eval`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import meaning
from .associations import Associations
from .ranking import parse_query
from .sources import Corpus, Passage
from .text import split_identifier, stem, terms, words

__all__ = [
    "DEPRECATED",
    "FLOOR",
    "LOWEST",
    "NAME_BONUS",
    "QUESTION_FLOOR",
    "RELATIVE",
    "SOURCE_WEIGHTS",
    "Scorer",
]

FLOOR = 0.5
# The floor when the best passage found has less than `FLOOR`: this share of the best's.
RELATIVE = 0.8
LOWEST = 0.3
# A subtopic's passage must also be about the question: "won" in "Who won the World
# Cup?" is a subtopic of its own, and Pdb's "display won't realize" is not an answer.
QUESTION_FLOOR = 0.1
NAME_BONUS = 0.3
# Package descriptions are other people's READMEs: they answer a question about the
# standard library less often, so they rank below it at equal relevance (unless the
# question names the package, or its summary has one of the question's key words).
SOURCE_WEIGHTS: Mapping[str, float] = {"pydoc": 1.0, "stdlib": 1.0, "packages": 0.6, "web": 1.0}
# A deprecated module (the documentation says so: `aifc`, `asyncore`, `optparse`) is rarely
# what a question should be answered with today: it ranks below at equal relevance.
DEPRECATED = 0.7
# How much of a passage's relevance is its closeness in meaning to the query (`meaning`),
# when the scorer has word vectors.
MEANING = 0.45


@dataclass(frozen=True, slots=True)
class _Words:
    """A passage's index terms: of its name, with its section heading, with its text."""

    name: frozenset[str]
    heading: frozenset[str]
    body: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Weighted:
    terms: tuple[str, ...]
    weights: tuple[float, ...]
    total: float


class Scorer:
    """Scores passages against a query with the document frequencies of all sources."""

    def __init__(
        self,
        frequencies: Counter[str],
        documents: int,
        associations: Sequence[Associations] = (),
        deprecated: Collection[str] = (),
        vectors: meaning.WordVectors | None = None,
    ) -> None:
        """`vectors`: the word vectors of closeness in meaning (`meaning.shipped()`);
        without them, relevance is the share of the words alone."""
        self._frequencies = frequencies
        self._deprecated = frozenset(deprecated)
        self._documents = max(documents, 1)
        self._associations = tuple(associations)
        self._queries: dict[str, _Weighted] = {}
        # Each passage is scored many times (analysis, merge, coverage): split it once.
        self._passages: dict[tuple[str, str, str, str], _Words] = {}
        self._associates: dict[str, dict[str, float]] = {}
        self._embedder = None if vectors is None else meaning.Embedder(vectors, self._word_idf)
        self._text_vectors: dict[str, np.ndarray] = {}

    @classmethod
    def of(cls, corpora: Iterable[Corpus], vectors: meaning.WordVectors | None = None) -> Scorer:
        """The scorer of these sources' statistics; `vectors` as in `Scorer`."""
        frequencies: Counter[str] = Counter()
        documents = 0
        associations = []
        deprecated: set[str] = set()
        for corpus in corpora:
            frequencies += corpus.document_frequencies()
            documents += len(corpus)
            associations.append(corpus.indexes.associations)
            deprecated |= corpus.deprecated
        return cls(frequencies, documents, associations, deprecated, vectors)

    def idf(self, term: str) -> float:
        # A word no document has weighs as much as one that only one document has.
        found = max(self._frequencies.get(term, 0), 1)
        return math.log(1 + self._documents / found)

    def _word_idf(self, word: str) -> float:
        return self.idf(stem(word))

    def similarity(self, query: str, passage: Passage) -> float:
        """The cosine of the query's and the passage's vectors (`meaning`), 0 without them."""
        if self._embedder is None:
            return 0.0
        texts = (query, f"{_name_words(passage)} {passage['section']} {passage['text']}")
        found = []
        for text in texts:
            vector = self._text_vectors.get(text)
            if vector is None:
                vector = self._text_vectors[text] = self._embedder.embed([text])[0]
            found.append(vector)
        return max(0.0, float(found[0] @ found[1]))

    def relevance(self, query: str, passage: Passage) -> float:
        """The passage's relevance to `query` in 0..1: its share of the query's words (1:
        every word, in its name), blended with its closeness in meaning (`MEANING`)."""
        weighted = self._weighted(query)
        if not weighted.total:
            return 0.0
        words = self._words(passage)
        name, body = words.name, words.body
        found = sum(
            w * self._found(t, body) for t, w in zip(weighted.terms, weighted.weights, strict=True)
        )
        named = sum(w for t, w in zip(weighted.terms, weighted.weights, strict=True) if t in name)
        share = (found + NAME_BONUS * named) / ((1 + NAME_BONUS) * weighted.total)
        if self._embedder is not None:
            share = (1 - MEANING) * share + MEANING * self.similarity(query, passage)
        if self._deprecated and _module(passage) in self._deprecated:
            share *= DEPRECATED
        # A package the question names, or whose summary has a key word of it, is what
        # it asks about: no discount for it.
        if passage["source"] == "packages" and (named or self.named(query, passage)):
            return share
        return share * SOURCE_WEIGHTS.get(passage["source"], 1.0)

    def relevant(self, query: str, passage: Passage, *, floor: float = FLOOR) -> bool:
        """Whether the passage has the words (or words that go with them) that carry
        `floor` of the query's weight."""
        return self.share(query, passage, associated=True) >= floor

    def floor(self, query: str, passages: Iterable[Passage]) -> float:
        """The share of `query`'s weight a passage among `passages` must carry to be
        relevant: `FLOOR`, or less when none has it (`RELATIVE` of the best, `LOWEST` at least)."""
        best = max((self.share(query, p, associated=True) for p in passages), default=0.0)
        return max(LOWEST, min(FLOOR, RELATIVE * best))

    def share(self, query: str, passage: Passage, *, associated: bool = False) -> float:
        """The share of the query's weight that the passage's words carry (0..1); with
        `associated`, a word that goes with a missing one counts at its strength."""
        weighted = self._weighted(query)
        if not weighted.total:
            return 0.0
        body = self._words(passage).body
        found = sum(
            w * (self._found(t, body) if associated else float(t in body))
            for t, w in zip(weighted.terms, weighted.weights, strict=True)
        )
        return found / weighted.total

    def _words(self, passage: Passage) -> _Words:
        key = (
            passage.get("id", ""),
            passage.get("document", ""),
            passage["section"],
            passage["text"],
        )
        found = self._passages.get(key)
        if found is None:
            name = frozenset(terms(_name_words(passage)))
            heading = name | frozenset(terms(passage["section"]))
            found = _Words(name, heading, heading | frozenset(terms(passage["text"])))
            self._passages[key] = found
        return found

    def _found(self, term: str, body: frozenset[str]) -> float:
        """1 when the body has `term`, else the strongest association of one it has."""
        if term in body:
            return 1.0
        if term not in self._associates:
            merged: dict[str, float] = {}
            for associations in self._associations:
                for associate, weight in associations.associates(term):
                    merged[associate] = max(merged.get(associate, 0.0), weight)
            self._associates[term] = merged
        return max((w for u, w in self._associates[term].items() if u in body), default=0.0)

    def named(self, query: str, passage: Passage) -> bool:
        """Whether the passage's name has one of the query's words ("with" for
        `pydoc:with`), or its section heading one of its key words (inside a name too:
        "context" in `contextlib`).

        A key word weighs at least the mean of the query's words the sources know: a
        heading that says "Functions" or "Text" is not about "make a function remember
        results" or "the word that occurs most often in a text".
        """
        words = self._words(passage)
        name, heading = words.name, words.heading
        weighted = self._weighted(query)
        pairs = list(zip(weighted.terms, weighted.weights, strict=True))
        known = [w for t, w in pairs if t in self._frequencies]
        key = sum(known) / len(known) if known else 0.0
        return any(
            t in name
            or (w >= key and (t in heading or (len(t) >= 4 and any(t in h for h in heading))))
            for t, w in pairs
        )

    def missing(self, query: str, passages: Iterable[Passage], most: int = 3) -> list[str]:
        """The query's weightiest words that none of `passages` has (at most `most`)."""
        weighted = self._weighted(query)
        found: set[str] = set()
        for passage in passages:
            found |= self._words(passage).body
        absent = sorted(
            (
                (-w, t)
                for t, w in zip(weighted.terms, weighted.weights, strict=True)
                if t not in found
            ),
        )
        return [_plain(query, t) for _, t in absent[:most]]

    def _weighted(self, query: str) -> _Weighted:
        if query not in self._queries:
            try:
                found = parse_query(query).terms
            except ValueError:
                found = ()
            weights = tuple(self.idf(t) for t in found)
            self._queries[query] = _Weighted(found, weights, sum(weights))
        return self._queries[query]


def _plain(query: str, term: str) -> str:
    """The query's own word for an index term ("cancel" -> "cancellation")."""
    return next((w for w in words(query.replace('"', " ")) if stem(w) == term), term)


def _module(passage: Passage) -> str:
    """The module a passage documents: a documentation page's, a stdlib document."""
    if passage["source"] == "stdlib":
        return passage["document"]
    return passage.get("module", "")


def _name_words(passage: Passage) -> str:
    """The words of a passage's id: "stdlib:contextlib.suppress" -> "contextlib suppress",
    "docs:library/asyncio-task#asyncio.gather" -> "asyncio task asyncio gather"."""
    name = passage.get("id", "").partition(":")[2]
    # A documentation page's part ("library/", "tutorial/") is not what it is about.
    name = name.rpartition("/")[2].replace("#", ".")
    return " ".join(split_identifier(part) for part in name.replace("-", ".").split("."))
