"""Online mode against the fake Messages API: the real SDK on loopback, never the internet.

Claude plans, selects passages, searches the web (server-side tool) and writes the
summary; when every model call fails, the run still ends with a report that says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentmesh.testing import (
    ChatReply,
    FakeChatCompletionsAPI,
    FakeMessagesAPI,
    RecordedRequest,
    Reply,
)
from tests.e2e.conftest import QUESTION, Run, run_agent

WEB_RESULT = {
    "type": "web_search_result",
    "url": "https://docs.python.org/3/reference/compound_stmts.html#the-with-statement",
    "title": "8. Compound statements: the with statement",
    "encrypted_content": "opaque",
    "page_age": "2025-01-01",
}


def _tools(request: RecordedRequest) -> set[str]:
    body = request.body if isinstance(request.body, dict) else {}
    return {str(t.get("name")) for t in body.get("tools", [])}


# The arguments a well-behaved model calls each of the agent's tools with.
ANSWERS: dict[str, dict[str, Any]] = {
    "plan_research": {
        "subtopics": [
            {"title": "with statement semantics", "query": '"with statement" exceptions'},
            {"title": "contextlib helpers", "query": '"context manager" contextlib'},
        ]
    },
    "keep_passages": {"keep": [0, 1, 99]},
    "write_summary": {"summary": "`__exit__` runs even when the block raises [1]."},
}


def claude(request: RecordedRequest) -> Reply:
    """A well-behaved Claude: answers each kind of call the agent makes."""
    tools = _tools(request)
    for name in ("plan_research", "keep_passages"):
        if name in tools:
            return FakeMessagesAPI.tool_use(name, ANSWERS[name])
    if "web_search" in tools:
        return FakeMessagesAPI.message(
            [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "web_search",
                    "input": {"query": "with statement"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": [WEB_RESULT],
                },
                "The with statement calls __exit__ even when the block raises.",
            ]
        )
    if "write_summary" in tools:
        return FakeMessagesAPI.tool_use("write_summary", ANSWERS["write_summary"])
    return FakeMessagesAPI.error(400, message=f"unexpected call with tools {sorted(tools)}")


def overloaded(request: RecordedRequest) -> Reply:
    """Claude overloaded for the next minute; the web search tool unavailable."""
    if "web_search" in _tools(request):
        return FakeMessagesAPI.message(
            [
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": {
                        "type": "web_search_tool_result_error",
                        "error_code": "unavailable",
                    },
                }
            ]
        )
    return FakeMessagesAPI.error(529, retry_after=60)


def run_online(handler: Any, *args: str) -> tuple[Run, list[RecordedRequest]]:
    with FakeMessagesAPI(handler=handler) as api:
        run = run_agent(
            QUESTION,
            "--json",
            "--seed",
            "1",
            "--model",
            "claude-fake",
            *args,
            env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": api.base_url},
        )
        return run, list(api.requests)


@pytest.fixture(scope="module")
def online() -> tuple[Run, list[RecordedRequest]]:
    return run_online(claude)


@pytest.fixture(scope="module")
def degraded() -> tuple[Run, list[RecordedRequest]]:
    return run_online(overloaded)


class TestOnline:
    def test_claude_plans(self, online: tuple[Run, list[RecordedRequest]]) -> None:
        """The subtopics are Claude's, and every source searched each of them."""
        run, _ = online
        assert run.returncode == 0, run.stderr
        assert [s["topic"] for s in run.report["plan"]] == [
            "whole question",
            "with statement semantics",
            "contextlib helpers",
        ]
        assert run.report["mode"] == "online (claude-fake)"
        assert {e["source"] for e in run.report["coverage"]} == {
            "pydoc",
            "stdlib",
            "packages",
            "web",
        }

    def test_web_source_cites_pages(self, online: tuple[Run, list[RecordedRequest]]) -> None:
        """The server-side web search results become findings cited by title and URL."""
        run, _ = online
        web = run.findings("web")
        assert web
        assert web[0]["content"]["section"] == WEB_RESULT["url"]
        statuses = {e["topic"]: (e["status"], e["reason"]) for e in run.coverage("web")}
        assert statuses["with statement semantics"] == ("covered", None)

    def test_claude_selects_passages(self, online: tuple[Run, list[RecordedRequest]]) -> None:
        """Claude's choice is applied: at most its two valid numbers per task, 99 dropped."""
        run, requests = online
        assert any("keep_passages" in _tools(r) for r in requests)
        for source in ("pydoc", "stdlib"):
            for record in run.records(source):
                final = record["steps"][-1]["outcome"]
                assert len(final["data"]) <= 2

    def test_claude_writes_the_summary(self, online: tuple[Run, list[RecordedRequest]]) -> None:
        run, requests = online
        assert run.report["summary"] == "`__exit__` runs even when the block raises [1]."
        assert all(r.api_key == "sk-ant-test" for r in requests)


