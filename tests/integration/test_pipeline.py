"""A staged pipeline checkpoints every stage and resumes after a failure or a crash."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs

from agentmesh import (
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    Pipeline,
    RetryPolicy,
    Success,
    TransientError,
    UsageError,
)
from agentmesh.checkpoints import CheckpointStore, MemoryStore, SQLiteStore
from agentmesh.testing import RecordingSleep
from tests.integration import pipeline_crash_worker as worker
from tests.retrying import fast_retry


class Doc(BaseModel):
    title: str


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CheckpointStore]:
    """Every behaviour is checked against both stores: they must not differ."""
    instance: SQLiteStore | MemoryStore = (
        SQLiteStore(tmp_path / "checkpoints.sqlite") if request.param == "sqlite" else MemoryStore()
    )
    async with instance:
        yield instance


class Research:
    """Retrieval -> Analysis -> Synthesis, counting how often each stage really ran."""

    def __init__(self) -> None:
        self.calls = {"retrieval": 0, "analysis": 0, "synthesis": 0}
        self.analysis_error: Exception | None = InvalidInput("the analysis prompt is malformed")
        self.seen_by_analysis: list[Any] = []

    async def retrieval(self, query: str) -> list[Doc]:
        self.calls["retrieval"] += 1
        return [Doc(title=f"{query} 1"), Doc(title=f"{query} 2")]

    async def analysis(self, docs: list[Doc]) -> dict[str, Any]:
        self.calls["analysis"] += 1
        self.seen_by_analysis.append(docs)
        if self.analysis_error is not None:
            raise self.analysis_error
        return {"titles": [doc.title for doc in docs]}

    async def synthesis(self, analysis: dict[str, Any]) -> str:
        self.calls["synthesis"] += 1
        return " + ".join(analysis["titles"])

    def pipeline(self, store: CheckpointStore | None, **options: Any) -> Pipeline:
        return Pipeline(
            [
                ("retrieval", self.retrieval),
                ("analysis", self.analysis),
                ("synthesis", self.synthesis),
            ],
            store=store,
            **options,
        )


class TestResume:
    async def test_a_failed_analysis_resumes_without_redoing_retrieval(
        self, store: CheckpointStore
    ) -> None:
        """Analysis fails; the rerun with the same run id resumes and Retrieval ran once."""
        research = Research()
        pipeline = research.pipeline(store, retry=fast_retry())
        failed = await pipeline.run("asyncio", run_id="run-1")
        assert isinstance(failed, ErrorEnvelope)
        assert failed.error_category is ErrorCategory.VALIDATION
        assert failed.source == "pipeline/analysis"
        assert failed.attempts == 1
        assert failed.to_dict()["partialResults"] == {
            "completed": ["retrieval"],
            "pending": ["analysis", "synthesis"],
            "findings": [[{"title": "asyncio 1"}, {"title": "asyncio 2"}]],
        }

        research.analysis_error = None
        outcome = await pipeline.run("asyncio", run_id="run-1")
        assert isinstance(outcome, Success)
        assert outcome.data == "asyncio 1 + asyncio 2"
        assert outcome.source == "pipeline"
        assert research.calls == {"retrieval": 1, "analysis": 2, "synthesis": 1}

    async def test_a_new_run_id_starts_fresh(self, store: CheckpointStore) -> None:
        """Checkpoints belong to their run: another run id calls every stage again."""
        research = Research()
        research.analysis_error = None
        pipeline = research.pipeline(store)
        await pipeline.run("asyncio", run_id="run-1")
        await pipeline.run("asyncio", run_id="run-2")
        assert research.calls == {"retrieval": 2, "analysis": 2, "synthesis": 2}

    async def test_a_finished_run_gives_its_output_without_running_a_stage(
        self, store: CheckpointStore
    ) -> None:
        """Running a finished run again returns the last output and calls nothing."""
        research = Research()
        research.analysis_error = None
        pipeline = research.pipeline(store)
        first = await pipeline.run("asyncio", run_id="run-1")
        again = await pipeline.run("asyncio", run_id="run-1")
        assert isinstance(first, Success)
        assert isinstance(again, Success)
        assert again.data == first.data
        assert again.attempts == 0
        assert research.calls == {"retrieval": 1, "analysis": 1, "synthesis": 1}

    async def test_the_next_stage_sees_the_same_typed_output_fresh_or_resumed(
        self, store: CheckpointStore
    ) -> None:
        """An output is read back by its stage's return annotation, in both runs alike."""
        research = Research()
        pipeline = research.pipeline(store)
        await pipeline.run("asyncio", run_id="run-1")
        research.analysis_error = None
        await pipeline.run("asyncio", run_id="run-1")
        fresh, resumed = research.seen_by_analysis
        assert fresh == resumed == [Doc(title="asyncio 1"), Doc(title="asyncio 2")]

    async def test_resuming_a_run_with_another_input_is_refused(
        self, store: CheckpointStore
    ) -> None:
        """The checkpoints of a run do not fit another input: that is a usage error."""
        research = Research()
        pipeline = research.pipeline(store)
        await pipeline.run("asyncio", run_id="run-1")
        with pytest.raises(UsageError, match="different input"):
            await pipeline.run("trio", run_id="run-1")
        assert research.calls["retrieval"] == 1

    async def test_each_output_is_checkpointed_before_the_next_stage_starts(
        self, store: CheckpointStore
    ) -> None:
        """When a stage starts, the previous stage's output is already in the store."""
        seen: list[Any] = []

        async def first(data: int) -> int:
            return data + 1

        async def second(data: int) -> int:
            saved = await store.get("run-1", "pipeline/first", "output")
            seen.append(None if saved is None else saved.value)
            return data * 10

        outcome = await Pipeline([("first", first), ("second", second)], store=store).run(
            1, run_id="run-1"
        )
        assert isinstance(outcome, Success)
        assert outcome.data == 20
        assert seen == [2]


