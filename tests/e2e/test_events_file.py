"""The research agent's live progress comes from the event stream; `--events` writes it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import structlog
from rich.console import Console

from agentmesh import Context, Coordinator, Task, TransientError, subagent
from agentmesh.events import RunFinished, RunStarted, parse_event
from examples.research_agent.terminal import Progress
from tests.e2e.conftest import QUESTION, run_agent


class TestEventsFile:
    def test_events_file_holds_every_event_of_the_run_as_json_lines(self, tmp_path: Path) -> None:
        """One JSON line per event, numbered 1..n, ending with the report the run printed."""
        path = tmp_path / "events.jsonl"
        run = run_agent(
            *(QUESTION, "--json", "--seed", "1", "--inject", "stdlib=timeout"),
            *("--events", str(path)),
        )
        assert run.returncode == 0, run.stderr
        events = [parse_event(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert isinstance(events[0], RunStarted)
        final = events[-1]
        assert isinstance(final, RunFinished)
        printed = {(e["topic"], e["source"]): e["status"] for e in run.report["coverage"]}
        streamed = {(e.topic, e.source): e.status.value for e in final.report.coverage}
        assert streamed == printed
        kinds = {json.loads(line)["event"] for line in path.read_text().splitlines()}
        assert {"TaskStarted", "AttemptFailed", "Routed", "TaskFinished"} <= kinds
        assert "with statement × stdlib: running" in run.stderr  # the progress goes on too

    def test_a_missing_directory_is_refused_before_the_run(self, tmp_path: Path) -> None:
        """`--events` into a directory that does not exist: one line, exit code 2."""
        run = run_agent(QUESTION, "--events", str(tmp_path / "nowhere" / "events.jsonl"))
        assert run.returncode == 2
        assert "--events" in run.stderr


class TestProgressFromEvents:
    async def test_progress_shows_the_stream_and_leaves_logging_alone(self) -> None:
        """Cells follow the events; structlog's global configuration is not touched."""

        @subagent(name="stdlib")
        async def stdlib(task: Task, ctx: Context) -> list[str]:
            raise TransientError("down", error_type="unavailable")

        before = structlog.get_config()
        out = io.StringIO()
        progress = Progress(
            Console(file=out, width=120, no_color=True),
            cells={"1-stdlib": ("with statement", "stdlib")},
            topics=["with statement"],
            sources=["stdlib"],
        )
        coordinator = Coordinator([stdlib])
        async with coordinator.stream([Task(id="1-stdlib", query="q")]) as events:
            async for event in events:
                progress(event)
        assert structlog.get_config() == before
        text = out.getvalue()
        assert "with statement × stdlib: running" in text
        assert "with statement × stdlib: decision RecordGap" in text
        assert "with statement × stdlib:  gap " in text
