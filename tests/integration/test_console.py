"""The run console over HTTP, served by uvicorn as `python -m agentmesh.console` serves it,
on a store a real coordinator wrote: its pages, its keys, and a person's answers."""

from __future__ import annotations

import asyncio
import functools
import html
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmesh.approvals import Approve, Reject
from agentmesh.checkpoints import PostgresStore, SQLiteStore
from agentmesh.console import Access, RunStatus, answer_approval, create_app, list_runs, load_run
from agentmesh.console.__main__ import coordinator_of, store_of
from agentmesh.report import CoverageStatus
from tests.console.desk import TICKETS, TOKEN, Answer, Desk, request, served

Stores = Callable[[], SQLiteStore | PostgresStore]
"""A new store on the same data each call: the console's, the application's, another's."""


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    if request.param == "sqlite":
        return functools.partial(SQLiteStore, tmp_path / "checkpoints.sqlite")
    dsn: str = request.getfixturevalue("postgres_dsn")
    return functools.partial(PostgresStore, dsn, schema=request.getfixturevalue("postgres_schema"))


@pytest.fixture
async def waiting(stores: Stores) -> tuple[Stores, Desk]:
    """A store with run `r1` waiting for two approvals (B-2's and C-3's refunds)."""
    desk = Desk(note="<script>alert('found')</script>")
    async with stores() as store:
        report = await desk.coordinator(store).run(TICKETS, run_id="r1")
    assert len(report.pending_approvals) == 2
    assert desk.refunds == [("A-1", 40)]
    return stores, desk


def console(stores: Stores, *, read_only: bool = False) -> object:
    return create_app(stores(), access=Access(TOKEN), read_only=read_only)


def approval_ids(page: str) -> list[str]:
    return [part.split('"', 1)[0] for part in page.split('id="approval-')[1:]]


