"""What a report tells its reader: citations resolve, rulings and retries are shown, the
entry names who answered, one JSON convention, and a misbehaving helper model is named."""

from __future__ import annotations

import re
from typing import Any

from agentmesh import Context, Coordinator, RetryPolicy, Task, ValidationError, subagent
from agentmesh.coordinator import CoverageStatus, LLMRewriter, LLMSynthesizer
from agentmesh.models import ModelResponse, ScriptedModel
from agentmesh.testing import RecordingSleep


def fast(sleep: RecordingSleep, **overrides: Any) -> RetryPolicy:
    options: dict[str, Any] = {
        "max_attempts": 3,
        "initial_delay": 0.1,
        "max_delay": 1.0,
        "jitter": "none",
        "sleep": sleep,
    }
    options.update(overrides)
    return RetryPolicy(**options)


@subagent(name="notes", retry=RetryPolicy.never())
async def notes(task: Task, ctx: Context) -> list[str]:
    return [f"{task.query} note 1", f"{task.query} note 2"]


class TestCitationsResolve:
    async def test_markdown_numbers_findings_as_the_summary_prompt_does(self) -> None:
        """Each finding shows the number the synthesizer's prompt gave it, across topics."""
        model = ScriptedModel(
            [ModelResponse.of_tool_calls(("write_summary", {"summary": "Beta holds [3]."}))]
        )
        tasks = [Task(query=q, topic=t) for q, t in [("a", "alpha"), ("b", "beta"), ("c", "alpha")]]
        report = await Coordinator([notes], synthesizer=LLMSynthesizer(model)).run(tasks)

        prompt = model.requests[0].messages[0]["content"]
        in_prompt = dict(re.findall(r"^\[(\d+)\] topic: .*\n    (.*)$", prompt, re.MULTILINE))
        markdown = report.to_markdown()
        in_markdown = dict(re.findall(r"^- \[(\d+)\] (.*) — \*notes\*$", markdown, re.MULTILINE))
        assert len(in_prompt) == 6
        assert in_markdown == in_prompt
        assert in_markdown["3"] == "b note 1"
        assert report.summary == "Beta holds [3]."


@subagent(name="sql", retry=RetryPolicy.never())
async def sql(task: Task, ctx: Context) -> list[int]:
    if task.query != "SELECT id FROM orders":
        raise ValidationError(f"unknown column in {task.query!r}")
    return [1]


class TestForcedHelperTools:
    async def test_scripted_propose_query_is_what_the_rewriter_accepts(self) -> None:
        """`ScriptedModel.propose_query` scripts the rewriter's forced tool: the fix is run."""
        model = ScriptedModel([ScriptedModel.propose_query("SELECT id FROM orders", "id")])
        report = await Coordinator([sql], rewriter=LLMRewriter(model)).run(
            ["SELECT idd FROM orders"]
        )
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert model.requests[0].tool_choice == {"type": "tool", "name": "propose_query"}

    async def test_a_rewriter_answering_in_text_gives_a_gap_saying_so(self) -> None:
        """The gap's reason says the model wrote text instead of calling propose_query."""
        model = ScriptedModel([ModelResponse.of_text("Try SELECT id FROM orders")])
        report = await Coordinator([sql], rewriter=LLMRewriter(model)).run(
            ["SELECT idd FROM orders"]
        )
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert "the model answered in text instead of calling propose_query" in entry.reason
        assert "unknown column" in entry.reason

    async def test_scripted_write_summary_is_what_the_synthesizer_accepts(self) -> None:
        """`ScriptedModel.write_summary` scripts the synthesizer's forced tool."""
        model = ScriptedModel([ScriptedModel.write_summary("Alpha has notes [1, 2].")])
        report = await Coordinator([notes], synthesizer=LLMSynthesizer(model)).run(["alpha"])
        assert report.summary == "Alpha has notes [1, 2]."
        assert model.requests[0].tool_choice == {"type": "tool", "name": "write_summary"}

    async def test_a_synthesizer_answering_in_text_says_so_in_the_note(self) -> None:
        """The fallback's note names write_summary and what the model did instead."""
        model = ScriptedModel([ModelResponse.of_text("Alpha has notes [1].")])
        report = await Coordinator([notes], synthesizer=LLMSynthesizer(model)).run(["alpha"])
        assert report.summary is None
        assert report.synthesis_note == (
            "Summary unavailable: the model answered in text instead of calling "
            "write_summary — deterministic synthesis used."
        )