class Letters:
    """Stages named by a letter, each appending its letter; counts the stages really run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def stage(self, name: str) -> tuple[str, Any]:
        async def append(letters: list[str]) -> list[str]:
            self.ran.append(name)
            return [*letters, name]

        return name, append

    def pipeline(self, store: CheckpointStore, names: str) -> Pipeline:
        return Pipeline([self.stage(name) for name in names], store=store)


class TestChangedDefinition:
    @pytest.mark.parametrize(
        ("changed", "difference"),
        [
            ("acb", "stage 2 was 'b', now 'c'"),
            ("axc", "stage 2 was 'b', now 'x'"),
            ("abcd", "stage 'd' added"),
            ("xabc", "stage 'x' added"),
            ("ac", "stage 'b' removed"),
            ("a", "stages 'b', 'c' removed"),
            ("cba", "stage 1 was 'a', now 'c'"),
        ],
    )
    async def test_a_run_resumed_with_other_stages_is_refused_naming_the_difference(
        self, store: CheckpointStore, changed: str, difference: str
    ) -> None:
        """Reordered, renamed, added or removed stages: a UsageError says what changed."""
        letters = Letters()
        first = await letters.pipeline(store, "abc").run([], run_id="run-1")
        assert isinstance(first, Success)
        with pytest.raises(UsageError, match="another definition") as caught:
            await letters.pipeline(store, changed).run([], run_id="run-1")
        assert difference in str(caught.value)
        assert "a -> b -> c" in str(caught.value)
        assert letters.ran == ["a", "b", "c"]

    async def test_the_refused_run_keeps_its_checkpoints_for_its_own_definition(
        self, store: CheckpointStore
    ) -> None:
        """After a refusal the first definition still resumes; a deleted run starts afresh."""
        letters = Letters()
        await letters.pipeline(store, "abc").run([], run_id="run-1")
        with pytest.raises(UsageError):
            await letters.pipeline(store, "bac").run([], run_id="run-1")
        again = await letters.pipeline(store, "abc").run([], run_id="run-1")
        assert isinstance(again, Success)
        assert again.data == ["a", "b", "c"]
        await store.delete("run-1")
        fresh = await letters.pipeline(store, "bac").run([], run_id="run-1")
        assert isinstance(fresh, Success)
        assert fresh.data == ["b", "a", "c"]
        assert letters.ran == ["a", "b", "c", "b", "a", "c"]

    async def test_new_code_under_the_same_stage_names_resumes(
        self, store: CheckpointStore
    ) -> None:
        """A fixed stage keeps its name: the resumed run goes on from the checkpoints."""
        research = Research()
        await research.pipeline(store).run("asyncio", run_id="run-1")
        fixed = Research()
        fixed.analysis_error = None
        outcome = await fixed.pipeline(store).run("asyncio", run_id="run-1")
        assert isinstance(outcome, Success)
        assert fixed.calls == {"retrieval": 0, "analysis": 1, "synthesis": 1}

    async def test_a_run_checkpointed_without_a_shape_resumes_and_is_checked_from_then_on(
        self, store: CheckpointStore
    ) -> None:
        """Checkpoints of an older agentmesh (no shape) resume by stage name, with a warning."""
        letters = Letters()
        failing = Pipeline(
            [letters.stage("a"), ("b", _fail), letters.stage("c")], store=store, retry=fast_retry()
        )
        assert isinstance(await failing.run([], run_id="run-1"), ErrorEnvelope)
        await store.delete("run-1", "pipeline", "shape")  # as an older agentmesh left it
        with capture_logs() as logs:
            outcome = await letters.pipeline(store, "abc").run([], run_id="run-1")
        assert isinstance(outcome, Success)
        assert outcome.data == ["a", "b", "c"]
        assert letters.ran == ["a", "b", "c"]
        unknown = [entry for entry in logs if entry["event"] == "pipeline_shape_unknown"]
        assert [entry["log_level"] for entry in unknown] == ["warning"]
        with pytest.raises(UsageError, match="stage 'd' added"):
            await letters.pipeline(store, "abcd").run([], run_id="run-1")


async def _fail(letters: list[str]) -> list[str]:
    raise InvalidInput("stage b is broken")


class TestStageFailures:
    async def test_a_transient_failure_is_retried_locally_with_backoff(
        self, store: CheckpointStore
    ) -> None:
        """Two timeouts in a stage are retried under the pipeline's policy, without waiting."""
        sleep = RecordingSleep()
        failures = [TimeoutError("slow"), TimeoutError("slow")]

        async def fetch(query: str) -> str:
            if failures:
                raise failures.pop()
            return f"fetched {query}"

        pipeline = Pipeline([("fetch", fetch)], store=store, retry=fast_retry(sleep))
        outcome = await pipeline.run("q", run_id="run-1")
        assert isinstance(outcome, Success)
        assert outcome.data == "fetched q"
        assert outcome.attempts == 3
        assert sleep.delays == [0.1, 0.2]

    async def test_a_stage_can_have_its_own_retry_policy(self, store: CheckpointStore) -> None:
        """A (name, stage, retry) entry overrides the pipeline's policy for that stage."""
        calls = 0

        async def flaky(data: str) -> str:
            nonlocal calls
            calls += 1
            raise TransientError("upstream down")

        pipeline = Pipeline(
            [("flaky", flaky, RetryPolicy.never())], store=store, retry=fast_retry()
        )
        outcome = await pipeline.run("q", run_id="run-1")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.is_retryable is True
        assert outcome.attempts == 1
        assert calls == 1
        assert outcome.partial_results is not None
        assert outcome.partial_results.pending == ("flaky",)

    async def test_a_stage_returning_an_outcome_passes_data_or_fails_as_it_is(
        self, store: CheckpointStore
    ) -> None:
        """A Success passes its data on; an ErrorEnvelope fails the stage, never retried again."""
        calls = 0

        async def search(query: str) -> Any:
            return Success(data=[query], source="docs", attempted_query=query)

        async def analyse(hits: list[str]) -> Any:
            nonlocal calls
            calls += 1
            return ErrorEnvelope(
                error_category=ErrorCategory.TRANSIENT,
                error_type="timeout",
                is_retryable=True,
                message="model timed out",
                attempted_query="summarise",
                source="analyst",
                attempts=4,
            )

        pipeline = Pipeline([("search", search), ("analyse", analyse)], store=store)
        outcome = await pipeline.run("q", run_id="run-1")
        assert isinstance(outcome, ErrorEnvelope)
        assert calls == 1
        assert outcome.attempts == 4
        assert outcome.source == "pipeline/analyse"
        assert "reported by analyst" in (outcome.details or "")
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings == (["q"],)

    async def test_an_output_that_cannot_be_checkpointed_fails_the_stage(
        self, store: CheckpointStore
    ) -> None:
        """A stage whose output is not JSON fails with an envelope saying so; later stages wait."""

        async def opaque(data: str) -> object:
            return object()

        async def later(data: object) -> str:
            raise AssertionError("must not run")

        pipeline = Pipeline([("opaque", opaque), ("later", later)], store=store)
        outcome = await pipeline.run("q", run_id="run-1")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.source == "pipeline/opaque"
        assert "could not be checkpointed" in (outcome.details or "")
        assert outcome.partial_results is not None
        assert outcome.partial_results.pending == ("opaque", "later")


