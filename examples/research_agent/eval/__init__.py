"""The research agent's evaluation: does a report cite what a correct answer must?

    python -m examples.research_agent.eval            # the summary
    python -m examples.research_agent.eval --each     # and one line per question

Every question of `questions.toml` (written for this project; none from the Python
FAQ) is researched offline, as `python -m examples.research_agent` would, and its
report's findings are compared with the documents a correct answer must cite:

* hit@k: one of them is among the report's first k findings;
* false "covered" claims: a report with a `covered` entry although none of its
  findings cites one of them (for a question the sources cannot answer, any
  `covered` entry).
"""

from .scoring import TEST_QUESTIONS, Expected, Score, load_questions, score_report

__all__ = ["TEST_QUESTIONS", "Expected", "Score", "load_questions", "score_report"]