class TestDegraded:
    def test_still_a_report(self, degraded: tuple[Run, list[RecordedRequest]]) -> None:
        """Every model call fails; the run ends with a report, exit 0."""
        run, _ = degraded
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr

    def test_offline_plan_used_and_said(self, degraded: tuple[Run, list[RecordedRequest]]) -> None:
        """Claude could not plan: the offline planner's plan is used, and the report says why."""
        run, _ = degraded
        assert [s["topic"] for s in run.report["plan"]][:2] == ["whole question", "with statement"]
        (note,) = run.report["notes"]
        assert "overloaded" in note

    def test_failed_analysis_keeps_what_was_read(
        self, degraded: tuple[Run, list[RecordedRequest]]
    ) -> None:
        """The analysis failed after the documents were read: partial, passages preliminary."""
        run, _ = degraded
        statuses = {e["status"] for e in run.coverage("pydoc")}
        assert statuses == {"partial"}
        assert run.findings("pydoc", preliminary=True)

    def test_web_outage_is_a_gap(self, degraded: tuple[Run, list[RecordedRequest]]) -> None:
        run, _ = degraded
        for entry in run.coverage("web"):
            assert entry["status"] == "gap"
            assert entry["isRetryable"] is True

    def test_summary_falls_back(self, degraded: tuple[Run, list[RecordedRequest]]) -> None:
        """No model summary: the offline one stays, with a note saying why."""
        run, _ = degraded
        assert run.report["synthesisNote"].startswith("Summary unavailable")
        assert run.report["summary"].startswith("Extractive summary")


def test_a_hung_web_search_is_given_up_at_the_call_bound() -> None:
    """An injected `web=timeout` hangs the web backend: each attempt is given up at the
    search-call bound (and retried), and the web's entries are gaps that say so, not a
    run that waits for its own deadline while the other sources' work is done."""
    run, _ = run_online(claude, "--inject", "web=timeout")
    entries = run.coverage("web")
    assert entries
    for entry in entries:
        assert entry["status"] == "gap"
        assert "web did not answer within 0.2s" in entry["reason"]
    assert any(entry["status"] == "covered" for entry in run.report["coverage"])


def primary_overloaded(request: RecordedRequest) -> Reply:
    """`claude-fake` overloaded for the next minute; its fallback, claude-haiku-4-5, well."""
    if request.model == "claude-fake":
        return FakeMessagesAPI.error(529, retry_after=60)
    return claude(request)


@pytest.fixture(scope="module")
def failed_over(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, list[RecordedRequest]]:
    page = tmp_path_factory.mktemp("failover") / "report.html"
    with FakeMessagesAPI(handler=primary_overloaded) as api:
        run = run_agent(
            QUESTION,
            "--json",
            "--seed",
            "1",
            "--model",
            "claude-fake",
            "--html",
            str(page),
            env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": api.base_url},
        )
        return run, list(api.requests)


class TestFallbackChain:
    def test_the_fallback_model_answers_every_call(
        self, failed_over: tuple[Run, list[RecordedRequest]]
    ) -> None:
        """The overloaded primary is not waited for: each request goes on to the fallback."""
        run, requests = failed_over
        assert run.returncode == 0, run.stderr
        assert [s["topic"] for s in run.report["plan"]] == [
            "whole question",
            "with statement semantics",
            "contextlib helpers",
        ]
        assert run.report["notes"] == []
        assert run.report["summary"] == "`__exit__` runs even when the block raises [1]."
        assert {r.model for r in requests} == {"claude-fake", "claude-haiku-4-5"}
        # Every web search was answered; one title is about contextlib, honestly empty.
        web = {e["topic"]: e["status"] for e in run.coverage("web")}
        assert web["with statement semantics"] == "covered"
        assert set(web.values()) <= {"covered", "empty"}

    def test_the_report_says_which_model_failed_and_which_answered(
        self, failed_over: tuple[Run, list[RecordedRequest]]
    ) -> None:
        """Each search entry names the failed-over primary and the model that answered."""
        run, _ = failed_over
        for entry in run.coverage("pydoc"):
            # Called and failed over, or skipped once the run knew it was out (issue 26).
            reason = entry["reason"]
            assert (
                "models failed over: claude-fake overloaded" in reason
                or "models failed over: claude-fake skipped (overloaded since" in reason
            )
            assert "answered by model claude-haiku-4-5" in entry["reason"]
        failovers = run.report["usage"]["failovers"]
        assert failovers
        assert {f["model"] for f in failovers} == {"claude-fake"}
        assert {f["fallback"] for f in failovers} == {"claude-haiku-4-5"}

    def test_the_run_prints_its_usage_and_cost(
        self, failed_over: tuple[Run, list[RecordedRequest]]
    ) -> None:
        """Calls, tokens and cost of planning and research, on stderr, in JSON and in HTML."""
        run, requests = failed_over
        by_model = {line["model"]: line for line in run.report["usage"]["byModel"]}
        haiku = by_model["claude-haiku-4-5"]
        assert haiku["inputTokens"] > 0
        assert haiku["costUsd"] > 0  # priced by the default table
        assert by_model["claude-fake"]["inputTokens"] == 0
        assert by_model["claude-fake"]["costUsd"] == 0  # a 529 costs nothing
        planning = run.report["planningUsage"]
        assert planning["modelCalls"] == 2  # the primary's 529, then the fallback's plan
        research_calls = run.report["usage"]["modelCalls"]
        # Every request is counted: the tasks', and LLMSynthesizer's and LLMRewriter's too.
        assert planning["modelCalls"] + research_calls == len(requests)
        assert set(run.report["usage"]["bySubagent"]) >= {"synthesizer"}
        assert "usage: " in run.stderr
        assert "model calls" in run.stderr
        assert "cost $" in run.stderr
        page = run.html.read_text(encoding="utf-8")
        assert '<table id="usage">' in page
        assert "claude-haiku-4-5" in page


