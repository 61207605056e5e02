"""What a report tells its reader: citations resolve, rulings and retries are shown, the
entry names who answered, one JSON convention, and a misbehaving helper model is named."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    InvalidInput,
    Report,
    RetryPolicy,
    Ruling,
    Success,
    Task,
    ToolCallFailed,
    TransientError,
    subagent,
    tool,
)
from agentmesh.coordinator import CoverageStatus, LLMRewriter, LLMSynthesizer
from agentmesh.envelope import RetryCount
from agentmesh.models import ModelResponse, ScriptedModel
from agentmesh.policies import ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FailTimes, RecordingSleep
from tests.retrying import fast_retry


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
        raise InvalidInput(f"unknown column in {task.query!r}")
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


@tool
async def refund(order: str, amount: int) -> str:
    return f"refunded {amount} on {order}"


@pre_tool_use(tool="refund")
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > 500:
        return Ruling.deny("refunds above $500 need a supervisor")
    return None


DENIED = Ruling(
    action="deny",
    reason="refunds above $500 need a supervisor",
    policy="refund_limit",
    tool="refund",
)
BIG_REFUND = ("refund", {"order": "A1", "amount": 900})


def support(model: ScriptedModel, *, max_turns: int = 4) -> LLMSubagent:
    return LLMSubagent(
        "support",
        model,
        tools=[refund],
        policies=[refund_limit],
        max_turns=max_turns,
        retry=RetryPolicy.never(),
    )


class TestPolicyRulingsAreNeverSilent:
    async def test_an_llm_answer_after_a_denial_carries_the_ruling(self) -> None:
        """A model that says "Done." after a denied call: the success lists the ruling."""
        model = ScriptedModel(
            [ModelResponse.of_tool_calls(BIG_REFUND), ModelResponse.of_text("Done.")]
        )
        outcome = await support(model).run("refund order A1")

        assert isinstance(outcome, Success)
        assert outcome.rulings == (DENIED,)
        assert outcome.to_dict()["rulings"] == [
            {
                "action": "deny",
                "reason": "refunds above $500 need a supervisor",
                "policy": "refund_limit",
                "tool": "refund",
            }
        ]

    async def test_the_report_entry_shows_the_ruling_of_a_covered_task(self) -> None:
        """The entry stays covered (something was answered) but names the denial."""
        model = ScriptedModel(
            [ModelResponse.of_tool_calls(BIG_REFUND), ModelResponse.of_text("Done.")]
        )
        report = await Coordinator([support(model)]).run(["refund order A1"])

        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.rulings == (DENIED,)
        assert entry.reason == (
            "policy rulings: deny by policy refund_limit on refund: "
            "refunds above $500 need a supervisor"
        )
        assert "deny by policy refund_limit on refund" in report.to_markdown()

    async def test_a_turn_limit_after_denials_names_the_policy(self) -> None:
        """Out of turns after a denial: the gap says turn limit and the policy's ruling."""
        model = ScriptedModel(
            [ModelResponse.of_tool_calls(BIG_REFUND), ModelResponse.of_text("I give up.")]
        )
        report = await Coordinator([support(model, max_turns=1)]).run(["refund order A1"])

        [record] = report.records
        assert isinstance(record.final, ErrorEnvelope)
        assert record.final.error_type == "turn_limit"
        assert record.final.rulings == (DENIED,)
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert "no result after 1 turns" in entry.reason
        assert "deny by policy refund_limit on refund" in entry.reason

    async def test_a_function_subagent_that_caught_the_denial_carries_it(self) -> None:
        """A body that catches the denied call and returns nothing still reports the ruling."""

        @subagent(name="refunds", policies=[refund_limit])
        async def refunds(task: Task, ctx: Context) -> list[str]:
            try:
                return [await ctx.call(refund, order="A1", amount=900)]
            except ToolCallFailed:
                return []

        report = await Coordinator([refunds]).run(["refund A1"])
        [entry] = report.coverage
        assert entry.status is CoverageStatus.EMPTY
        assert entry.rulings == (DENIED,)
        assert entry.reason is not None
        assert entry.reason.startswith("searched, nothing found; policy rulings: deny by")

    async def test_a_subagent_used_as_a_tool_passes_its_rulings_and_retries_on(self) -> None:
        """A lead that calls a subagent as a tool reports what the nested run was told."""
        sleep = RecordingSleep()
        flaky = FailTimes(1, lambda: TimeoutError("slow"))

        @tool(idempotent=True)
        async def lookup(order: str) -> str:
            flaky()
            return f"order {order}"

        @subagent(name="billing", policies=[refund_limit], retry=fast_retry(sleep))
        async def billing(task: Task, ctx: Context) -> list[str]:
            found = [await ctx.call(lookup, order="A1")]
            with contextlib.suppress(ToolCallFailed):
                found.append(await ctx.call(refund, order="A1", amount=900))
            return found

        @subagent(name="lead", retry=fast_retry(sleep))
        async def lead(task: Task, ctx: Context) -> list[str]:
            return [await ctx.call(billing.as_tool(), query=task.query)]

        outcome = await lead.run("refund A1")
        assert isinstance(outcome, Success)
        assert outcome.rulings == (DENIED,)
        assert outcome.retries == (
            RetryCount(source="billing/lookup", error_type="timeout", count=1),
        )


