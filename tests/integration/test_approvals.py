"""A person approves: `Ruling.ask` and `Escalate` wait as pending approvals in the store,
and `Coordinator.resume(run_id, approvals=...)` goes on with Approve / Reject / Edit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmesh import Context, Coordinator, RetryPolicy, Task, UsageError, subagent, tool
from agentmesh.approvals import ApprovalKind, Approve, Edit, PendingApproval, Reject
from agentmesh.checkpoints import CheckpointStore, MemoryStore
from agentmesh.coordinator import CoverageStatus, Escalate, Report, RouteContext, Router
from agentmesh.events import EscalationPending
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

LIMIT = 100
BIG = Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900})
SMALL = Task(query="refund order A-1", topic="A-1", metadata={"order": "A-1", "amount": 40})


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    amount = event.arguments["amount"]
    if amount > LIMIT:
        return Ruling.ask(f"refund of {amount} is over the limit of {LIMIT}")
    return None


@pre_tool_use(tool="refund")
def hard_cap(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > 5000:
        return Ruling.deny("refunds over 5000 are never made")
    return None


@pre_tool_use(tool="refund", asks=True)
def round_amounts(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] % 10:
        return Ruling.ask("an odd amount: is it a typo?")
    return None


class Desk:
    """A support desk whose refunds and lookups are counted across runs."""

    def __init__(self) -> None:
        self.refunds: list[tuple[str, int]] = []
        self.lookups: list[str] = []

        @tool(idempotent=True)
        async def lookup(order: str) -> dict[str, str]:
            self.lookups.append(order)
            return {"order": order}

        @tool(impact="financial")
        async def refund(order: str, amount: int, card_token: str = "tok-4242") -> str:
            self.refunds.append((order, amount))
            return f"refunded {amount} on {order}"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> list[Any]:
            order = task.metadata["order"]
            found = await ctx.call(lookup, order=order)
            ctx.record_partial([found], completed="lookup")
            return [found, await ctx.call(refund, order=order, amount=task.metadata["amount"])]

        self.subagent = desk

    def coordinator(self, store: CheckpointStore | None, *policies: Any) -> Coordinator:
        return Coordinator([self.subagent], policies=policies or [refund_limit], store=store)


def only(report: Report) -> PendingApproval:
    assert len(report.pending_approvals) == 1, report.pending_approvals
    return report.pending_approvals[0]


def status(report: Report, topic: str) -> tuple[CoverageStatus, str | None]:
    entry = next(e for e in report.coverage if e.topic == topic)
    return entry.status, entry.reason


class TestAskWithoutStore:
    def test_a_declared_asking_policy_is_refused_at_construction(self) -> None:
        """A coordinator without store= refuses a policy declared with asks=True, naming it."""
        with pytest.raises(UsageError, match=r"refund_limit.*store="):
            Desk().coordinator(None)

    def test_an_asking_policy_of_a_subagent_is_refused_too(self) -> None:
        """The subagents' own policies are checked as the coordinator's are."""

        @subagent(name="asker", policies=[refund_limit])
        async def asker(task: Task, ctx: Context) -> str:
            return "never"

        with pytest.raises(UsageError, match="refund_limit"):
            Coordinator([asker])

    async def test_an_undeclared_ask_without_store_raises_when_it_happens(self) -> None:
        """An ask nobody could answer is a UsageError from run(), never a silent gap."""

        @pre_tool_use(tool="refund")
        def sneaky(event: ToolCallEvent) -> Ruling:
            return Ruling.ask("a person must look")

        desk = Desk()
        with pytest.raises(UsageError, match=r"Ruling.ask.*store="):
            await desk.coordinator(None, sneaky).run([BIG], run_id="r")
        assert desk.refunds == []

    async def test_a_subagent_run_alone_refuses_an_ask(self) -> None:
        """Without a coordinator's store, Subagent.run raises the UsageError even so."""
        desk = Desk()
        with pytest.raises(UsageError, match="store="):
            await desk.subagent.run(BIG, policies=[refund_limit])
        assert desk.refunds == []