BEDROCK_MODEL = "us.anthropic.claude-fake-v1:0"


@pytest.fixture(scope="module")
def on_bedrock(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, list[RecordedRequest]]:
    """`--model bedrock:<model id>`: Claude on Bedrock, SigV4 from the environment."""
    home = tmp_path_factory.mktemp("aws")
    with FakeMessagesAPI(handler=claude) as api:
        run = run_agent(
            QUESTION,
            "--json",
            "--seed",
            "1",
            "--model",
            f"bedrock:{BEDROCK_MODEL}",
            env={
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "AKIDFAKEEXAMPLE0003",
                "AWS_SECRET_ACCESS_KEY": "fake-secret-key",
                "AWS_CONFIG_FILE": str(home / "config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
                "AWS_EC2_METADATA_DISABLED": "true",
                "ANTHROPIC_BEDROCK_BASE_URL": api.base_url,
            },
        )
        return run, list(api.requests)


def llama(request: RecordedRequest) -> ChatReply:
    """The same answers from a server that speaks Chat Completions: tools are functions."""
    body = request.body if isinstance(request.body, dict) else {}
    tools = {str(t["function"]["name"]) for t in body.get("tools", [])}
    for name, arguments in ANSWERS.items():
        if name in tools:
            return FakeChatCompletionsAPI.tool_call(name, arguments)
    return FakeChatCompletionsAPI.error(400, f"unexpected call with tools {sorted(tools)}")


@pytest.fixture(scope="module")
def on_a_compatible_server() -> tuple[Run, list[RecordedRequest]]:
    """`--model openai-compatible:<model>@<url>`: a local server that wants no key."""
    with FakeChatCompletionsAPI(handler=llama, require_auth=False) as api:
        run = run_agent(
            QUESTION,
            "--json",
            "--seed",
            "1",
            "--model",
            f"openai-compatible:llama3.1@{api.base_url}",
            env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""},
        )
        return run, list(api.requests)


class TestModelStrings:
    def test_a_model_string_runs_the_agent_on_that_provider(
        self, on_bedrock: tuple[Run, list[RecordedRequest]]
    ) -> None:
        """No Anthropic key needed; the web source (Anthropic's tool) is left out."""
        run, requests = on_bedrock
        assert run.returncode == 0, run.stderr
        assert run.report["mode"] == f"online (bedrock:{BEDROCK_MODEL})"
        assert len(run.report["plan"]) == 3  # Claude's two subtopics and the question
        assert "web" not in {e["source"] for e in run.report["coverage"]}
        assert run.report["summary"] == "`__exit__` runs even when the block raises [1]."
        assert requests
        assert {r.path for r in requests} == {f"/model/{BEDROCK_MODEL}/invoke"}
        assert {r.auth_scheme for r in requests} == {"sigv4"}

    def test_a_bad_model_string_is_a_usage_error(self) -> None:
        run = run_agent(QUESTION, "--model", "mistral:large")
        assert run.returncode == 2
        assert "--model: model string 'mistral:large' names no known provider" in run.stderr

    def test_an_openai_compatible_server_runs_the_agent(
        self, on_a_compatible_server: tuple[Run, list[RecordedRequest]]
    ) -> None:
        """No key at all: the plan, the passages and the summary come from the server."""
        run, requests = on_a_compatible_server
        assert run.returncode == 0, run.stderr
        assert run.report["mode"].startswith("online (openai-compatible:llama3.1@http://127.0.0.1:")
        assert len(run.report["plan"]) == 3
        assert "web" not in {e["source"] for e in run.report["coverage"]}
        assert run.report["summary"] == "`__exit__` runs even when the block raises [1]."
        assert {r.path for r in requests} == {"/v1/chat/completions"}
        assert {r.model for r in requests} == {"llama3.1"}
