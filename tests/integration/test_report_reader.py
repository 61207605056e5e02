"""What a report tells its reader: citations resolve, rulings and retries are shown, the
entry names who answered, one JSON convention, and a misbehaving helper model is named."""

from __future__ import annotations

import re
from typing import Any

from agentmesh import Context, Coordinator, RetryPolicy, Task, subagent
from agentmesh.coordinator import LLMSynthesizer
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
