"""Subagents served over MCP, as a client of the official SDK sees them (stdio and HTTP).

Each transport starts `python -m agentmesh.mcp serve tests.mcp.fixtures.served:subagents`
once per module, makes every call in one session, and stops the server; the tests
assert on what came back and on what is left running afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from agentmesh import ErrorEnvelope, RetryBudget, Success, UsageError, subagent
from agentmesh.mcp import serve
from agentmesh.mcp._cli import main
from agentmesh.mcp._serve_result import RUN_ID_META
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from tests.mcp.fixtures import served

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.mcp.fixtures.served:subagents"
SERVE = [sys.executable, "-m", "agentmesh.mcp", "serve", TARGET, "--timeout", "0.5"]
CALLS = ("docs", "nothing", "flaky", "strict", "billing", "vault", "keys", "broken", "slow")


@dataclass(frozen=True, slots=True)
class Session:
    """What one client session against a served process saw, and what it left behind."""

    transport: str
    tools: dict[str, Any]  # name -> the listed MCP tool
    results: dict[str, CallToolResult]
    run_ids: tuple[str, str]  # of two calls of the same tool
    server_pid: int
    server_alive_after: bool


async def _talk(
    client: Client,
) -> tuple[dict[str, Any], dict[str, CallToolResult], tuple[str, str]]:
    async with client:
        listed = await client.list_tools()
        results = {
            name: await client.call_tool(name, {"query": f"ask {name}", "topic": "t"})
            for name in (*CALLS, "whoami")
        }
        again = await client.call_tool("docs", {"query": "again"})
        results["no query"] = await client.call_tool("docs", {"topic": "t"})
        results["number query"] = await client.call_tool("docs", {"query": 7})
        results["unknown"] = await client.call_tool("nosuch", {"query": "q"})
    first, second = results["docs"].meta or {}, again.meta or {}
    return {t.name: t for t in listed.tools}, results, (first[RUN_ID_META], second[RUN_ID_META])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _over_stdio() -> Session:
    params = StdioServerParameters(command=SERVE[0], args=SERVE[1:], cwd=str(ROOT))
    tools, results, run_ids = asyncio.run(_talk(Client(params)))
    pid = results["whoami"].structured_content["data"]["pid"]
    return Session("stdio", tools, results, run_ids, pid, _alive(pid))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Bounded polling for the server's socket, failing with its log if it exits."""
    for _ in range(600):
        if process.poll() is not None:
            pytest.fail(f"the server exited ({process.returncode}): {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(0.05)
    pytest.fail(f"the server never listened on {port}: {log.read_text()}")


def _over_http() -> Session:
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp, "server.log")
        with log.open("wb") as err:
            process = subprocess.Popen(
                [*SERVE, "--http", f"127.0.0.1:{port}"],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            _wait_until_listening(process, port, log)
            tools, results, run_ids = asyncio.run(_talk(Client(f"http://127.0.0.1:{port}/mcp")))
        finally:
            _stop(process)
            log_text = log.read_text()
    pid = results["whoami"].structured_content["data"]["pid"]
    assert pid == process.pid
    # SIGTERM is how a supervisor stops a server: uvicorn shuts down gracefully and
    # re-raises the signal; a SIGKILL here would mean it ignored the request.
    assert process.returncode == -signal.SIGTERM, log_text
    return Session("http", tools, results, run_ids, pid, _alive(pid))


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server; kill it only if it ignores that (the test then fails)."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module", params=["stdio", "http"])
def session(request: pytest.FixtureRequest) -> Session:
    return _over_stdio() if request.param == "stdio" else _over_http()


def _envelope(result: CallToolResult) -> ErrorEnvelope:
    assert result.is_error is True
    return ErrorEnvelope.model_validate(result.structured_content)


def _success(result: CallToolResult) -> Success[Any]:
    assert result.is_error is False
    return Success[Any].model_validate(result.structured_content)


