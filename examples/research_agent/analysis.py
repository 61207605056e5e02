"""Offline analysis: keep the passages that are about the subtopic, best first.

Deterministic and deliberately simple: a passage is kept when it contains at least
half of the query's distinct (stemmed) words, every quoted word included (the search
already guarantees those). Kept passages are ordered by that share, then by BM25 score,
and duplicates (the same text reached through two documents) are dropped. It does not
judge whether a passage answers the question; it removes passages that matched one
common word and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable

from .ranking import parse_query
from .sources import Passage
from .text import terms

__all__ = ["MIN_SHARE", "relevant"]

MIN_SHARE = 0.5


def relevant(query: str, passages: Iterable[Passage], *, keep: int) -> list[Passage]:
    """The at most `keep` passages relevant to `query`, best first."""
    wanted = set(parse_query(query).terms)
    scored: list[tuple[float, float, Passage]] = []
    seen: set[str] = set()
    for passage in passages:
        if passage["text"] in seen:
            continue
        seen.add(passage["text"])
        share = len(wanted & set(terms(f"{passage['section']} {passage['text']}"))) / len(wanted)
        if share >= MIN_SHARE:
            scored.append((share, passage["score"], {**passage, "relevance": round(share, 3)}))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [passage for _, _, passage in scored[:keep]]
