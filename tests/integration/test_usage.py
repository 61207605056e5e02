"""Usage and cost: on every outcome, summed by the report, through the real anthropic SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest
from structlog.testing import capture_logs

from agentmesh import Context, Coordinator, ErrorEnvelope, Report, Success, Task, UsageError, tool
from agentmesh.models import (
    DEFAULT_PRICES,
    AnthropicModel,
    ModelPrice,
    ModelUsage,
    PriceTable,
    UsageSummary,
)
from agentmesh.subagents import LLMSubagent, subagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, Reply
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
SONNET = "claude-sonnet-4-5"  # priced by the default table: $3 in, $15 out per million


@pytest.fixture
def claude(fake_messages_api: FakeMessagesAPI) -> Callable[[str], AnthropicModel]:
    def build(name: str = SONNET) -> AnthropicModel:
        return AnthropicModel(name, api_key=API_KEY, base_url=fake_messages_api.base_url)

    return build


@pytest.fixture
async def sonnet(claude: Callable[[str], AnthropicModel]) -> AsyncIterator[AnthropicModel]:
    async with claude(SONNET) as model:
        yield model


def tokens(input_tokens: int, output_tokens: int) -> Callable[[RecordedRequest], Reply]:
    return lambda request: F.text("answer", input_tokens=input_tokens, output_tokens=output_tokens)


@tool(idempotent=True)
async def lookup(query: str) -> list[str]:
    """Look a query up."""
    return [f"found {query}"]


class TestUsageOnOutcomes:
    async def test_a_success_carries_tokens_calls_and_cost(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """Tokens as the API reported them, one call, and the cost at the table's price."""
        fake_messages_api.handler = tokens(1000, 200)
        outcome = await LLMSubagent("a", sonnet).run("hi")
        assert isinstance(outcome, Success)
        usage = outcome.usage
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens, usage.model_calls) == (1000, 200, 1)
        assert usage.cost_usd == pytest.approx((1000 * 3 + 200 * 15) / 1e6)
        assert usage.by_model[0].model == SONNET
        assert outcome.to_dict()["usage"]["inputTokens"] == 1000

    async def test_an_unknown_model_has_no_cost_never_a_guess(
        self, fake_messages_api: FakeMessagesAPI, claude: Callable[[str], AnthropicModel]
    ) -> None:
        """A model the price table does not know costs null in JSON, its tokens still counted."""
        fake_messages_api.handler = tokens(50, 5)
        async with claude("claude-opus-4-6") as model:  # not `claude-opus-4`'s price
            outcome = await LLMSubagent("a", model).run("hi")
        assert outcome.usage is not None
        assert outcome.usage.cost_usd is None
        assert outcome.usage.input_tokens == 50
        assert outcome.to_dict()["usage"]["costUsd"] is None

    async def test_a_failed_task_carries_what_its_turns_used(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """A turn that answered then a turn that failed: the envelope counts both calls."""
        fake_messages_api.enqueue(
            F.tool_use("lookup", {"query": "x"}), F.error(400, message="bad request")
        )
        outcome = await LLMSubagent("a", sonnet, tools=[lookup]).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.usage is not None
        assert outcome.usage.model_calls == 2
        assert outcome.usage.input_tokens == 10  # the answered turn's; the 400 used none

    async def test_retried_calls_count(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """Every request of a retried turn is a model call."""
        fake_messages_api.enqueue(F.error(529), F.error(529), F.text("ok"))
        outcome = await LLMSubagent("a", sonnet, retry=fast_retry(attempts=3)).run("hi")
        assert outcome.usage is not None
        assert outcome.usage.model_calls == 3
        assert outcome.usage.total_tokens == 20

    async def test_no_model_no_usage_key(self) -> None:
        """An outcome no model took part in has no `usage` in its JSON (pinned: absent)."""

        @subagent(name="plain")
        async def plain(task: Task, ctx: Context) -> str:
            return "done"

        outcome = await plain.run("hi")
        assert outcome.usage is None
        assert "usage" not in outcome.to_dict()

    async def test_a_direct_model_call_in_a_subagent_counts_too(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """`ctx.call_model` from a function subagent is counted like an LLMSubagent's turn."""
        fake_messages_api.handler = tokens(7, 3)

        @subagent(name="direct")
        async def direct(task: Task, ctx: Context) -> str:
            response = await ctx.call_model(sonnet, messages=[{"role": "user", "content": "x"}])
            return response.text

        outcome = await direct.run("hi")
        assert isinstance(outcome, Success)
        assert outcome.usage is not None
        assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (7, 3)


class TestReportUsage:
    async def _report(
        self, fake_messages_api: FakeMessagesAPI, claude: Callable[[str], AnthropicModel]
    ) -> Report:
        fake_messages_api.handler = tokens(100, 10)
        async with claude(SONNET) as sonnet, claude("claude-haiku-4-5") as haiku:
            agents = [LLMSubagent("deep", sonnet), LLMSubagent("quick", haiku)]
            return await Coordinator(agents).run([Task(query="q1"), Task(query="q2")])

    async def test_the_report_sums_per_subagent_per_model_and_for_the_run(
        self, fake_messages_api: FakeMessagesAPI, claude: Callable[[str], AnthropicModel]
    ) -> None:
        """Two tasks fanned out to two subagents on two models: four calls, summed three ways."""
        report = await self._report(fake_messages_api, claude)
        assert report.usage is not None
        assert report.usage.model_calls == 4
        assert report.usage.input_tokens == 400
        by_subagent = report.usage_by_subagent
        assert {name: item.model_calls for name, item in by_subagent.items()} == {
            "deep": 2,
            "quick": 2,
        }
        assert [(name, line.model_calls) for name, line in report.usage_by_model.items()] == [
            (SONNET, 2),
            ("claude-haiku-4-5", 2),
        ]
        sonnet_cost = 2 * (100 * 3 + 10 * 15) / 1e6
        haiku_cost = 2 * (100 * 1 + 10 * 5) / 1e6
        assert report.usage.cost_usd == pytest.approx(sonnet_cost + haiku_cost)

    async def test_markdown_and_json_print_the_usage(
        self, fake_messages_api: FakeMessagesAPI, claude: Callable[[str], AnthropicModel]
    ) -> None:
        """Markdown has a Usage section; JSON a `usage` object with `bySubagent`, read back."""
        report = await self._report(fake_messages_api, claude)
        markdown = report.to_markdown()
        assert "## Usage" in markdown
        assert f"| {SONNET} | 2 | 200 | 20 | 0 | 0 | $0.0009 |" in markdown
        assert "| quick | 2 | 200 | 20 | 0 | 0 | $0.0003 |" in markdown
        assert "Total: 4 model calls, 440 tokens, $0.0012." in markdown
        data = json.loads(report.to_json())
        assert data["usage"]["modelCalls"] == 4
        assert data["usage"]["bySubagent"]["deep"]["inputTokens"] == 200
        again = Report.model_validate(data)
        assert again.usage == report.usage

    async def test_a_run_without_models_prints_no_usage(self) -> None:
        """No model call, no Usage section and no `usage` key."""

        @subagent(name="plain")
        async def plain(task: Task, ctx: Context) -> str:
            return "done"

        report = await Coordinator([plain]).run(["q"])
        assert report.usage is None
        assert "## Usage" not in report.to_markdown()
        assert "usage" not in report.to_dict()

    async def test_the_run_prices_override_the_table(
        self, fake_messages_api: FakeMessagesAPI, claude: Callable[[str], AnthropicModel]
    ) -> None:
        """`Coordinator(prices=...)` prices a model of the user's own and overrides a default."""
        fake_messages_api.handler = tokens(1_000_000, 0)
        own = ModelPrice(input=2.0, output=0.0, cache_write=0.0, cache_read=0.0)
        async with claude("my-model") as mine:
            coordinator = Coordinator([LLMSubagent("a", mine)], prices={"my-model": own})
            report = await coordinator.run(["q"])
        assert report.usage is not None
        assert report.usage.cost_usd == pytest.approx(2.0)


NEGATIVE = {"input_tokens": -5, "output_tokens": 7}
HUGE = {"input_tokens": 10**400, "output_tokens": 7}
ABSURD_USAGE = [
    pytest.param(NEGATIVE, "input_tokens=-5", False, id="negative-json"),
    pytest.param(NEGATIVE, "input_tokens=-5", True, id="negative-stream"),
    pytest.param(HUGE, "input_tokens=100000000000... (401 characters)", False, id="huge-json"),
    pytest.param(HUGE, "input_tokens=100000000000... (401 characters)", True, id="huge-stream"),
    pytest.param({"input_tokens": None, "output_tokens": 7}, "input_tokens=None", False, id="null"),
    # Not streamed: the SDK's own stream accumulator warns about a text count.
    pytest.param(
        {"input_tokens": "many", "output_tokens": 7}, "input_tokens='many'", False, id="text"
    ),
]


class TestUnusableTokenCounts:
    @pytest.mark.parametrize(("usage", "named", "stream"), ABSURD_USAGE)
    async def test_the_answer_decides_and_the_call_is_counted(
        self,
        fake_messages_api: FakeMessagesAPI,
        usage: dict[str, object],
        named: str,
        stream: bool,
    ) -> None:
        """Absurd counts: the task is covered by its answer, the call counted, tokens unknown."""
        fake_messages_api.enqueue(F.text("the answer", usage=usage))
        async with AnthropicModel(
            SONNET, api_key=API_KEY, base_url=fake_messages_api.base_url, stream=stream
        ) as sonnet:
            with capture_logs() as logs:
                report = await Coordinator([LLMSubagent("a", sonnet)]).run(["q"])
        [entry] = report.coverage
        assert entry.status.value == "covered"
        assert report.findings[0].content == "the answer"
        assert report.usage is not None
        assert (report.usage.model_calls, report.usage.unknown_token_calls) == (1, 1)
        assert (report.usage.input_tokens, report.usage.output_tokens) == (0, 7)
        assert report.usage.cost_usd is None  # unknown, never a guess
        response_usage = report.records[0].final.usage
        assert response_usage is not None
        assert response_usage.unknown_token_calls == 1
        assert fake_messages_api.request_count == 1  # an answer, not retried
        [warning] = [log for log in logs if log["event"] == "model_usage_unusable"]
        assert warning["counts"] == [named]

    async def test_a_usage_block_that_is_no_object_is_unknown(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """`"usage": null` in an answer: the answer stands, every count of the call unknown."""
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": SONNET,
            "content": [{"type": "text", "text": "the answer"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": None,
        }
        fake_messages_api.enqueue(
            F.garbage(json.dumps(body), status=200, content_type="application/json")
        )
        outcome = await LLMSubagent("a", sonnet).run("q")
        assert isinstance(outcome, Success)
        assert outcome.data == "the answer"
        assert outcome.usage is not None
        assert (outcome.usage.model_calls, outcome.usage.unknown_token_calls) == (1, 1)

    async def test_the_report_says_which_counts_are_unknown(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """Markdown notes the unknown counts; JSON has `unknownTokenCalls`, read back whole."""
        fake_messages_api.enqueue(
            F.text("first", usage={"input_tokens": -5, "output_tokens": 7}),
            F.text("second", input_tokens=100, output_tokens=10),
        )
        report = await Coordinator([LLMSubagent("a", sonnet)]).run(["q1", "q2"])
        assert report.usage is not None
        assert (report.usage.model_calls, report.usage.unknown_token_calls) == (2, 1)
        assert (report.usage.input_tokens, report.usage.output_tokens) == (100, 17)
        markdown = report.to_markdown()
        assert "Total: 2 model calls, 117 tokens, unknown (token counts missing)." in markdown
        assert "Token counts unknown for 1 model call" in markdown
        data = json.loads(report.to_json())
        assert data["usage"]["unknownTokenCalls"] == 1
        assert Report.model_validate(data).usage == report.usage

    async def test_known_counts_keep_their_json_shape(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """Usage whose counts are all known has no `unknownTokenCalls` key."""
        fake_messages_api.enqueue(F.text("fine", input_tokens=10, output_tokens=2))
        outcome = await LLMSubagent("a", sonnet).run("q")
        assert "unknownTokenCalls" not in outcome.to_dict()["usage"]
        assert "unknownTokenCalls" not in outcome.to_dict()["usage"]["byModel"][0]


class TestPrices:
    def test_a_dated_snapshot_has_its_models_price(self) -> None:
        """`claude-sonnet-4-5-20250929` is priced as `claude-sonnet-4-5`."""
        table = PriceTable()
        assert table.price_of("claude-sonnet-4-5-20250929") == DEFAULT_PRICES["claude-sonnet-4-5"]

    def test_an_unknown_model_has_no_price(self) -> None:
        """Neither a newer version nor another vendor's model is priced by resemblance."""
        table = PriceTable()
        assert table.price_of("claude-opus-4-6") is None
        assert table.price_of("gpt-x") is None

    def test_defaults_can_be_left_out(self) -> None:
        """`defaults=False` prices only the models given."""
        assert PriceTable(defaults=False).price_of("claude-sonnet-4-5") is None

    def test_a_price_must_be_a_model_price(self) -> None:
        """A bare number is refused, naming the argument."""
        with pytest.raises(UsageError, match="prices="):
            PriceTable({"m": 3.0})  # type: ignore[dict-item]

    def test_summaries_add_up_by_model(self) -> None:
        """Adding summaries merges lines of the same model; one unknown cost makes it unknown."""
        known = UsageSummary.of([ModelUsage(model="a", input_tokens=1, model_calls=1)])
        unknown = UsageSummary.of(
            [ModelUsage(model="b", input_tokens=2, model_calls=1, cost_usd=None)]
        )
        total = known + known + unknown
        assert [(line.model, line.input_tokens) for line in total.by_model] == [("a", 2), ("b", 2)]
        assert total.cost_usd is None


class TestReasoningTokens:
    def test_reasoning_tokens_add_up_per_model_and_show_in_json_only_when_spent(self) -> None:
        """A reasoning model's thinking is part of its output, counted apart too; usage of a
        model that did not reason keeps the JSON shape it always had."""
        thinking = ModelUsage(model="o", output_tokens=90, reasoning_tokens=60, model_calls=1)
        plain = ModelUsage(model="c", output_tokens=10, model_calls=1)
        summary = UsageSummary.of([thinking, thinking, plain])
        assert summary.reasoning_tokens == 120
        assert summary.output_tokens == 190
        assert summary.by_model[0].reasoning_tokens == 120
        data = summary.model_dump(mode="json", by_alias=True)
        assert data["reasoningTokens"] == 120
        assert "reasoningTokens" not in data["byModel"][1]
        assert UsageSummary.model_validate(data) == summary
        assert "reasoningTokens" not in UsageSummary.of([plain]).model_dump(by_alias=True)
