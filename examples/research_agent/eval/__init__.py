"""The research agent's evaluation: does a report cite what a correct answer must?

    python -m examples.research_agent.eval            # every set's figures
    python -m examples.research_agent.eval --each     # and one line per development question
    python -m examples.research_agent.eval --sets dev # the development set alone (tuning)

Every question of the development set `questions.toml` (written for this project; none
from the Python FAQ; tune on it) and of the test set `test_questions.toml` (written for
issue 32 before any tuning, never tuned on) and of the second held-out set
`holdout2_questions.toml` (written after tuning by someone who tuned nothing, evaluated
once) and of the third to eighth held-out sets `holdout3_questions.toml` to
`holdout8_questions.toml` (each written before a session's
tuning by someone who tuned nothing, evaluated once at its end) is researched offline, as
`python -m examples.research_agent` would, and its report's findings are compared with
the documents a correct answer must cite:

* hit@k: one of them is among the report's first k findings;
* false "covered" claims: a report with a `covered` entry although none of its
  findings cites one of them (for a question the sources cannot answer, any
  `covered` entry).
"""

from .scoring import (
    HOLDOUT2_QUESTIONS,
    HOLDOUT3_QUESTIONS,
    HOLDOUT4_QUESTIONS,
    HOLDOUT5_QUESTIONS,
    HOLDOUT6_QUESTIONS,
    HOLDOUT7_QUESTIONS,
    HOLDOUT8_QUESTIONS,
    TEST_QUESTIONS,
    Expected,
    Score,
    load_questions,
    score_report,
)

__all__ = [
    "HOLDOUT2_QUESTIONS",
    "HOLDOUT3_QUESTIONS",
    "HOLDOUT4_QUESTIONS",
    "HOLDOUT5_QUESTIONS",
    "HOLDOUT6_QUESTIONS",
    "HOLDOUT7_QUESTIONS",
    "HOLDOUT8_QUESTIONS",
    "TEST_QUESTIONS",
    "Expected",
    "Score",
    "load_questions",
    "score_report",
]
