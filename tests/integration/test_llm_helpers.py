"""Model-backed coordinator helpers: a rewriter that corrects queries, a synthesizer that
writes the summary; neither can hide a gap, cite what was not found, or crash a run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentmesh import (
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    PermissionDenied,
    Report,
    RetryPolicy,
    Task,
    TransientError,
    subagent,
)
from agentmesh.coordinator import (
    CoverageStatus,
    DeterministicSynthesizer,
    LLMRewriter,
    LLMSynthesizer,
    RecordGap,
)
from agentmesh.models import ModelResponse, ScriptedModel
from agentmesh.testing import RecordingSleep
from tests.retrying import fast_retry

ORDERS_COLUMNS = "columns of orders: id, total, placed_at"


def propose(query: str | None, reason: str = "because") -> ModelResponse:
    return ModelResponse.of_tool_calls(("propose_query", {"query": query, "reason": reason}))


def summary(text: str) -> ModelResponse:
    return ModelResponse.of_tool_calls(("write_summary", {"summary": text}))


def overloaded() -> TransientError:
    return TransientError("overloaded", error_type="overloaded")


def error_in(prompt: str) -> dict[str, Any]:
    """The envelope fields the rewriter showed the model."""
    shown: dict[str, Any] = json.loads(prompt.split("The error it returned:\n", 1)[1])
    return shown


@subagent(name="sql", retry=RetryPolicy.never(), alternatives=["orders_api"])
async def sql(task: Task, ctx: Context) -> list[dict[str, int]]:
    """Knows the orders table; rejects any other column as an invalid query."""
    if task.query != "SELECT id FROM orders":
        raise InvalidInput(f"unknown column in {task.query!r}", details=ORDERS_COLUMNS)
    return [{"id": 1}]


def orders_envelope(query: str = "SELECT idd FROM orders") -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.VALIDATION,
        error_type="invalid_query",
        is_retryable=False,
        message=f"unknown column in {query!r}",
        attempted_query=query,
        source="sql",
        attempts=1,
    )


class TestLLMRewriter:
    async def test_a_corrected_query_makes_the_run_succeed(self) -> None:
        """The model sees the failed query and the error, and its correction is run next."""
        received: list[str] = []

        @subagent(name="sql", retry=RetryPolicy.never(), alternatives=["orders_api"])
        async def tracked(task: Task, ctx: Context) -> list[dict[str, int]]:
            received.append(task.query)
            if task.query != "SELECT id FROM orders":
                raise InvalidInput(f"unknown column in {task.query!r}", details=ORDERS_COLUMNS)
            return [{"id": 1}]

        model = ScriptedModel([propose("SELECT id FROM orders", "the column is id, not idd")])
        coordinator = Coordinator([tracked], rewriter=LLMRewriter(model))
        report = await coordinator.run([Task(query="SELECT idd FROM orders", topic="orders")])

        assert received == ["SELECT idd FROM orders", "SELECT id FROM orders"]
        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.attempted_query == "SELECT id FROM orders"
        assert [s.decision for s in report.records[0].steps] == ["RetryWithFeedback", "Accept"]
        assert [f.content for f in report.findings] == [{"id": 1}]

        [request] = model.requests
        assert request.tool_choice == {"type": "tool", "name": "propose_query"}
        assert [t["name"] for t in request.tools] == ["propose_query"]
        assert request.system is not None
        assert "null" in request.system
        prompt = request.messages[0]["content"]
        assert prompt.startswith("Task query: SELECT idd FROM orders\nTopic: orders\n")
        assert error_in(prompt) == {
            "errorCategory": "validation",
            "errorType": "invalid_query",
            "message": "unknown column in 'SELECT idd FROM orders'",
            "attemptedQuery": "SELECT idd FROM orders",
            "details": ORDERS_COLUMNS,
            "alternativeApproaches": ["orders_api"],
            "source": "sql",
        }

    async def test_information_not_in_the_source_gives_a_gap(self) -> None:
        """When the model answers null the task is not retried and the gap is reported."""
        runs = 0

        @subagent(name="sql", retry=RetryPolicy.never())
        async def birthdays(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise InvalidInput("unknown column 'birthday'", details=ORDERS_COLUMNS)

        model = ScriptedModel([propose(None, "no column holds birthdays")])
        report = await Coordinator([birthdays], rewriter=LLMRewriter(model)).run(
            [Task(query="SELECT birthday FROM orders", topic="birthdays")]
        )

        assert runs == 1
        assert len(model.requests) == 1
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert "the rewriter had no corrected query" in entry.reason
        assert "unknown column 'birthday'" in entry.reason

    @pytest.mark.parametrize(
        ("failures", "expected_requests", "expected_delays", "error_type"),
        [
            ([overloaded(), overloaded(), overloaded()], 3, [0.1, 0.2], "overloaded"),
            ([PermissionDenied("invalid x-api-key")], 1, [], "permission_denied"),
        ],
        ids=["transient-after-retries", "permission-at-once"],
    )
    async def test_a_failing_model_gives_a_gap_without_an_exception(
        self,
        failures: list[Exception],
        expected_requests: int,
        expected_delays: list[float],
        error_type: str,
    ) -> None:
        """A model call that fails for good is logged, the task becomes a gap, the run goes on."""
        sleep = RecordingSleep()

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> list[str]:
            return ["unaffected"]

        model = ScriptedModel(failures)
        coordinator = Coordinator([sql, docs], rewriter=LLMRewriter(model, retry=fast_retry(sleep)))
        with capture_logs() as logs:
            report = await coordinator.run(
                [
                    Task(query="SELECT idd FROM orders", topic="orders", subagent="sql"),
                    Task(query="docs", topic="docs", subagent="docs"),
                ]
            )

        assert len(model.requests) == expected_requests
        assert sleep.delays == expected_delays
        assert [(e.topic, e.status) for e in report.coverage] == [
            ("orders", CoverageStatus.GAP),
            ("docs", CoverageStatus.COVERED),
        ]
        [failed] = [e for e in logs if e["event"] == "rewrite_failed"]
        assert failed["error_type"] == error_type
        assert failed["log_level"] == "warning"
        assert "the model call failed" in failed["reason"]

    async def test_a_transient_model_failure_is_retried_locally(self) -> None:
        """A timeout of the model call is retried by the policy and the proposal is used."""
        sleep = RecordingSleep()
        model = ScriptedModel([TimeoutError("read timed out"), propose("SELECT id FROM orders")])
        rewriter = LLMRewriter(model, retry=fast_retry(sleep))

        report = await Coordinator([sql], rewriter=rewriter).run(["SELECT idd FROM orders"])

        assert len(model.requests) == 2
        assert sleep.delays == [0.1]
        assert report.coverage[0].status is CoverageStatus.COVERED

    @pytest.mark.parametrize(
        ("answer", "says"),
        [
            (propose(""), "the model proposed no query: because"),
            (propose("   "), "the model proposed no query: because"),
            (propose("SELECT idd FROM orders"), "the model proposed the failed query unchanged"),
            (propose(" SELECT idd FROM orders\n"), "the failed query unchanged"),
            (
                ModelResponse.of_tool_calls(("propose_query", {"reason": "no query key"})),
                "the model called propose_query with malformed input",
            ),
            (
                ModelResponse.of_text("SELECT id FROM orders"),
                "the model answered in text instead of calling propose_query",
            ),
        ],
        ids=["empty", "blank", "identical", "identical-padded", "malformed", "no-tool-call"],
    )
    async def test_an_unusable_answer_is_no_proposal(
        self, answer: ModelResponse, says: str
    ) -> None:
        """Empty, unchanged, malformed or tool-less answers give a gap saying why, not a retry."""
        model = ScriptedModel([answer])
        proposal = await LLMRewriter(model)(Task(query="SELECT idd FROM orders"), orders_envelope())
        assert isinstance(proposal, RecordGap)
        assert says in proposal.reason
        assert len(model.requests) == 1

    async def test_the_proposal_is_trimmed(self) -> None:
        """Whitespace around the model's query is not part of the query."""
        model = ScriptedModel([propose("  SELECT id FROM orders\n")])
        proposal = await LLMRewriter(model)(Task(query="SELECT idd FROM orders"), orders_envelope())
        assert proposal == "SELECT id FROM orders"