class TestPendingApproval:
    async def test_the_task_stops_before_the_call_and_keeps_its_partial_results(
        self, store: CheckpointStore
    ) -> None:
        """The refund is not made, the lookup found is kept, the other task is covered."""
        desk = Desk()
        report = await desk.coordinator(store).run([SMALL, BIG], run_id="r1")
        assert desk.refunds == [("A-1", 40)]
        assert status(report, "A-1")[0] is CoverageStatus.COVERED
        big = next(e for e in report.coverage if e.topic == "B-2")
        assert big.status is CoverageStatus.ESCALATED
        assert report.escalations == (big,)
        kept = [(f.topic, f.content, f.preliminary) for f in report.findings]
        assert ("B-2", {"order": "B-2"}, True) in kept

    async def test_the_report_lists_the_pending_approval_with_secrets_masked(
        self, store: CheckpointStore
    ) -> None:
        """id, task, tool, masked arguments, reason and policy, as typed data."""
        report = await Desk().coordinator(store).run([SMALL, BIG], run_id="r1")
        pending = only(report)
        assert pending.kind is ApprovalKind.TOOL_CALL
        assert (pending.task_id, pending.subagent, pending.topic) == ("task-1", "desk", "B-2")
        assert (pending.tool, pending.policy) == ("refund", "refund_limit")
        assert pending.reason == "refund of 900 is over the limit of 100"
        assert pending.arguments == {"order": "B-2", "amount": 900, "card_token": "[REDACTED]"}
        assert pending.id in (status(report, "B-2")[1] or "")

    async def test_markdown_and_json_show_the_pending_approval(
        self, store: CheckpointStore
    ) -> None:
        """A Pending approvals table in Markdown, `pendingApprovals` in camelCase JSON."""
        report = await Desk().coordinator(store).run([BIG], run_id="r1")
        pending = only(report)
        markdown = report.to_markdown()
        assert "## Pending approvals" in markdown
        assert f"| `{pending.id}` | task-0 | refund |" in markdown
        assert "tok-4242" not in markdown
        assert "tok-4242" not in report.to_json()
        data = report.to_dict()
        assert data["pendingApprovals"][0]["taskId"] == "task-0"
        assert Report.model_validate(data).pending_approvals == report.pending_approvals

    async def test_the_html_report_shows_the_pending_approval(self, store: CheckpointStore) -> None:
        """The research agent's HTML page has a Pending approvals table, secrets masked."""
        from examples.research_agent.rendering import pending_html

        report = await Desk().coordinator(store).run([BIG], run_id="r1")
        page = "\n".join(pending_html(report))
        assert '<table id="pending">' in page
        assert f"<code>{only(report).id}</code>" in page
        assert "refund of 900 is over the limit of 100" in page
        assert "tok-4242" not in page

    async def test_a_deny_wins_over_an_ask(self, store: CheckpointStore) -> None:
        """Nobody is asked about a call another policy forbids; the denial is escalated."""
        big = BIG.model_copy(update={"metadata": {"order": "B-2", "amount": 9000}})
        report = await Desk().coordinator(store, refund_limit, hard_cap).run([big], run_id="r")
        assert only(report).kind is ApprovalKind.ESCALATION
        assert "never made" in only(report).reason

    async def test_a_run_without_questions_keeps_its_json_shape(
        self, store: CheckpointStore
    ) -> None:
        """No `pendingApprovals` key when nothing waits for a person."""
        report = await Desk().coordinator(store).run([SMALL], run_id="r")
        assert "pendingApprovals" not in report.to_dict()
        assert "Pending approvals" not in report.to_markdown()


