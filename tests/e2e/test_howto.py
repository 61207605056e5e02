"""The how-to programs under examples/howto run as a reader runs them, and show what they claim.

Each program runs once per class, in this process where that is cheaper (`runpy`, as
`python -m` does), or as a subprocess when it starts one itself. The testing guide's own
pytest file, examples/howto/test_my_agents.py, is collected through pyproject's testpaths.
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_in_process(name: str, *args: str) -> str:
    """`python -m examples.howto.NAME ARGS` in this process; what it printed."""
    out = io.StringIO()
    module = f"examples.howto.{name}"
    with mock.patch.object(sys, "argv", [module, *args]), contextlib.redirect_stdout(out):
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    return out.getvalue()


def line_of(out: str, prefix: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(prefix))


@pytest.fixture(scope="module")
def support_hub() -> str:
    return run_in_process("support_hub")


def run_pipeline(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A subprocess: the program starts (and kills) a child process of its own.
    return subprocess.run(
        [sys.executable, *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def pipeline_run() -> subprocess.CompletedProcess[str]:
    return run_pipeline("-m", "examples.howto.checkpointed_pipeline", cwd=ROOT)


@pytest.fixture(scope="module")
def claude_lead_agent() -> str:
    return run_in_process("claude_lead_agent")


@pytest.fixture(scope="module")
def mcp_tools() -> str:
    pytest.importorskip("mcp_server_time")
    return run_in_process("mcp_tools")


@pytest.fixture(scope="module")
def models() -> str:
    return run_in_process("models")


@pytest.fixture(scope="module")
def live_runs() -> str:
    return run_in_process("live_runs")


@pytest.fixture(scope="module")
def a2a_remote() -> str:
    pytest.importorskip("a2a")
    return run_in_process("a2a_remote")


class TestSupportHub:
    def test_rate_limited_shipping_is_retried_locally_and_covered(self, support_hub: str) -> None:
        """The carrier's two 429s are retried after its retry-after, and the topic is covered."""
        assert "rate_limited x2" in line_of(support_hub, "delivery  covered")
        assert "shipping waited [1.5, 1.5] s" in support_hub
        assert "carrier API called 3 times" in support_hub

    def test_refund_above_the_limit_is_refused_by_the_policy(self, support_hub: str) -> None:
        """The $450 refund is escalated, the policy and its reason named."""
        assert "refund_limit: refunds above $200 need a supervisor" in line_of(
            support_hub, "refund    escalated"
        )

    def test_the_knowledge_base_gap_keeps_its_partial_results(self, support_hub: str) -> None:
        """The timed-out section is the gap; the two sections read are kept as preliminary."""
        assert "'exchanges' timed out" in line_of(support_hub, "policies  partial")
        assert "- completed: returns, warranty\n- pending: exchanges" in support_hub
        assert "returns: Items can be returned within 30 days." in support_hub
        assert "coverage: 33% of topics answered" in support_hub


