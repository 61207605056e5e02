"""The evaluation's questions and how a report is scored against them."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentmesh import Report
from agentmesh.report import CoverageStatus

__all__ = [
    "HOLDOUT2_QUESTIONS",
    "HOLDOUT3_QUESTIONS",
    "HOLDOUT4_QUESTIONS",
    "HOLDOUT5_QUESTIONS",
    "HOLDOUT6_QUESTIONS",
    "HOLDOUT7_QUESTIONS",
    "HOLDOUT8_QUESTIONS",
    "QUESTIONS",
    "TEST_QUESTIONS",
    "Expected",
    "Score",
    "load_questions",
    "score_report",
]

QUESTIONS = Path(__file__).with_name("questions.toml")  # the development set: tune on it
TEST_QUESTIONS = Path(__file__).with_name("test_questions.toml")  # held out: never tune on it
# A second held-out set, written after tuning by someone who tuned nothing; evaluated once.
HOLDOUT2_QUESTIONS = Path(__file__).with_name("holdout2_questions.toml")
# A third, written before a session's tuning by someone who tuned nothing; evaluated once,
# at the session's end (tune with `--sets dev`).
HOLDOUT3_QUESTIONS = Path(__file__).with_name("holdout3_questions.toml")
# A fourth, written the same way before a later session's tuning; evaluated once, at its end.
HOLDOUT4_QUESTIONS = Path(__file__).with_name("holdout4_questions.toml")
# A fifth, written the same way before a later session's tuning; evaluated once, at its end.
HOLDOUT5_QUESTIONS = Path(__file__).with_name("holdout5_questions.toml")
# A sixth, written the same way before a later session's tuning; evaluated once, at its end.
HOLDOUT6_QUESTIONS = Path(__file__).with_name("holdout6_questions.toml")
# A seventh, written after one session's tuning and before the next one's.
HOLDOUT7_QUESTIONS = Path(__file__).with_name("holdout7_questions.toml")
# An eighth, written after the seventh session's tuning (the route by meaning).
HOLDOUT8_QUESTIONS = Path(__file__).with_name("holdout8_questions.toml")


@dataclass(frozen=True, slots=True)
class Expected:
    """A question and the document ids a correct answer must cite (one of them)."""

    question: str
    cite: tuple[str, ...]

    def cited_by(self, document_id: str) -> bool:
        """Whether a finding's id cites one of them: "stdlib:csv.reader" cites "stdlib:csv",
        "docs:tutorial/classes#iterators" cites "docs:tutorial/classes"."""
        return any(
            document_id == c or document_id.startswith((f"{c}.", f"{c}#")) for c in self.cite
        )


@dataclass(frozen=True, slots=True)
class Score:
    """How one report did: the rank of its first cited finding, and what it claimed."""

    expected: Expected
    first_hit: int | None  # 1-based rank of the first finding that cites an expected id
    covered: int  # coverage entries claimed covered
    entries: int
    top: tuple[str, ...]  # the first findings' ids

    def hit(self, k: int) -> bool:
        return self.first_hit is not None and self.first_hit <= k

    @property
    def false_claim(self) -> bool:
        """Covered claimed, yet no finding cites what an answer must."""
        return self.covered > 0 and self.first_hit is None


def load_questions(path: Path = QUESTIONS) -> list[Expected]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [
        Expected(question=str(item["text"]), cite=tuple(str(c) for c in item["cite"]))
        for item in data["question"]
    ]


def score_report(expected: Expected, report: Report) -> Score:
    ids = [_document_id(f.content) for f in report.findings]
    cites = [_cites(f.content) for f in report.findings]
    first = next(
        (n for n, found in enumerate(cites, start=1) if any(map(expected.cited_by, found))),
        None,
    )
    covered = sum(e.status is CoverageStatus.COVERED for e in report.coverage)
    return Score(expected, first, covered, len(report.coverage), tuple(ids[:10]))


def summary(scores: Sequence[Score]) -> list[str]:
    """The figures, one per line: hit@3, hit@10 and the false "covered" claims."""
    answerable = [s for s in scores if s.expected.cite]
    unanswerable = [s for s in scores if not s.expected.cite]
    n = len(answerable)
    false_claims = sum(s.false_claim for s in scores)
    return [
        f"questions: {n} answerable, {len(unanswerable)} the sources cannot answer",
        f"hit@3:  {sum(s.hit(3) for s in answerable)}/{n} ({_share(answerable, 3)})",
        f"hit@10: {sum(s.hit(10) for s in answerable)}/{n} ({_share(answerable, 10)})",
        f'false "covered": {false_claims} of {len(scores)} reports '
        f"({false_claims / max(len(scores), 1):.0%}) claim coverage with nothing relevant",
        f'"covered" with a hit: {sum(s.covered > 0 for s in answerable if s.hit(10))} of '
        f"{sum(s.hit(10) for s in answerable)} reports that cite an answer in the first 10",
    ]


def _share(scores: Sequence[Score], k: int) -> str:
    return f"{sum(s.hit(k) for s in scores) / max(len(scores), 1):.0%}"


def _document_id(content: object) -> str:
    return str(content.get("id", "")) if isinstance(content, dict) else ""


def _cites(content: object) -> tuple[str, ...]:
    """What a finding cites: its id, and a documentation page's module as `stdlib:<module>`
    ("docs:library/asyncio-task#asyncio.gather" cites "stdlib:asyncio" too)."""
    found = _document_id(content)
    module = content.get("module") if isinstance(content, dict) else None
    return (found, f"stdlib:{module}") if module else (found,)