class TestResume:
    async def test_an_approved_call_runs_once_and_finished_tasks_are_not_redone(
        self, store: CheckpointStore
    ) -> None:
        """Approve makes the refund; the covered task and the lookup's progress stay."""
        desk = Desk()
        first = await desk.coordinator(store).run([SMALL, BIG], run_id="r1")
        report = await desk.coordinator(store).resume("r1", approvals={only(first).id: Approve()})
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]
        assert desk.lookups == ["A-1", "B-2", "B-2"]  # A-1 is not run again
        assert status(report, "A-1")[0] is CoverageStatus.COVERED
        assert status(report, "B-2")[0] is CoverageStatus.COVERED
        assert report.pending_approvals == ()
        assert "refunded 900 on B-2" in [f.content for f in report.findings]

    async def test_a_rejected_call_becomes_a_gap_saying_who_and_why(
        self, store: CheckpointStore
    ) -> None:
        """Reject: never made, and the entry's reason says a person rejected it and why."""
        desk = Desk()
        first = await desk.coordinator(store).run([BIG], run_id="r1")
        decision = {only(first).id: Reject("the customer got a voucher")}
        report = await desk.coordinator(store).resume("r1", approvals=decision)
        assert desk.refunds == []
        state, reason = status(report, "B-2")
        assert state in report_gaps(report)
        assert reason is not None
        assert reason.startswith("rejected by a person: the customer got a voucher")

    async def test_an_edited_call_runs_with_the_new_arguments(self, store: CheckpointStore) -> None:
        """Edit(arguments=) merges over the asked ones; the policy that asked does not ask again."""
        desk = Desk()
        first = await desk.coordinator(store).run([BIG], run_id="r1")
        report = await desk.coordinator(store).resume(
            "r1", approvals={only(first).id: Edit(arguments={"amount": 450})}
        )
        assert desk.refunds == [("B-2", 450)]
        assert status(report, "B-2")[0] is CoverageStatus.COVERED

    async def test_policies_rule_again_on_edited_arguments(self, store: CheckpointStore) -> None:
        """An edit another policy denies is not made."""
        desk = Desk()
        coordinator = desk.coordinator(store, refund_limit, hard_cap)
        first = await coordinator.run([BIG], run_id="r1")
        report = await coordinator.resume(
            "r1", approvals={only(first).id: Edit(arguments={"amount": 9000})}
        )
        assert desk.refunds == []
        assert "never made" in (status(report, "B-2")[1] or "")

    async def test_another_policy_asking_about_the_edit_is_a_new_approval(
        self, store: CheckpointStore
    ) -> None:
        """The edited call waits again for what the person was not asked; then it runs."""
        desk = Desk()
        coordinator = desk.coordinator(store, refund_limit, round_amounts)
        first = await coordinator.run([BIG], run_id="r1")
        edited = only(first)
        second = await coordinator.resume(
            "r1", approvals={edited.id: Edit(arguments={"amount": 455})}
        )
        again = only(second)
        assert again.id != edited.id
        assert (again.policy, again.arguments) == (
            "round_amounts",
            {"order": "B-2", "amount": 455, "card_token": "[REDACTED]"},
        )
        assert desk.refunds == []
        third = await coordinator.resume("r1", approvals={again.id: Approve()})
        assert desk.refunds == [("B-2", 455)]
        assert status(third, "B-2")[0] is CoverageStatus.COVERED

    async def test_an_unanswered_approval_keeps_waiting(self, store: CheckpointStore) -> None:
        """A resume without an answer neither runs the task nor forgets the question."""
        desk = Desk()
        first = await desk.coordinator(store).run([SMALL, BIG], run_id="r1")
        report = await desk.coordinator(store).resume("r1")
        assert report.pending_approvals == first.pending_approvals
        assert desk.lookups == ["A-1", "B-2"]


def report_gaps(report: Report) -> set[CoverageStatus]:
    return {e.status for e in report.gaps}