class TestTools:
    def test_each_subagent_is_one_tool_with_query_and_optional_topic(
        self, session: Session
    ) -> None:
        """Every served subagent is listed as a tool taking `query` (required) and `topic`."""
        assert set(session.tools) == {agent.name for agent in served.subagents}
        schema = session.tools["docs"].input_schema
        assert set(schema["properties"]) == {"query", "topic"}
        assert schema["required"] == ["query"]

    def test_the_description_comes_from_the_subagent(self, session: Session) -> None:
        """A tool's description is its subagent's docstring, for the client's model to read."""
        assert session.tools["billing"].description == served.billing.description


class TestSuccess:
    def test_a_success_comes_back_whole(self, session: Session) -> None:
        """A result arrives as the Success's JSON: data, source, query and local retries."""
        success = _success(session.results["docs"])
        assert success.data == [{"title": "About ask docs", "topic": "t"}]
        assert (success.source, success.attempted_query) == ("docs", "ask docs")
        assert success.attempts == 2  # the subagent's own retry ran inside the server

    def test_a_success_also_has_its_data_as_text(self, session: Session) -> None:
        """Clients that read only text see the data's JSON."""
        assert session.results["docs"].content[0].text == '[{"title":"About ask docs","topic":"t"}]'

    def test_an_empty_success_is_not_an_error(self, session: Session) -> None:
        """ "Searched, nothing found" is a success with `isEmpty`, never `isError`."""
        result = session.results["nothing"]
        success = _success(result)
        assert success.is_empty
        assert result.structured_content["isEmpty"] is True
        assert "found nothing" in result.content[0].text


class TestEnvelopes:
    def test_transient_envelope_keeps_partials_alternatives_and_retry_hint(
        self, session: Session
    ) -> None:
        """A transient failure comes back retryable, with what was found and what else to try."""
        envelope = _envelope(session.results["flaky"])
        assert (envelope.error_category, envelope.error_type) == ("transient", "unavailable")
        assert envelope.is_retryable
        assert envelope.attempts == 3
        assert envelope.partial_results is not None
        assert envelope.partial_results.findings == ({"title": "page one"},)
        assert envelope.partial_results.pending == ("page2",)
        assert envelope.alternative_approaches == ("cached_index",)
        assert envelope.retry_after == 0.1

    def test_validation_envelope(self, session: Session) -> None:
        """A validation failure comes back not retryable, with its type and message."""
        envelope = _envelope(session.results["strict"])
        assert (envelope.error_category, envelope.error_type) == ("validation", "invalid_query")
        assert not envelope.is_retryable
        assert envelope.message == "the query must name a table"

    def test_business_envelope_keeps_the_user_message(self, session: Session) -> None:
        """A business failure carries its customer-facing text."""
        envelope = _envelope(session.results["billing"])
        assert envelope.error_category == "business"
        assert envelope.user_message == "This order can no longer be refunded."

    def test_permission_envelope_from_the_subagents_own_policy(self, session: Session) -> None:
        """The subagent's policy denies its tool call in the server, and the ruling crosses."""
        envelope = _envelope(session.results["vault"])
        assert (envelope.error_category, envelope.error_type) == ("permission", "policy_blocked")
        assert envelope.policy is not None
        assert envelope.policy.policy == "no_vault"
        assert envelope.attempts == 0  # denied before the call: the tool never ran

    def test_permission_envelope_from_a_refusal(self, session: Session) -> None:
        """`PermissionDenied` in the subagent comes back as a permission envelope."""
        envelope = _envelope(session.results["keys"])
        assert (envelope.error_category, envelope.is_retryable) == ("permission", False)

    def test_other_envelope_names_the_exception(self, session: Session) -> None:
        """A bug in the subagent comes back as `other`, with the exception in `details`."""
        envelope = _envelope(session.results["broken"])
        assert envelope.error_category == "other"
        assert envelope.details == "KeyError: 'missing'"

    def test_the_call_timeout_cuts_a_slow_subagent(self, session: Session) -> None:
        """`--timeout` bounds one call: a subagent past it comes back as a transient timeout."""
        envelope = _envelope(session.results["slow"])
        assert (envelope.error_category, envelope.error_type) == ("transient", "timeout")

    def test_the_text_says_what_failed(self, session: Session) -> None:
        """Clients that read only text see the source, category, type and message."""
        text = session.results["strict"].content[0].text
        assert text == (
            "strict failed (validation/invalid_query, not retryable, 1 attempt): "
            "the query must name a table"
        )


