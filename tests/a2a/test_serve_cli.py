"""`python -m agentmesh.a2a serve package.module:agents`: what it serves, where, and how
it refuses what it cannot serve."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest

from agentmesh.a2a import A2AAgent
from agentmesh.a2a._server_cli import TOKEN_VARIABLE, app_of, parser
from agentmesh.envelope import Success
from tests.a2a.conftest import free_port


def app(*argv: str) -> httpx.AsyncClient:
    """A client of the app the command line builds, in this process (no socket)."""
    built = app_of(parser().parse_args(["serve", *argv]))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=built), base_url="http://test")


class TestCommandLine:
    async def test_the_card_names_the_address_bound_and_the_skills(self) -> None:
        """127.0.0.1 unless told; the card's URL is the address bound, or --url."""
        async with app("tests.a2a.served:desk", "--port", "9123") as client:
            card = (await client.get("/.well-known/agent-card.json")).json()
        assert card["supportedInterfaces"][0]["url"] == "http://127.0.0.1:9123/"
        assert [skill["id"] for skill in card["skills"]] == ["desk"]
        async with app("tests.a2a.served:desk", "--url", "https://agents.example.org/desk") as c:
            card = (await c.get("/.well-known/agent-card.json")).json()
        assert card["supportedInterfaces"][0]["url"] == "https://agents.example.org/desk/"

    async def test_the_token_comes_from_the_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """$AGENTMESH_A2A_TOKEN guards every request but the card's."""
        monkeypatch.setenv(TOKEN_VARIABLE, "from-the-environment-0123456789")
        async with app("tests.a2a.served:desk") as client:
            assert (await client.get("/.well-known/agent-card.json")).status_code == 200
            assert (await client.post("/", json={})).status_code == 401

    @pytest.mark.parametrize(
        ("target", "said"),
        [
            ("tests.a2a.served", "is not package.module:agents"),
            ("tests.a2a.no_such_module:desk", "no such module"),
            ("tests.a2a.served:nobody", "has no attribute 'nobody'"),
            ("tests.a2a.served:LIMIT", "cannot be served"),
        ],
    )
    def test_what_cannot_be_served_exits_2_saying_why(
        self, target: str, said: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """One line on stderr, exit code 2, nothing served."""
        with pytest.raises(SystemExit) as exited:
            app_of(parser().parse_args(["serve", target]))
        assert exited.value.code == 2
        assert said in capsys.readouterr().err

    def test_a_bad_target_is_refused_before_the_sdk_loads(self) -> None:
        """`serve` checks its arguments first: a typo is said without the SDK's (nor
        uvicorn's) import time."""
        code = (
            "import sys\n"
            "from agentmesh.a2a._server_cli import main\n"
            "try:\n    main(['serve', 'no_colon_here'])\n"
            "except SystemExit as exited:\n"
            "    print(exited.code, 'a2a' in sys.modules, 'uvicorn' in sys.modules, end='')"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert result.stdout == "2 False False"
        assert "'no_colon_here' is not package.module:agents" in result.stderr

    def test_another_address_than_loopback_needs_a_token_or_no_auth(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Anyone reaching 0.0.0.0 could answer approvals: refused without a token, unless
        the user says something in front checks who calls."""
        monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
        with pytest.raises(SystemExit) as exited:
            app_of(parser().parse_args(["serve", "tests.a2a.served:desk", "--host", "0.0.0.0"]))
        assert exited.value.code == 2
        assert "without a token" in capsys.readouterr().err
        args = ["serve", "tests.a2a.served:desk", "--host", "0.0.0.0"]
        assert app_of(parser().parse_args([*args, "--no-auth"])) is not None
        assert app_of(parser().parse_args([*args, "--token", "t" * 24])) is not None

    def test_python_m_serves_until_stopped(self) -> None:
        """The command serves on loopback; our own client is answered by it."""
        port = free_port()
        command = [sys.executable, "-m", "agentmesh.a2a", "serve", "tests.a2a.served:desk"]
        server = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{url}/.well-known/agent-card.json", timeout=1)
                    break
                except httpx.TransportError:
                    assert server.poll() is None, "the server exited"
                    assert time.monotonic() < deadline, "the server did not start"
                    time.sleep(0.05)
            outcome = asyncio.run(A2AAgent(url).run("text"))
            assert isinstance(outcome, Success)
            assert outcome.data == "hello"
        finally:
            server.terminate()
            server.wait(timeout=10)