class EscalatingRouter(Router):
    """Escalates every success of the `vip` topic: a person signs each one off."""

    async def route(self, ctx: RouteContext) -> Any:
        if ctx.task.topic == "vip":
            return Escalate("VIP answers are checked by a person")
        return await super().route(ctx)


class TestEscalation:
    def build(self, store: CheckpointStore, asked: list[str]) -> Coordinator:
        @subagent(name="answers", retry=RetryPolicy.never())
        async def answers(task: Task, ctx: Context) -> str:
            asked.append(task.query)
            return f"answer to {task.query}"

        return Coordinator([answers], router=EscalatingRouter(), store=store)

    async def test_an_escalation_is_a_pending_approval(self, store: CheckpointStore) -> None:
        """The router's Escalate waits for a person, named as an escalation by the router."""
        report = await self.build(store, []).run([Task(query="q", topic="vip")], run_id="e")
        pending = only(report)
        assert (pending.kind, pending.policy, pending.tool) == (
            ApprovalKind.ESCALATION,
            "router",
            None,
        )
        assert pending.reason == "VIP answers are checked by a person"

    async def test_approving_an_escalated_answer_covers_it_without_running_again(
        self, store: CheckpointStore
    ) -> None:
        """Approve accepts what was found; the subagent is not asked again."""
        asked: list[str] = []
        coordinator = self.build(store, asked)
        first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
        report = await coordinator.resume("e", approvals={only(first).id: Approve()})
        assert asked == ["q"]
        assert status(report, "vip")[0] is CoverageStatus.COVERED
        assert [f.content for f in report.findings] == ["answer to q"]

    async def test_rejecting_an_escalation_is_a_gap(self, store: CheckpointStore) -> None:
        """Reject(reason) ends the task as a gap with the person's reason."""
        coordinator = self.build(store, [])
        first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
        report = await coordinator.resume("e", approvals={only(first).id: Reject("wrong tone")})
        assert status(report, "vip") == (CoverageStatus.GAP, "rejected by a person: wrong tone")

    async def test_an_edited_query_runs_the_task_again(self, store: CheckpointStore) -> None:
        """Edit(query=) reruns the task with the new query; it escalates anew, with a new id."""
        asked: list[str] = []
        coordinator = self.build(store, asked)
        first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
        report = await coordinator.resume("e", approvals={only(first).id: Edit(query="q2")})
        assert asked == ["q", "q2"]
        assert only(report).id != only(first).id
        assert only(report).query == "q2"


