"""Offline analysis: keep the passages that are about the subtopic, best first.

Deterministic and deliberately simple: a passage is kept when it is relevant to the
task's query (`relevance.Scorer.relevant`: it has the words that carry half the
query's weight, or less when no passage found has half: `relevance.Scorer.floor`).
Kept passages are ordered by their relevance score, then by BM25, and duplicates (the
same text reached through two documents) are dropped. It does not judge whether a
passage answers the question; it removes passages that matched a common word and
nothing else. Nothing relevant: the task's answer is the empty list.
"""

from __future__ import annotations

from collections.abc import Iterable

from .relevance import Scorer
from .sources import Passage

__all__ = ["relevant"]


def relevant(
    scorer: Scorer, query: str, passages: Iterable[Passage], *, keep: int
) -> list[Passage]:
    """The at most `keep` passages relevant to `query`, best first."""
    scored: list[tuple[float, float, Passage]] = []
    seen: set[str] = set()
    candidates: list[Passage] = []
    for passage in passages:
        if passage["text"] not in seen:
            seen.add(passage["text"])
            candidates.append(passage)
    floor = scorer.floor(query, candidates)
    for passage in candidates:
        if scorer.relevant(query, passage, floor=floor):
            score = round(scorer.relevance(query, passage), 3)
            scored.append((score, passage["score"], {**passage, "relevance": score}))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [passage for _, _, passage in scored[:keep]]