class TestRetriesAreVisible:
    async def test_a_tool_recovered_on_its_third_attempt_says_so(self) -> None:
        """Two timeouts then a result: the success and the entry count the two retries."""
        sleep = RecordingSleep()
        flaky = FailTimes(2, lambda: TimeoutError("slow"))

        @tool(idempotent=True)
        async def search(query: str) -> list[str]:
            flaky()
            return [f"hit for {query}"]

        @subagent(name="docs", retry=fast_retry(sleep))
        async def docs(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(search, query=task.query)

        report = await Coordinator([docs]).run(["asyncio"])
        outcome = report.records[0].final
        assert isinstance(outcome, Success)
        assert outcome.attempts == 1
        assert outcome.retries == (RetryCount(source="docs/search", error_type="timeout", count=2),)
        assert outcome.to_dict()["retries"] == [
            {"source": "docs/search", "errorType": "timeout", "count": 2}
        ]
        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.retries == outcome.retries
        assert entry.reason == "recovered after 2 local retries: docs/search timeout x2"

    async def test_subagent_and_model_retries_are_counted_by_source(self) -> None:
        """Retries of the subagent's own attempts and of its model turns are named apart."""
        sleep = RecordingSleep()
        overloaded = TransientError("overloaded", error_type="overloaded")
        model = ScriptedModel([overloaded, ModelResponse.of_text("answer")])
        lead = LLMSubagent("lead", model, retry=fast_retry(sleep))
        outcome = await lead.run("q")
        assert outcome.retries == (
            RetryCount(source="lead/model", error_type="overloaded", count=1),
        )

        down_once = FailTimes(1, lambda: ConnectionError("refused"))

        @subagent(name="crm", retry=fast_retry(sleep))
        async def crm(task: Task, ctx: Context) -> list[str]:
            down_once()
            return ["customer"]

        outcome = await crm.run("q")
        assert outcome.retries is not None
        [counted] = outcome.retries
        assert (counted.source, counted.count) == ("crm", 1)

    async def test_nothing_is_added_without_a_retry(self) -> None:
        """A call that succeeds at once leaves no retries field, in Python or in JSON."""
        outcome = await notes.run("q")
        assert outcome.retries is None
        assert outcome.rulings is None
        assert "retries" not in outcome.to_dict()
        report = await Coordinator([notes]).run(["q"])
        assert report.coverage[0].reason is None


class TestWhoAnswered:
    async def test_an_alternative_subagent_is_named_with_the_path(self) -> None:
        """The entry keeps the failed subagent as source and names the one that answered."""

        @subagent(name="search", retry=RetryPolicy.never(), alternatives=["cache"])
        async def search(task: Task, ctx: Context) -> list[str]:
            raise TimeoutError("search timed out")

        @subagent(name="cache")
        async def cache(task: Task, ctx: Context) -> list[str]:
            return [f"cached {task.query}"]

        report = await Coordinator([search], alternatives={"cache": cache}).run(["q"])
        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.source == "search"
        assert entry.answered_by == "cache"
        assert entry.reason == "timeout at search → answered by cache"
        assert "timeout at search → answered by cache" in report.to_markdown()

    async def test_a_handler_alternative_is_named(self) -> None:
        """An alternative handler that returns an outcome is named as the one that answered."""

        @subagent(name="search", retry=RetryPolicy.never(), alternatives=["stale_index"])
        async def search(task: Task, ctx: Context) -> list[str]:
            raise ConnectionError("search refused")

        coordinator = Coordinator([search])

        @coordinator.alternative("stale_index")
        def stale(task: Task, envelope: ErrorEnvelope) -> Success[list[str]]:
            return Success(data=["old hit"], source="stale_index", attempted_query=task.query)

        [entry] = (await coordinator.run(["q"])).coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.answered_by == "stale_index"
        assert entry.reason is not None
        assert entry.reason.startswith("unavailable at search → answered by stale_index")


def keys_of(value: Any) -> set[str]:
    """Every key of every mapping in a JSON document, at any depth."""
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in keys_of(item)}
    if isinstance(value, list):
        return {key for item in value for key in keys_of(item)}
    return set()