class TestResumeRefusals:
    async def run_one(self, store: CheckpointStore) -> tuple[Coordinator, PendingApproval]:
        coordinator = Desk().coordinator(store)
        return coordinator, only(await coordinator.run([BIG], run_id="r1"))

    async def test_an_unknown_approval_id_is_refused(self, store: CheckpointStore) -> None:
        """The error names the id and the decisions that are waiting."""
        coordinator, pending = await self.run_one(store)
        with pytest.raises(UsageError, match=rf"no pending approval 'nope'.*{pending.id}"):
            await coordinator.resume("r1", approvals={"nope": Approve()})

    async def test_an_approval_given_twice_is_refused(self, store: CheckpointStore) -> None:
        """Once answered, the same id takes no answer again, and the error names the first."""
        coordinator, pending = await self.run_one(store)
        await coordinator.resume("r1", approvals={pending.id: Approve()})
        for answer in (Approve(), Reject("no")):
            with pytest.raises(UsageError, match=r"already answered: Approve\(\) at 20"):
                await coordinator.resume("r1", approvals={pending.id: answer})

    async def test_an_interrupted_resume_goes_on_without_its_approvals(
        self, store: CheckpointStore
    ) -> None:
        """Answers claimed by a resume that did not finish stand: resume(run_id) goes on."""
        desk = Desk()
        coordinator = desk.coordinator(store)
        pending = only(await coordinator.run([BIG], run_id="r1"))
        # Claimed before anything ran, as a resume does first; its run never happened.
        from agentmesh._engine._human import DecisionBook

        book = await DecisionBook.load(store, "r1")
        await book.give({pending.id: Approve()})
        for answer in (Approve(), Reject("changed my mind")):
            with pytest.raises(UsageError, match=r"Approve\(\) at .* call resume\('r1'\)"):
                await coordinator.resume("r1", approvals={pending.id: answer})
        report = await coordinator.resume("r1")
        assert status(report, "B-2")[0] is CoverageStatus.COVERED
        assert desk.refunds == [("B-2", 900)]

    @pytest.mark.parametrize(
        ("answer", "says"),
        [
            (Edit(query="other"), "Edit\\(arguments=...\\)"),
            ("yes", "Approve\\(\\), Reject\\(reason\\) or Edit"),
            (Edit(arguments={"api_key": "sk-live-123456789012345678901234"}), "secret"),
        ],
    )
    async def test_a_wrong_kind_of_answer_is_refused(
        self, store: CheckpointStore, answer: Any, says: str
    ) -> None:
        """The error says what the decision takes."""
        coordinator, pending = await self.run_one(store)
        with pytest.raises(UsageError, match=says):
            await coordinator.resume("r1", approvals={pending.id: answer})

    async def test_an_unknown_run_and_a_missing_store_are_refused(self) -> None:
        """resume() needs the store, and a run that the store holds."""
        async with MemoryStore() as store:
            with pytest.raises(UsageError, match="no plan of that run"):
                await Desk().coordinator(store).resume("never-ran")
        with pytest.raises(UsageError, match="store="):
            await Coordinator([Desk().subagent]).resume("r1")

    def test_answers_are_checked_when_they_are_built(self) -> None:
        """Reject needs a reason; Edit exactly one of arguments= and query=."""
        with pytest.raises(UsageError, match="reason"):
            Reject("")
        with pytest.raises(UsageError, match="exactly one"):
            Edit()
        with pytest.raises(UsageError, match="exactly one"):
            Edit(arguments={}, query="q")


ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """`approvals_worker` in a fresh process per step, against one store.

    `first_run`: the decision id of a first run already in the store (a copy of it).
    """

    def __init__(self, store: str, counter: Path, first_run: str | None = None) -> None:
        self.store, self.counter, self.first_run = store, counter, first_run

    def __call__(self, *args: str, code: int = 0) -> dict[str, Any]:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.integration.approvals_worker",
                self.store,
                str(self.counter),
                *args,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == code, done.stderr
        return json.loads(done.stdout) if code == 0 else {}

    def refunds(self) -> list[str]:
        return self.counter.read_text().splitlines() if self.counter.exists() else []

    def first(self) -> str:
        """The first run: the small refund is made, the big one waits; its decision id."""
        if self.first_run is not None:
            assert self.refunds() == ["A-1 40"]
            return self.first_run
        report = self("run")
        assert self.refunds() == ["A-1 40"]
        [pending] = report["pendingApprovals"]
        assert pending["tool"] == "refund"
        assert pending["arguments"]["amount"] == 900
        return str(pending["id"])