class TestRefusedCalls:
    def test_missing_arguments_are_a_validation_envelope(self, session: Session) -> None:
        """A call without `query` is refused with an envelope naming the field; nothing ran."""
        envelope = _envelope(session.results["no query"])
        assert (envelope.error_category, envelope.error_type) == ("validation", "invalid_input")
        assert envelope.message == "invalid arguments for docs: query: Field required"
        assert envelope.attempts == 0

    def test_wrongly_typed_arguments_are_a_validation_envelope(self, session: Session) -> None:
        """A `query` that is not a string is refused the same way, with what was sent."""
        envelope = _envelope(session.results["number query"])
        assert envelope.error_type == "invalid_input"
        assert envelope.attempted_query == {"tool": "docs", "arguments": {"query": 7}}

    def test_an_unknown_tool_is_a_validation_envelope(self, session: Session) -> None:
        """A tool name the server does not have is refused as `unknown_tool`, naming the tools."""
        envelope = _envelope(session.results["unknown"])
        assert (envelope.error_category, envelope.error_type) == ("validation", "unknown_tool")
        assert "no tool named 'nosuch'" in envelope.message
        assert "docs" in envelope.message


class TestRunScope:
    def test_each_call_is_a_run_of_its_own(self, session: Session) -> None:
        """Two calls of one tool get two run ids (named in `_meta`) and separate retries."""
        first, second = session.run_ids
        assert first != second
        assert _success(session.results["docs"]).attempts == 2


class TestServeOptions:
    async def test_a_shared_retry_budget_bounds_retries_across_calls(self) -> None:
        """With `retry_budget=`, retries spent by one call are gone for the next."""
        server = serve([served.flaky], retry_budget=RetryBudget(ratio=0, reserve=1))
        async with Client(server) as client:
            first = _envelope(await client.call_tool("flaky", {"query": "a"}))
            second = _envelope(await client.call_tool("flaky", {"query": "b"}))
        assert (first.attempts, second.attempts) == (2, 1)

    async def test_without_a_budget_each_call_gets_a_fresh_one(self) -> None:
        """By default every call retries as a run of its own would."""
        server = serve([served.flaky])
        async with Client(server) as client:
            results = [await client.call_tool("flaky", {"query": q}) for q in "ab"]
        assert [_envelope(result).attempts for result in results] == [3, 3]

    async def test_server_policies_apply_before_the_subagents_own(self) -> None:
        """`policies=` rules every call's tool calls, ahead of the subagent's policies."""

        @pre_tool_use
        def house_rule(event: ToolCallEvent) -> Ruling:
            return Ruling.deny("no tools on this server")

        async with Client(serve([served.vault], policies=[house_rule])) as client:
            envelope = _envelope(await client.call_tool("vault", {"query": "q"}))
        assert envelope.policy is not None
        assert envelope.policy.policy == "house_rule"


class TestProcesses:
    def test_no_server_process_is_left_after_the_session(self, session: Session) -> None:
        """Closing the client (stdio) or stopping the server (HTTP) leaves no process behind."""
        assert not session.server_alive_after


