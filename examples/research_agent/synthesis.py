"""Offline synthesis: the deterministic report, merged and ranked, plus an extractive summary.

The summary quotes the opening of the best passage found for each subtopic, cited by
finding number, and names the subtopics nothing answered. It does not reason, merge
or reconcile passages; with a key set, `LLMSynthesizer` writes the summary instead.
Findings and coverage come from `DeterministicSynthesizer` either way, merged into one
ranking with honest coverage (`merge`), so the summary can never hide a gap.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from agentmesh import Report
from agentmesh.coordinator import DeterministicSynthesizer
from agentmesh.report import CoverageStatus, Finding, TaskRecord

from .merge import merge, passages
from .openings import Openings
from .relevance import Scorer

__all__ = ["ExtractiveSynthesizer"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ANSWERED = (CoverageStatus.COVERED, CoverageStatus.EMPTY)


class ExtractiveSynthesizer:
    """A `Synthesizer`: the deterministic report, ranked against `question`, with a quoted
    summary on top."""

    def __init__(
        self, scorer: Scorer, question: str, *, words: int = 40, openings: Openings | None = None
    ) -> None:
        self.scorer = scorer
        self.question = question
        self.openings = openings
        self.words = words
        self.fallback = DeterministicSynthesizer()

    async def synthesize(
        self, records: Sequence[TaskRecord], *, run_id: str, min_coverage: float | None
    ) -> Report:
        report = await self.fallback.synthesize(records, run_id=run_id, min_coverage=min_coverage)
        if self.openings is not None:
            # The encoder's first reading of the documents found (~50 ms each) runs in a
            # thread: the event loop goes on serving the run (its deadline, its progress),
            # and the merge finds every vector ready.
            found = passages(report)
            await asyncio.to_thread(self.openings.closeness, self.question, found)
        report = merge(report, self.scorer, self.question, self.openings)
        topics = list(dict.fromkeys(entry.topic for entry in report.coverage))
        lines: list[str] = []
        for topic in topics:
            best = _best(report.findings, topic)
            if best is not None:
                number, finding = best
                lines.append(f"- **{topic}**: “{self._opening(finding)}” [{number}]")
                continue
            entries = [e for e in report.coverage if e.topic == topic]
            if all(e.status is CoverageStatus.EMPTY for e in entries):
                lines.append(f"- **{topic}**: every source searched, nothing relevant found.")
            else:
                missing = ", ".join(e.source for e in entries if e.status not in _ANSWERED)
                lines.append(f"- **{topic}**: no answer; not covered by {missing} (see Coverage).")
        summary = "Extractive summary: the opening of the best passage per subtopic.\n\n"
        return report.model_copy(update={"summary": summary + "\n".join(lines)})

    def _opening(self, finding: Finding) -> str:
        text = str(finding.content.get("text", "")) if isinstance(finding.content, dict) else ""
        opening: list[str] = []
        for sentence in _SENTENCE_END.split(text):
            opening += sentence.split()
            if len(opening) >= self.words // 2:
                break
        clipped = " ".join(opening[: self.words])
        return clipped if len(opening) <= self.words else clipped + " …"


def _best(findings: Sequence[Finding], topic: str) -> tuple[int, Finding] | None:
    """The most relevant confirmed finding of `topic`, and its number (1-based)."""
    candidates = [
        (number, finding)
        for number, finding in enumerate(findings, start=1)
        if finding.topic == topic and not finding.preliminary and isinstance(finding.content, dict)
    ]
    if not candidates:
        return None
    # Sources' scores are not comparable; the analysis' share of query words is.
    # max() keeps the first of equals: the earlier source, in the order they were given.
    return max(candidates, key=lambda item: float(item[1].content.get("relevance", 0.0)))