@pytest.fixture(scope="module")
def sqlite_first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One first run on SQLite for the module: its folder (store file, refunds) and the
    id of the decision it waits for."""
    where = tmp_path_factory.mktemp("first-run")
    return where, Worker(f"sqlite:{where / 'checkpoints.sqlite'}", where / "refunds").first()


@pytest.fixture(params=["sqlite", "postgres"])
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Worker:
    """The worker against a SQLite file, then a PostgreSQL schema (with a test server).

    On SQLite each test starts from a copy of one first run (its file closed, as after
    a run of its own); a PostgreSQL schema cannot be copied so, and runs it per test.
    """
    if request.param == "sqlite":
        where, decision = request.getfixturevalue("sqlite_first_run")
        shutil.copytree(where, tmp_path, dirs_exist_ok=True)
        store = f"sqlite:{tmp_path / 'checkpoints.sqlite'}"
        return Worker(store, tmp_path / "refunds", first_run=decision)
    request.getfixturevalue("postgres_dsn")
    return Worker(f"postgres:{request.getfixturevalue('postgres_schema')}", tmp_path / "refunds")


def entry(report: dict[str, Any], topic: str) -> dict[str, Any]:
    return next(e for e in report["coverage"] if e["topic"] == topic)


class TestResumeInAFreshProcess:
    def test_approve(self, worker: Worker) -> None:
        """Approved in another process: the refund is made once, the other not again."""
        decision = worker.first()
        report = worker("resume", json.dumps({decision: {"approve": True}}))
        assert worker.refunds() == ["A-1 40", "B-2 900"]
        assert entry(report, "B-2")["status"] == "covered"
        assert "pendingApprovals" not in report

    def test_reject(self, worker: Worker) -> None:
        """Rejected in another process: no refund, the reason says who and why."""
        decision = worker.first()
        report = worker("resume", json.dumps({decision: {"reject": "voucher sent instead"}}))
        assert worker.refunds() == ["A-1 40"]
        assert entry(report, "B-2")["reason"].startswith("rejected by a person: voucher sent")

    def test_edit(self, worker: Worker) -> None:
        """Edited in another process: the refund is made with the person's amount."""
        decision = worker.first()
        report = worker("resume", json.dumps({decision: {"edit": {"amount": 80}}}))
        assert worker.refunds() == ["A-1 40", "B-2 80"]
        assert entry(report, "B-2")["status"] == "covered"

    def test_an_interrupted_resume_repeated_refunds_once(self, worker: Worker) -> None:
        """The resume dies after the refund; resume(run_id) goes on, never refunds twice."""
        decision = worker.first()
        answer = json.dumps({decision: {"approve": True}})
        worker("resume", answer, "--crash-after-refund", code=3)
        assert worker.refunds() == ["A-1 40", "B-2 900"]
        # The answer was claimed by the resume that died: going on does not give it again.
        report = worker("resume", "{}")
        assert worker.refunds() == ["A-1 40", "B-2 900"]
        assert entry(report, "B-2")["status"] == "covered"
        assert "customer of B-2 notified" in [f["content"] for f in report["findings"]]


class TestPendingApprovalEvents:
    async def test_a_policys_ask_streams_the_id_a_person_answers(
        self, store: CheckpointStore
    ) -> None:
        """EscalationPending names the pending decision that the report lists."""
        desk = Desk()
        stream = desk.coordinator(store).stream([SMALL, BIG], run_id="ev1")
        async with stream:
            waiting = [e async for e in stream if isinstance(e, EscalationPending)]
        assert stream.report is not None
        assert [e.approval_id for e in waiting] == [only(stream.report).id]
        assert waiting[0].task_id == only(stream.report).task_id

    async def test_a_routers_escalation_streams_its_approval_id(
        self, store: CheckpointStore
    ) -> None:
        """An escalation by the router is answerable too: its event carries the id."""
        stream = TestEscalation().build(store, []).stream([Task(query="q", topic="vip")])
        async with stream:
            waiting = [e async for e in stream if isinstance(e, EscalationPending)]
        assert stream.report is not None
        assert [e.approval_id for e in waiting] == [only(stream.report).id]

    async def test_a_stream_left_early_still_names_the_pending_approval(
        self, store: CheckpointStore
    ) -> None:
        """The question asked before the consumer left is in the partial report too."""
        stream = TestEscalation().build(store, []).stream([Task(query="q", topic="vip")])
        async with stream:
            async for event in stream:
                if isinstance(event, EscalationPending):
                    break
        assert stream.report is not None
        assert [p.id for p in stream.report.pending_approvals] == [event.approval_id]