class TestServeArguments:
    def test_subagents_must_be_subagents(self) -> None:
        """Anything but subagents is refused, naming the argument."""
        with pytest.raises(UsageError, match=r"serve\(subagents=\): 'docs' is not a Subagent"):
            serve(["docs"])

    def test_a_policy_that_may_ask_a_person_is_refused(self) -> None:
        """Nobody could answer its question over MCP: refused when the server is built."""

        @pre_tool_use(asks=True)
        def approval(event: ToolCallEvent) -> Ruling:
            return Ruling.ask("a person approves")

        @subagent(name="desk", policies=[approval])
        async def desk(task: Any, ctx: Any) -> None: ...

        with pytest.raises(UsageError, match=r"serve\(\) keeps no checkpoint store"):
            serve([desk])
        with pytest.raises(UsageError, match="may ask a person"):
            serve([served.docs], policies=[approval])

    def test_an_empty_list_is_refused(self) -> None:
        """A server without tools is a mistake, said at once."""
        with pytest.raises(UsageError, match="is empty"):
            serve([])

    def test_tool_names_must_be_distinct(self) -> None:
        """Two subagents of one name would shadow each other as tools."""
        with pytest.raises(UsageError, match="two subagents are named 'docs'"):
            serve([served.docs, served.docs])

    def test_tool_names_must_be_valid_mcp_names(self) -> None:
        """A subagent name with a space is no MCP tool name."""

        @subagent(name="two words")
        async def spaced(task: Any, ctx: Any) -> None: ...

        with pytest.raises(UsageError, match="not a valid MCP tool name"):
            serve([spaced])

    def test_timeout_must_be_positive(self) -> None:
        """A timeout of zero seconds could never succeed."""
        with pytest.raises(UsageError, match=r"serve\(timeout=\)"):
            serve(served.subagents, timeout=0)


class TestCommandLine:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            ([], "the following arguments are required: COMMAND"),
            (["serve"], "the following arguments are required: package.module:subagents"),
            (["serve", "tests.mcp.fixtures.served"], "is not package.module:subagents"),
            (["serve", "tests.mcp.no_such_module:x"], "cannot import 'tests.mcp.no_such_module'"),
            (["serve", "tests.mcp.fixtures.served:absent"], "has no attribute 'absent'"),
            (["serve", "tests.mcp.fixtures.served:not_subagents"], "is not a Subagent"),
            (["serve", TARGET, "--http", "127.0.0.1"], "'127.0.0.1' is not [HOST:]PORT"),
            (["serve", TARGET, "--http", "localhost:99999"], "is not [HOST:]PORT"),
            (["serve", TARGET, "--timeout", "soon"], "'soon' is not a number of seconds"),
        ],
    )
    def test_bad_arguments_exit_2_with_a_clear_message(
        self, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A wrong argument names what is wrong and exits 2, before anything is served."""
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        assert message in capsys.readouterr().err

    def test_python_dash_m_exits_2_on_bad_arguments(self) -> None:
        """The module entry point gives the same message and exit code."""
        result = subprocess.run(
            [sys.executable, "-m", "agentmesh.mcp", "serve", "no_colon_here"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2
        assert "'no_colon_here' is not package.module:subagents" in result.stderr


class TestImports:
    def test_import_agentmesh_does_not_import_the_mcp_sdk(self) -> None:
        """The SDK loads only with `agentmesh.mcp`, never with `import agentmesh`."""
        code = "import sys, agentmesh; print('mcp' in sys.modules, end='')"
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert result.stdout == "False"

    def test_a_bad_target_is_refused_before_the_sdk_loads(self) -> None:
        """`serve` checks its arguments first: a typo is said without the SDK's import time."""
        code = (
            "import sys\n"
            "from agentmesh.mcp._cli import main\n"
            "try:\n    main(['serve', 'no_colon_here'])\n"
            "except SystemExit as exited:\n    print(exited.code, 'mcp' in sys.modules, end='')"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert result.stdout == "2 False"
        assert "'no_colon_here' is not package.module:subagents" in result.stderr

    def test_serve_is_exported(self) -> None:
        """`serve` is public in `agentmesh.mcp`."""
        import agentmesh.mcp

        assert "serve" in agentmesh.mcp.__all__


@pytest.fixture(autouse=True)
def _no_stray_children() -> Iterator[None]:
    """Every test ends with no child process of the test process still running."""
    yield
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    if children.exists():
        assert children.read_text().split() == []