@subagent(name="docs", retry=RetryPolicy.never())
async def docs(task: Task, ctx: Context) -> list[str]:
    return ["tokio is a work-stealing runtime (https://tokio.rs)", "async-std is discontinued"]


@subagent(name="web", retry=RetryPolicy.never())
async def web(task: Task, ctx: Context) -> list[str]:
    ctx.record_partial(["smol is a small runtime"], completed="page 1", pending=["page 2"])
    raise TransientError("page 2 timed out", error_type="timeout")


RUNTIME_TASKS = [
    Task(query="rust async runtimes", topic="runtimes", subagent="docs"),
    Task(query="rust runtime survey 2024", topic="survey", subagent="web"),
]

GOOD_SUMMARY = (
    "Tokio is a work-stealing runtime [1] and async-std is discontinued [2]. "
    "A preliminary result says smol is a small runtime [3]; the survey is incomplete."
)


async def runtimes_report(synthesizer: LLMSynthesizer) -> tuple[Report, Report]:
    """The run's report and the deterministic report of the same records."""
    report = await Coordinator([docs, web], synthesizer=synthesizer).run(RUNTIME_TASKS)
    baseline = await DeterministicSynthesizer().synthesize(
        report.records, run_id=report.run_id, min_coverage=None
    )
    return report, baseline


