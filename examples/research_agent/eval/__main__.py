"""`python -m examples.research_agent.eval [--each]` (from the repository root)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence

from ..injection import FaultInjector
from ..planner import plan
from ..research import research
from ..sources import SOURCES, Corpus, load_corpus
from .scoring import (
    HOLDOUT2_QUESTIONS,
    QUESTIONS,
    TEST_QUESTIONS,
    Expected,
    Score,
    load_questions,
    score_report,
    summary,
)

# Every set, every time: a change that raises the first and lowers the others does not land.
SETS = (
    ("development set", QUESTIONS),
    ("test set (held out)", TEST_QUESTIONS),
    ("second held-out set", HOLDOUT2_QUESTIONS),
)


async def _evaluate(questions: list[Expected], corpora: dict[str, Corpus]) -> list[Score]:
    scores = []
    for expected in questions:
        report = await research(plan(expected.question), corpora, faults=FaultInjector())
        scores.append(score_report(expected, report))
    return scores


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.research_agent.eval",
        description="Evaluate the offline research agent on its development and held-out sets.",
    )
    parser.add_argument(
        "--each",
        action="store_true",
        help="one line per development question too (the test set's figures only: "
        "it is not for tuning)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    corpora = {name: load_corpus(name) for name in SOURCES}
    for title, path in SETS:
        scores = asyncio.run(_evaluate(load_questions(path), corpora))
        print(f"== {title}: {path.name}")
        if args.each and path == QUESTIONS:
            for s in scores:
                rank = "-" if s.first_hit is None else str(s.first_hit)
                claim = " FALSE-COVERED" if s.false_claim else ""
                print(f"{rank:>3} {s.covered}/{s.entries} {s.expected.question}{claim}")
                print(f"      {' '.join(s.top[:5])}")
        for line in summary(scores):
            print(line)
    print(f"({time.perf_counter() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