def test_import_agentmesh_imports_no_console() -> None:
    """The console is an optional extra: the library never imports it, nor its server."""
    code = (
        "import sys, agentmesh, agentmesh.coordinator, agentmesh.checkpoints; "
        "print([m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', "
        "'jsonschema') or m.startswith('agentmesh.console')])"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


class TestPages:
    async def test_the_runs_page_lists_runs_newest_first_with_status(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        stores, desk = waiting
        async with stores() as store:
            await desk.coordinator(store).run(TICKETS[:1], run_id="r2")
            first, more = await list_runs(store, per_page=1)
            second, more_after = await list_runs(store, page=2, per_page=1)
        assert [r.run_id for r in (*first, *second)] == ["r2", "r1"]
        assert (more, more_after) == (True, False)
        assert first[0].status is RunStatus.FINISHED
        assert second[0].status is RunStatus.WAITING
        assert (second[0].tasks, second[0].covered, second[0].waiting) == (3, 1, 2)
        with served(console(stores)) as url:
            page = request(url + "/").body
        assert page.index(">r2</a>") < page.index(">r1</a>")
        assert "waiting for a person</span> (2 to answer)" in page

    def test_the_run_page_shows_the_report_and_escapes_what_the_store_holds(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        """A finding holding a <script> is shown as text, never run."""
        stores, _desk = waiting
        with served(console(stores)) as url:
            page = request(url + "/runs/r1").body
            missing = request(url + "/runs/%3Cb%3Enope")
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(&#x27;found&#x27;)&lt;/script&gt;" in page
        for section in ('id="grid"', 'id="coverage"', 'id="findings"', "Routes", "Usage and cost"):
            assert section in page
        assert "refund of 900 is over the limit of 250" in page
        assert "<code>refund_limit</code>" in page
        assert missing.status == 404
        assert "&lt;b&gt;nope" in missing.body
        assert "<b>nope" not in missing.body

    def test_the_report_downloads_as_markdown_json_and_html(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        stores, _desk = waiting
        with served(console(stores)) as url:
            md, js, page = (
                request(f"{url}/runs/r1/report.{kind}") for kind in ("md", "json", "html")
            )
        assert "attachment" in md.headers["content-disposition"]
        assert "A-1" in md.body
        assert "B-2" in md.body
        data = json.loads(js.body)
        assert data["runId"] == "r1"
        assert len(data["pendingApprovals"]) == 2
        assert page.body.startswith("<!doctype html>")
        assert "<form" not in page.body

    async def test_a_run_id_with_a_slash_and_markup_is_reachable_and_shown_as_text(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        stores, desk = waiting
        odd = "ops/<i>r</i>"
        async with stores() as store:
            await desk.coordinator(store).run(TICKETS[:1], run_id=odd)
        with served(console(stores)) as url:
            runs = request(url + "/").body
            link = re.findall(r'href="(/runs/[^"]+)"', runs)[0]  # the newest run's
            page = request(url + html.unescape(link))
            report = request(url + html.unescape(link) + "/report.json")
        assert "ops/&lt;i&gt;r&lt;/i&gt;" in runs
        assert page.status == 200
        assert "Run ops/&lt;i&gt;r&lt;/i&gt;" in page.body
        assert json.loads(report.body)["runId"] == odd


class TestKeys:
    def test_an_answer_needs_the_token_or_a_login_and_none_when_read_only(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        stores, _desk = waiting
        access = Access(TOKEN)
        code = access.login_code()
        with served(create_app(stores(), access=access)) as url:
            first = approval_ids(request(url + "/runs/r1").body)[0]
            target = f"{url}/runs/r1/approvals/{first}"
            form = {"action": "approve", "by": "mallory"}
            assert request(target, form).status == 403
            assert request(target, form, token="wrong-token-wrong-token").status == 403
            assert "<form" not in request(url + "/runs/r1").body
            login = request(f"{url}/login/{code}")
            assert login.status == 303
            cookie_header = login.headers["set-cookie"]
            assert "HttpOnly" in cookie_header
            assert "SameSite=strict" in cookie_header
            cookie = cookie_header.split(";", 1)[0]
            assert request(f"{url}/login/{code}").status == 403  # once only
            assert "<form" in request(url + "/runs/r1", cookie=cookie).body
            assert request(target, {**form, "by": "ann"}, cookie=cookie).status == 303
        with served(console(stores, read_only=True)) as url:
            second = approval_ids(request(url + "/runs/r1").body)[1]
            refused = request(f"{url}/runs/r1/approvals/{second}", form, token=TOKEN)
            assert refused.status == 403
            assert "read-only" in refused.body


class TestAnswers:
    async def test_approved_and_rejected_on_the_page_then_resumed_the_refund_is_made_once(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        """`coordinator.resume(run_id)` without approvals= takes the page's answers."""
        stores, desk = waiting
        async with stores() as store:
            view = await load_run(store, "r1")
        assert view is not None
        by_topic = {state.pending.topic: state.pending.id for state in view.approvals}
        big, other = by_topic["B-2"], by_topic["C-3"]
        with served(console(stores)) as url:
            approved = request(
                f"{url}/runs/r1/approvals/{big}", {"action": "approve", "by": "ann"}, token=TOKEN
            )
            rejected = request(
                f"{url}/runs/r1/approvals/{other}",
                {"action": "reject", "reason": "not our customer", "by": "bob"},
                token=TOKEN,
            )
            assert (approved.status, rejected.status) == (303, 303)
            shown = request(url + "/runs/r1").body
        assert "answered, waiting to resume" in shown
        assert "by ann at" in shown
        assert "by bob at" in shown
        async with stores() as store:
            report = await desk.coordinator(store).resume("r1")
            again = await desk.coordinator(store).resume("r1")
            (summary,), _ = await list_runs(store)
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]
        statuses = {e.topic: (e.status, e.reason) for e in report.coverage}
        assert statuses["B-2"][0] is CoverageStatus.COVERED
        assert statuses["C-3"][0] is CoverageStatus.PARTIAL  # its lookup is kept
        assert "rejected by a person: not our customer" in (statuses["C-3"][1] or "")
        assert not report.pending_approvals
        assert not again.pending_approvals
        assert summary.status is RunStatus.FINISHED

    def test_an_edit_is_checked_against_the_tools_schema_before_it_is_sent(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        stores, _desk = waiting
        with served(console(stores)) as url:
            first = approval_ids(request(url + "/runs/r1").body)[0]
            target = f"{url}/runs/r1/approvals/{first}"
            bad = request(
                target,
                {"action": "edit", "arguments": '{"amount": "lots"}', "by": "ann"},
                token=TOKEN,
            )
            broken = request(target, {"action": "edit", "arguments": "{", "by": "ann"}, token=TOKEN)
            nameless = request(target, {"action": "approve", "by": " "}, token=TOKEN)
            good = request(
                target, {"action": "edit", "arguments": '{"amount": 200}', "by": "ann"}, token=TOKEN
            )
            shown = request(url + "/runs/r1").body
        assert bad.status == 400
        assert "amount: &#x27;lots&#x27; is not of type" in bad.body
        assert broken.status == 400
        assert "not JSON" in broken.body
        assert nameless.status == 400
        assert good.status == 303
        assert "Edit(arguments={&#x27;amount&#x27;: 200})" in shown


def race(one: str, two: str, approval: str) -> dict[str, Answer]:
    """Ann approves through console `one` and Bob rejects through `two`, at one instant."""
    barrier = threading.Barrier(2)
    answers: dict[str, Answer] = {}

    def answer(url: str, form: dict[str, str]) -> None:
        barrier.wait()
        answers[form["by"]] = request(f"{url}/runs/r1/approvals/{approval}", form, token=TOKEN)

    people = [
        threading.Thread(target=answer, args=(one, {"action": "approve", "by": "ann"})),
        threading.Thread(
            target=answer, args=(two, {"action": "reject", "reason": "too much", "by": "bob"})
        ),
    ]
    for person in people:
        person.start()
    for person in people:
        person.join(30)
    return answers


class TestTwoPeopleAtOnce:
    def test_of_two_answers_at_once_exactly_one_wins_and_the_other_sees_whose(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        """Two consoles on one store (two connections), two people at a barrier, per question."""
        stores, _desk = waiting
        with served(console(stores)) as one, served(console(stores)) as two:
            for approval in approval_ids(request(one + "/runs/r1").body):
                answers = race(one, two, approval)
                assert sorted(a.status for a in answers.values()) == [303, 409], answers
                winner = next(who for who, a in answers.items() if a.status == 303)
                loser = answers["bob" if winner == "ann" else "ann"]
                assert "already answered" in loser.body
                assert f"by {winner} at" in loser.body
                assert "Your answer was not recorded" in loser.body


class TestResumeWhenAnswered:
    async def test_the_application_goes_on_once_every_question_is_answered(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        """The owner of the coordinator waits; answers claimed elsewhere let it go on."""
        stores, desk = waiting
        async with stores() as store, stores() as other:
            view = await load_run(other, "r1")
            assert view is not None
            by_topic = {state.pending.topic: state.pending.id for state in view.approvals}
            going_on = asyncio.create_task(
                desk.coordinator(store).resume_when_answered("r1", poll=0.02)
            )
            assert await answer_approval(other, "r1", by_topic["B-2"], Approve(), by="ann") is None
            await asyncio.sleep(0.1)
            assert not going_on.done()  # C-3 still waits for a person
            taken = await answer_approval(
                other, "r1", by_topic["B-2"], Reject("changed my mind"), by="bob"
            )
            assert taken is not None
            assert (taken.answer, taken.by) == ("Approve()", "ann")
            await answer_approval(other, "r1", by_topic["C-3"], Reject("no"), by="bob")
            report = await asyncio.wait_for(going_on, 30)
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]
        assert not report.pending_approvals


class TestCommandLine:
    @pytest.mark.parametrize("read_only", [False, True])
    def test_it_serves_a_sqlite_store_on_localhost_with_a_login_link(
        self, tmp_path: Path, read_only: bool
    ) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        flags = ["--read-only"] if read_only else []
        command = [sys.executable, "-m", "agentmesh.console", str(tmp_path / "c.sqlite")]
        with subprocess.Popen(
            [*command, "--port", str(port), *flags], stdout=subprocess.PIPE, text=True
        ) as process:
            try:
                assert process.stdout is not None
                first = process.stdout.readline()
                assert first.startswith(f"agentmesh console{' (read-only)' if read_only else ''}:")
                assert f"http://127.0.0.1:{port}/" in first
                if not read_only:
                    link = process.stdout.readline().split()[-1]
                    assert "/login/" in link
                    assert "Bearer" in process.stdout.readline()
                # Listening once it has said where: asked at once, it answers (no retry).
                page = request(f"http://127.0.0.1:{port}/").body
                assert 'id="runs"' in page
                if not read_only:
                    assert request(link).status == 303
            finally:
                process.terminate()
                process.wait(10)

    def test_a_connection_string_is_a_postgres_store_and_anything_else_a_sqlite_path(
        self,
    ) -> None:
        assert isinstance(store_of("postgresql://app@db/agentmesh"), PostgresStore)
        assert isinstance(store_of("host=db dbname=agentmesh"), PostgresStore)
        assert isinstance(store_of("runs/checkpoints.sqlite"), SQLiteStore)


class TestConsoleThatResumes:
    def test_given_the_coordinator_the_console_resumes_once_all_is_answered(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        """`python -m agentmesh.console STORE --coordinator app:coordinator`: no
        application process needs to call resume; the refund is still made once."""
        stores, desk = waiting
        app = create_app(stores(), access=Access(TOKEN), coordinator=desk.coordinator(stores()))
        with served(app) as url:
            asked = re.findall(
                r'id="approval-(\w+)".*?refund of (\d+)', request(url + "/runs/r1").body, re.S
            )
            by_amount = {amount: approval for approval, amount in asked}
            big, other = by_amount["900"], by_amount["600"]
            approve = {"action": "approve", "by": "ann"}
            first = request(f"{url}/runs/r1/approvals/{big}", approve, token=TOKEN)
            assert first.status == 303
            time.sleep(0.3)
            assert "waiting for a person" in request(url + "/runs/r1").body  # one still open
            second = request(
                f"{url}/runs/r1/approvals/{other}",
                {"action": "reject", "reason": "no", "by": "bob"},
                token=TOKEN,
            )
            assert second.status == 303
            deadline = time.monotonic() + 30
            while 'id="status">finished<' not in request(url + "/runs/r1").body:
                assert time.monotonic() < deadline, "the console never resumed the run"
                time.sleep(0.05)
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]

    async def test_of_two_consoles_on_one_store_exactly_one_resumes_the_run(
        self, waiting: tuple[Stores, Desk]
    ) -> None:
        """Two consoles (each its own store connection, its own coordinator) see the run
        answered at once: one resume is claimed in the store, the other stands back."""
        from agentmesh.console._resumer import Resumer

        stores, desk = waiting
        async with stores() as store:
            view = await load_run(store, "r1")
            assert view is not None
            for state in view.approvals:
                assert (
                    await answer_approval(store, "r1", state.pending.id, Approve(), by="ann")
                    is None
                )
        resumed: list[str] = []

        class Counting:
            def __init__(self) -> None:
                self.store = stores()
                self.coordinator = desk.coordinator(self.store)

            async def resume(self, run_id: str) -> object:
                resumed.append(run_id)
                return await self.coordinator.resume(run_id)

        one, two = Counting(), Counting()
        async with one.store, two.store:
            consoles = [Resumer(one, one.store), Resumer(two, two.store)]  # type: ignore[arg-type]
            await asyncio.gather(*(console._go_on("r1") for console in consoles))
        assert resumed == ["r1"]
        assert sorted(desk.refunds) == [("A-1", 40), ("B-2", 900), ("C-3", 600)]

    def test_the_command_line_names_a_coordinator_as_module_and_attribute(self) -> None:
        with pytest.raises(SystemExit, match="module:attribute"):
            coordinator_of("tests.console.desk")
        with pytest.raises(SystemExit, match="is not a Coordinator"):
            coordinator_of("tests.console.desk:TICKETS")