class TestOneJsonConvention:
    async def report(self) -> Report:
        sleep = RecordingSleep()
        flaky = FailTimes(1, lambda: TimeoutError("slow"))

        @tool(idempotent=True)
        async def lookup(query: str) -> dict[str, str]:
            flaky()
            return {"title": query}

        @subagent(
            name="docs", retry=fast_retry(sleep), policies=[refund_limit], alternatives=["cache"]
        )
        async def docs(task: Task, ctx: Context) -> Any:
            if task.query == "partial":
                ctx.record_partial([{"title": "half"}], completed="a", pending="b")
                raise InvalidInput("bad query")
            if task.query == "down":
                raise TimeoutError("docs timed out")
            with contextlib.suppress(ToolCallFailed):
                await ctx.call(refund, order="A1", amount=900)
            return [await ctx.call(lookup, query=task.query)]

        @subagent(name="cache")
        async def cache(task: Task, ctx: Context) -> list[str]:
            return ["cached"]

        coordinator = Coordinator([docs], alternatives={"cache": cache})
        return await coordinator.run(["ok", "partial", "down"])

    async def test_every_key_of_the_report_json_is_camel_case(self) -> None:
        """Report, entries, records, steps and outcomes all use camelCase keys."""
        report = await self.report()
        data = json.loads(report.to_json())
        keys = keys_of(data)
        assert {"runId", "coverageRatio", "isRetryable", "answeredBy", "taskId"} <= keys
        assert {"isError", "errorCategory", "partialResults", "errorType"} <= keys
        assert [key for key in keys if "_" in key] == []

    async def test_each_outcome_is_its_wire_form(self) -> None:
        """A step's outcome in the report's JSON is exactly what `to_dict()` writes."""
        report = await self.report()
        data = report.to_dict()
        for record, written in zip(report.records, data["records"], strict=True):
            for step, step_data in zip(record.steps, written["steps"], strict=True):
                wire = step.outcome.to_dict()
                if isinstance(step.outcome, Success):
                    wire["isEmpty"] = step.outcome.is_empty
                assert step_data["outcome"] == wire

    async def test_a_report_reads_back_from_its_json(self) -> None:
        """`Report.model_validate` of the JSON gives the same report."""
        report = await self.report()
        assert Report.model_validate(json.loads(report.to_json())) == report