class TestLLMSynthesizer:
    async def test_the_summary_is_added_and_everything_else_is_deterministic(self) -> None:
        """The model writes the summary only; findings and coverage are the deterministic ones."""
        model = ScriptedModel([summary(GOOD_SUMMARY)])
        report, baseline = await runtimes_report(LLMSynthesizer(model))

        assert report.summary == GOOD_SUMMARY
        assert report.synthesis_note is None
        assert report.coverage == baseline.coverage
        assert report.findings == baseline.findings
        assert report.escalations == baseline.escalations
        # Besides the summary, the report counts the synthesizer's one model call (and
        # shows the calls in flight its model settled at).
        assert (
            report.model_copy(update={"summary": None, "helper_usage": {}, "model_concurrency": {}})
            == baseline
        )
        assert report.usage is not None
        assert report.usage.model_calls == 1
        assert [(e.topic, e.status) for e in report.coverage] == [
            ("runtimes", CoverageStatus.COVERED),
            ("survey", CoverageStatus.PARTIAL),
        ]
        markdown = report.to_markdown()
        assert GOOD_SUMMARY in markdown
        assert "| survey | web | partial |" in markdown

        [request] = model.requests
        assert request.tool_choice == {"type": "tool", "name": "write_summary"}
        prompt = request.messages[0]["content"]
        assert "[1] topic: runtimes; source: docs\n    tokio is a work-stealing" in prompt
        assert "[2] topic: runtimes; source: docs\n    async-std is discontinued" in prompt
        assert "[3] topic: survey; source: web, preliminary\n    smol is a small runtime" in prompt
        assert "[4]" not in prompt
        assert "- topic: survey; source: web; partial: timeout after local retries" in prompt

    @pytest.mark.parametrize(
        "text",
        [
            "Tokio and async-std are both maintained [1, 2].",
            "See [Tokio](https://tokio.rs): it is work-stealing [1]. Smol is small [3].",
        ],
        ids=["grouped-citation", "url-from-a-finding"],
    )
    async def test_citations_of_findings_are_accepted(self, text: str) -> None:
        """Grouped numbers and a URL that a finding contains pass the check."""
        report, _ = await runtimes_report(LLMSynthesizer(ScriptedModel([summary(text)])))
        assert report.summary == text
        assert report.synthesis_note is None

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            (
                "Tokio is work-stealing [1] and faster than Go [4].",
                "cited [4], but there are only 3 numbered findings",
            ),
            (
                "Tokio is work-stealing [1, 0].",
                "cited [0], but there are only 3 numbered findings",
            ),
            (
                "Tokio is work-stealing [1], as [Wikipedia] confirms.",
                "cited [Wikipedia], which is not a numbered finding",
            ),
            (
                "Tokio is the fastest [1] (https://example.com/benchmarks).",
                "names https://example.com/benchmarks, which is in none of the findings",
            ),
            ("Tokio is a work-stealing runtime.", "cites none of the findings"),
            ("   ", "the model's summary was empty"),
        ],
        ids=["out-of-range", "zero", "named-source", "unknown-url", "uncited", "empty"],
    )
    async def test_a_summary_citing_what_was_not_found_is_refused(
        self, text: str, problem: str
    ) -> None:
        """A bad citation voids the whole summary: the deterministic report says why."""
        report, baseline = await runtimes_report(LLMSynthesizer(ScriptedModel([summary(text)])))

        assert report.summary is None
        assert report.synthesis_note is not None
        assert problem in report.synthesis_note
        assert report.synthesis_note.endswith("— deterministic synthesis used.")
        assert (
            report.model_copy(
                update={"synthesis_note": None, "helper_usage": {}, "model_concurrency": {}}
            )
            == baseline
        )
        markdown = report.to_markdown()
        assert report.synthesis_note in markdown
        if text.strip():
            assert text not in markdown

    @pytest.mark.parametrize(
        ("failure", "says"),
        [
            (overloaded, "the model call failed (transient overloaded: overloaded)"),
            (lambda: TimeoutError("read timed out"), "the model call failed (transient timeout"),
        ],
        ids=["overloaded", "timeout"],
    )
    async def test_a_failing_model_falls_back_and_says_so(self, failure: Any, says: str) -> None:
        """After local retries the deterministic report is used, and the markdown says so."""
        sleep = RecordingSleep()
        model = ScriptedModel([failure() for _ in range(3)])
        with capture_logs() as logs:
            report, baseline = await runtimes_report(LLMSynthesizer(model, retry=fast_retry(sleep)))

        assert len(model.requests) == 3
        assert sleep.delays == [0.1, 0.2]
        assert report.summary is None
        assert (
            report.model_copy(
                update={"synthesis_note": None, "helper_usage": {}, "model_concurrency": {}}
            )
            == baseline
        )
        markdown = report.to_markdown()
        assert f"*Summary unavailable: {says}" in markdown
        assert "— deterministic synthesis used.*" in markdown
        assert "| survey | web | partial |" in markdown
        assert [e["event"] for e in logs if e.get("helper") == "synthesizer"][-1] == (
            "summary_unavailable"
        )

    async def test_an_answer_without_the_tool_falls_back(self) -> None:
        """Plain text instead of the forced write_summary call is not used as the summary."""
        model = ScriptedModel([ModelResponse.of_text("Tokio is great [1].")])
        report, _ = await runtimes_report(LLMSynthesizer(model))
        assert report.summary is None
        assert report.synthesis_note is not None
        assert "the model answered in text instead of calling write_summary" in (
            report.synthesis_note
        )

    async def test_a_run_without_findings_asks_no_model(self) -> None:
        """With nothing to cite the model is not called and the report has no summary."""

        @subagent(name="web", retry=RetryPolicy.never())
        async def down(task: Task, ctx: Context) -> None:
            raise ConnectionError("refused")

        model = ScriptedModel([])
        report = await Coordinator([down], synthesizer=LLMSynthesizer(model)).run(["q"])
        assert model.requests == []
        assert report.summary is None
        assert report.synthesis_note is None
        assert report.coverage[0].status is CoverageStatus.GAP