class TestCheckpointedPipeline:
    def test_the_email_is_sent_once_across_the_crash_and_the_resume(
        self, pipeline_run: subprocess.CompletedProcess[str]
    ) -> None:
        """The child dies after sending; the resumed run finishes with one email in the outbox."""
        assert pipeline_run.returncode == 0, pipeline_run.stderr
        assert pipeline_run.stdout.count("email sent") == 1
        assert "(exit code 1)" in pipeline_run.stdout
        assert "result: sent to team@example.com" in pipeline_run.stdout
        assert "emails in the outbox: 1\n" in pipeline_run.stdout

    def test_the_resumed_run_does_not_redo_the_expensive_stage(
        self, pipeline_run: subprocess.CompletedProcess[str]
    ) -> None:
        """Retrieval and summary run in the crashed process only; the resume reads them back."""
        resumed = pipeline_run.stdout.split("== run 2")[1]
        assert pipeline_run.stdout.count("retrieval: searching") == 1
        assert "retrieval" not in resumed.split("result:")[0]
        assert "summary:" not in resumed

    def test_a_copy_of_the_program_runs_as_a_file(self, tmp_path: Path) -> None:
        """Saved as a file outside the repository, as the guide offers, it runs the same."""
        copy = tmp_path / "checkpointed_pipeline.py"
        copy.write_text((ROOT / "examples/howto/checkpointed_pipeline.py").read_text())
        done = run_pipeline(copy, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "(exit code 1)" in done.stdout
        assert "emails in the outbox: 1\n" in done.stdout


class TestClaudeLeadAgent:
    def test_the_lead_calls_both_subagents_as_tools(self, claude_lead_agent: str) -> None:
        """One scripted turn calls docs and web, and each subagent is really run."""
        assert "docs subagent asked: 'cancel'" in claude_lead_agent
        assert "web subagent asked: 'asyncio 3.11 cancellation changes'" in claude_lead_agent
        assert "answer: Call task.cancel()" in claude_lead_agent

    def test_the_failed_subagent_reaches_the_model_as_an_envelope(
        self, claude_lead_agent: str
    ) -> None:
        """The web subagent's failure goes back as an is_error tool result with its error type."""
        failed = line_of(claude_lead_agent, "tool_result (is_error)")
        assert '"errorType":"unavailable"' in failed
        assert line_of(claude_lead_agent, "tool_result (ok)").count("Task.cancel()") == 1

    def test_the_overload_is_retried_by_agentmesh(self, claude_lead_agent: str) -> None:
        """A 529 then two turns: three HTTP requests, the retry shown on the outcome."""
        assert "HTTP requests to the fake API: 3" in claude_lead_agent
        assert "local retries: lead/model overloaded x1" in claude_lead_agent

    def test_live_without_a_key_says_what_is_missing(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """--live without ANTHROPIC_API_KEY stops with a message, before any request."""
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        with pytest.raises(SystemExit, match="--live needs ANTHROPIC_API_KEY"):
            run_in_process("claude_lead_agent", "--live")


class TestMCPTools:
    def test_the_model_is_offered_the_servers_tools(self, mcp_tools: str) -> None:
        """The server's two tools are offered with the lead's own submit/report tools."""
        offered = line_of(mcp_tools, "tools offered to the model")
        assert "'get_current_time', 'convert_time'" in offered

    def test_each_call_ends_as_its_server_or_policy_decided(self, mcp_tools: str) -> None:
        """Tokyo answered; the unknown timezone is the server's isError; convert_time is denied."""
        assert re.search(
            r"the model's answer: Asia/Tokyo: \d\d:\d\d; could not: tool_error", mcp_tools
        )
        assert "could not: policy_blocked (call denied by policy no_conversions" in mcp_tools
        assert "coverage: time covered: policy rulings: deny by policy no_conversions" in mcp_tools


class TestModels:
    def test_the_overloaded_primary_fails_over_to_the_fallback(self, models: str) -> None:
        """Sonnet's two overloads send the request to Haiku, which answers the first task."""
        assert "answered by model claude-haiku-4-5" in line_of(models, "cancel  covered")
        expected = "fail-over: claude-sonnet-4-5 (overloaded after 2 attempts) -> claude-haiku-4-5"
        assert expected in models

    def test_the_usage_limit_refuses_the_second_task(self, models: str) -> None:
        """Three model calls spend the limit; the second task is a gap naming it."""
        assert "max_model_calls=3 reached" in line_of(models, "shield  gap")
        assert "model calls: 3, tokens in/out: 1200/300, cost: $0.00270" in models


class TestLiveRuns:
    def test_progress_is_printed_as_the_events_arrive(self, live_runs: str) -> None:
        """Starts, a retry with its delay, and each task's end are printed, numbered in order."""
        first_run = live_runs.split("== a person approves")[0]
        assert re.search(r"retrying +release/run_tests: timeout, again in \d\.\d\ds", first_run)
        numbers = [int(n) for n in re.findall(r"^  #(\d+)", first_run, re.MULTILINE)]
        assert numbers == sorted(numbers)
        assert "finished  production: escalated" in first_run

    def test_the_approved_deploy_is_made_once_after_the_resume(self, live_runs: str) -> None:
        """The person's Approve lets production go on; each environment is deployed once."""
        assert "production deploys need a release manager" in line_of(live_runs, "pending: ")
        resumed = live_runs.split("== a person approves")[1]
        assert "finished  production: covered" in resumed
        assert "deploys made: ['staging', 'production']" in live_runs


class TestA2ARemote:
    def test_the_remote_agent_s_outcomes_are_routed_as_in_process(self, a2a_remote: str) -> None:
        """Over A2A: papers found are covered, none found is empty, a refusal is escalated."""
        assert line_of(a2a_remote, "retry budgets        papers").endswith("covered")
        assert "searched, nothing found" in line_of(a2a_remote, "quantum retries      papers")
        refused = line_of(a2a_remote, "unpublished drafts   papers")
        assert "escalated drafts are not shared outside the lab" in refused

    def test_the_remote_envelope_arrives_whole(self, a2a_remote: str) -> None:
        """The business envelope keeps its category, type and source across A2A."""
        assert "over A2A: business/not_shared from papers" in a2a_remote