class TestDefinition:
    async def test_stage_names_must_be_unique(self) -> None:
        """Two stages with one name would share a checkpoint: refused at definition."""

        async def stage(data: Any) -> Any:
            return data

        with pytest.raises(UsageError, match="'a' is used twice"):
            Pipeline([("a", stage), ("a", stage)], store=MemoryStore())

    @pytest.mark.parametrize(
        ("stages", "message"),
        [
            ([], "at least one"),
            ([("a",)], "must be \\(name, stage\\)"),
            ([("", None)], "non-empty string"),
            ([("a", lambda data: data)], "must be an async function"),
        ],
    )
    async def test_malformed_stages_are_refused(self, stages: Any, message: str) -> None:
        """Each malformed definition is a usage error that names the problem."""
        with pytest.raises(UsageError, match=message):
            Pipeline(stages, store=MemoryStore())

    async def test_a_run_id_is_required(self) -> None:
        """Without a run id nothing could be resumed: an empty one is refused."""

        async def stage(data: Any) -> Any:
            return data

        with pytest.raises(UsageError, match="run_id"):
            await Pipeline([("a", stage)], store=MemoryStore()).run(1, run_id="")

    async def test_the_default_store_is_sqlite_under_the_working_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without a store, checkpoints go to .agentmesh/checkpoints.sqlite, closed after a run."""
        monkeypatch.chdir(tmp_path)
        research = Research()
        pipeline = research.pipeline(None)
        await pipeline.run("asyncio", run_id="run-1")
        research.analysis_error = None
        assert isinstance(await pipeline.run("asyncio", run_id="run-1"), Success)
        assert research.calls["retrieval"] == 1
        assert (tmp_path / ".agentmesh" / "checkpoints.sqlite").is_file()
        assert not [t for t in threading.enumerate() if t.name.startswith("agentmesh-checkpoints")]


class TestLogging:
    async def test_every_decision_is_a_log_event(self, store: CheckpointStore) -> None:
        """Saved checkpoints, skipped and resumed stages and failures are logged with the run id."""
        research = Research()
        pipeline = research.pipeline(store, retry=fast_retry())
        with capture_logs() as first_logs:
            await pipeline.run("asyncio", run_id="run-1")
        research.analysis_error = None
        with capture_logs() as second_logs:
            await pipeline.run("asyncio", run_id="run-1")

        def events(logs: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
            wanted = {"checkpoint_saved", "stage_skipped", "stage_resumed", "stage_failed"}
            return [(e["event"], e.get("stage")) for e in logs if e["event"] in wanted]

        assert events(first_logs) == [
            ("checkpoint_saved", "retrieval"),
            ("stage_failed", "analysis"),
        ]
        assert events(second_logs) == [
            ("stage_skipped", "retrieval"),
            ("stage_resumed", "analysis"),
            ("checkpoint_saved", "analysis"),
            ("checkpoint_saved", "synthesis"),
        ]
        assert all(e["run_id"] == "run-1" for e in first_logs + second_logs)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
class TestCrash:
    async def test_a_killed_process_resumes_in_another_without_redoing_the_finished_stage(
        self, tmp_path: Path
    ) -> None:
        """SIGKILL during Analysis; another process resumes from the checkpoint; one Retrieval."""
        database = tmp_path / "checkpoints.sqlite"
        counter = tmp_path / "retrieval.count"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            worker.__file__,
            str(database),
            str(counter),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        assert child.stdout is not None
        try:
            line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
        finally:
            child.send_signal(signal.SIGKILL)  # at once, whatever it was doing
            _, stderr = await child.communicate()
        assert line == b"ready\n", f"the worker never got to analysis: {stderr!r}"
        assert child.returncode == -signal.SIGKILL
        assert counter.read_text() == "retrieval\n"

        seen: list[list[str]] = []

        async def retrieval(query: str) -> list[str]:
            worker.count_retrieval(counter)
            return ["a second retrieval"]

        async def analysis(docs: list[str]) -> str:
            seen.append(docs)
            return f"{len(docs)} doc(s) analysed"

        async def synthesis(summary: str) -> str:
            return f"report: {summary}"

        async with SQLiteStore(database) as store:
            pipeline = Pipeline(
                [("retrieval", retrieval), ("analysis", analysis), ("synthesis", synthesis)],
                store=store,
            )
            outcome = await pipeline.run(worker.QUERY, run_id=worker.RUN_ID)
        assert isinstance(outcome, Success)
        assert outcome.data == "report: 1 doc(s) analysed"
        assert seen == [[f"doc about {worker.QUERY}"]]
        assert counter.read_text() == "retrieval\n"
