"""Exactly once, even when two people answer at once: answers and non-idempotent calls are
claimed in the store (`CheckpointStore.claim`), in one process and across processes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentmesh import Context, Coordinator, RetryPolicy, Task, UsageError, subagent, tool
from agentmesh.approvals import Approval, Approve, PendingApproval, Reject
from agentmesh.checkpoints import Checkpoint, CheckpointStore, MemoryStore, SQLiteStore
from agentmesh.coordinator import CoverageStatus, Report
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from tests.user_store import PlainStore

ROOT = Path(__file__).resolve().parents[2]
BIG = Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900})


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > 100:
        return Ruling.ask(f"refund of {event.arguments['amount']} is over the limit")
    return None


# --- the store's compare-and-set ----------------------------------------------------


class TestClaim:
    async def test_exactly_one_of_many_concurrent_claims_wins(self, store: CheckpointStore) -> None:
        """50 claims of one key at once: one saves its value, 49 get that value back."""
        results = await asyncio.gather(*(store.claim("r", "s", "k", {"by": n}) for n in range(50)))
        winners = [n for n, result in enumerate(results) if result is None]
        assert len(winners) == 1
        saved = await store.get("r", "s", "k")
        assert saved is not None
        assert saved.value == {"by": winners[0]}
        losers = [r for r in results if r is not None]
        assert all(r.value == {"by": winners[0]} for r in losers)
        assert all(r.saved_at == saved.saved_at for r in losers)

    async def test_a_claimed_key_is_never_overwritten_by_a_claim(
        self, store: CheckpointStore
    ) -> None:
        """A claim of a key that holds a value leaves it; after a delete the key is free."""
        await store.put("r", "s", "k", "first")
        found = await store.claim("r", "s", "k", "second")
        assert isinstance(found, Checkpoint)
        assert found.value == "first"
        assert await store.delete("r", "s", "k") == 1
        assert await store.claim("r", "s", "k", "third") is None
        saved = await store.get("r", "s", "k")
        assert saved is not None
        assert saved.value == "third"

    async def test_two_sqlite_stores_on_one_file_claim_once(self, tmp_path: Path) -> None:
        """Two connections to one file (as two processes have): one claim wins."""
        path = tmp_path / "c.sqlite"
        async with SQLiteStore(path) as one, SQLiteStore(path) as two:
            results = await asyncio.gather(
                *(s.claim("r", "s", "k", n) for n in range(20) for s in (one, two))
            )
        assert sum(r is None for r in results) == 1

    async def test_claim_checks_its_names_and_value(self) -> None:
        """A bad name or a value that is not JSON is a UsageError, as for put."""
        async with MemoryStore() as store:
            with pytest.raises(UsageError, match="key="):
                await store.claim("r", "s", "", 1)
            with pytest.raises(UsageError, match="not JSON"):
                await store.claim("r", "s", "k", object())


class TestAStoreWithoutClaim:
    async def test_a_run_works_and_an_answer_is_refused_naming_claim(self) -> None:
        """Runs and the ledger work as before; an answer, which must be claimed, is refused."""
        refunds: list[int] = []

        @tool(impact="financial")
        async def refund(order: str, amount: int) -> str:
            refunds.append(amount)
            return "ok"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, order="B-2", amount=task.metadata["amount"])

        store = PlainStore()
        coordinator = Coordinator([desk], policies=[refund_limit], store=store)  # type: ignore[arg-type]  # the old protocol, on purpose
        small = Task(query="refund A-1", topic="A-1", metadata={"amount": 40})
        first = await coordinator.run([small, BIG], run_id="r1")
        assert refunds == [40]
        [pending] = first.pending_approvals
        with pytest.raises(UsageError, match=r"must be claimed.*has no claim\(\) method"):
            await coordinator.resume("r1", approvals={pending.id: Approve()})
        assert refunds == [40]


class TestAFailedCall:
    def agent(self, calls: list[str], error: type[Exception]) -> Any:
        @tool(impact="financial")
        async def refund(order: str) -> str:
            calls.append(order)
            if len(calls) == 1:
                raise error("the payment service did not answer")
            return "refunded"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, order="B-2")

        return desk

    async def test_a_call_cut_after_it_started_is_not_made_again(
        self, store: CheckpointStore
    ) -> None:
        """A timeout may have refunded: the resumed run does not call, and says so."""
        calls: list[str] = []
        desk = self.agent(calls, TimeoutError)
        first = await desk.run("q", run_id="r1", store=store)
        assert first.is_error
        again = await desk.run("q", run_id="r1", store=store)
        assert calls == ["B-2"]
        assert again.is_error
        assert again.error_type == "call_may_have_run"
        assert again.is_retryable is False
        assert "the call of refund may have run" in again.message

    async def test_a_call_that_cannot_have_acted_is_made_again(
        self, store: CheckpointStore
    ) -> None:
        """A failure that cannot have acted gives the claim up: the resumed run calls."""
        calls: list[str] = []
        desk = self.agent(calls, ValueError)
        assert (await desk.run("q", run_id="r1", store=store)).is_error
        again = await desk.run("q", run_id="r1", store=store)
        assert calls == ["B-2", "B-2"]
        assert not again.is_error


# --- two coordinators in one event loop -----------------------------------------------


class GatedDesk:
    """A refund desk whose refund can be held open, to have two resumes in flight."""

    def __init__(self) -> None:
        self.refunds: list[int] = []
        self.started = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()

        @tool(impact="financial")
        async def refund(order: str, amount: int) -> str:
            self.refunds.append(amount)
            self.started.set()
            await self.gate.wait()
            return f"refunded {amount} on {order}"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, order="B-2", amount=task.metadata["amount"])

        self.subagent = desk

    def coordinator(self, store: CheckpointStore) -> Coordinator:
        return Coordinator([self.subagent], policies=[refund_limit], store=store)


def entry_of(report: Report) -> tuple[CoverageStatus, str | None]:
    [entry] = report.coverage
    return entry.status, entry.reason


def only(report: Report) -> PendingApproval:
    assert len(report.pending_approvals) == 1, report.pending_approvals
    return report.pending_approvals[0]


class TestTwoCoordinatorsInOneLoop:
    async def answer_at_once(
        self, store: CheckpointStore, desk: GatedDesk, one: Approval, other: Approval
    ) -> Sequence[Report | BaseException]:
        pending = only(await desk.coordinator(store).run([BIG], run_id="r1"))
        return await asyncio.gather(
            desk.coordinator(store).resume("r1", approvals={pending.id: one}),
            desk.coordinator(store).resume("r1", approvals={pending.id: other}),
            return_exceptions=True,
        )

    async def test_two_approvals_refund_once(self, store: CheckpointStore) -> None:
        """Both approve at once: one resume refunds, the other is told the answer was given."""
        desk = GatedDesk()
        results = await self.answer_at_once(store, desk, Approve(), Approve())
        errors = [r for r in results if isinstance(r, BaseException)]
        reports = [r for r in results if isinstance(r, Report)]
        assert (len(errors), len(reports)) == (1, 1), results
        assert isinstance(errors[0], UsageError)
        assert "already answered: Approve() at" in str(errors[0])
        assert entry_of(reports[0])[0] is CoverageStatus.COVERED
        assert desk.refunds == [900]

    async def test_approve_against_reject_exactly_one_wins(self, store: CheckpointStore) -> None:
        """Approve and Reject at once: one wins, the loser's error names the winner, and the
        refund is paid only if Approve won."""
        desk = GatedDesk()
        approved, rejected = await self.answer_at_once(store, desk, Approve(), Reject("no"))
        if isinstance(rejected, UsageError):
            assert "already answered: Approve()" in str(rejected)
            assert isinstance(approved, Report)
            assert entry_of(approved)[0] is CoverageStatus.COVERED
            assert desk.refunds == [900]
        else:
            assert isinstance(approved, UsageError), (approved, rejected)
            assert "already answered: Reject('no')" in str(approved)
            assert isinstance(rejected, Report)
            assert (entry_of(rejected)[1] or "").startswith("rejected by a person: no")
            assert desk.refunds == []

    async def test_two_resumes_in_flight_never_both_call(self, store: CheckpointStore) -> None:
        """While one resume's refund is under way, a second resume does not refund: it asks
        a person, saying the call may have run; approved later, the result is replayed."""
        desk = GatedDesk()
        pending = only(await desk.coordinator(store).run([BIG], run_id="r1"))
        desk.gate.clear()
        first = asyncio.create_task(
            desk.coordinator(store).resume("r1", approvals={pending.id: Approve()})
        )
        await desk.started.wait()
        # A second refund would wait at the closed gate: the guard turns that into a failure.
        async with asyncio.timeout(60):
            second = await desk.coordinator(store).resume("r1")
        asked = only(second)
        assert asked.id != pending.id
        assert "may have run" in asked.reason
        assert "may have run" in (entry_of(second)[1] or "")
        desk.gate.set()
        assert entry_of(await first)[0] is CoverageStatus.COVERED
        assert desk.refunds == [900]
        third = await desk.coordinator(store).resume("r1", approvals={asked.id: Approve()})
        assert entry_of(third)[0] is CoverageStatus.COVERED
        assert desk.refunds == [900]  # it had completed: replayed, not made again


# --- two processes ----------------------------------------------------------------------


class Desk:
    """`approvals_worker` in fresh processes against one store: the refunds it made.

    `first_run`: the decision id of a first run already in the store (a copy of it).
    """

    def __init__(self, store: str, tmp: Path, first_run: str | None = None) -> None:
        self.store, self.tmp, self.counter = store, tmp, tmp / "refunds"
        self.first_run = first_run

    def command(self, *args: str) -> list[str]:
        worker = "tests.integration.approvals_worker"
        return [sys.executable, "-m", worker, self.store, str(self.counter), *args]

    def __call__(self, *args: str) -> dict[str, Any]:
        done = subprocess.run(
            self.command(*args), cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*args),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def calls(self) -> list[str]:
        return self.counter.read_text().splitlines() if self.counter.exists() else []

    def first(self) -> str:
        """The first run: A-1 is refunded, B-2 waits for a person; its decision id."""
        if self.first_run is not None:
            assert self.calls() == ["A-1 40"]
            return self.first_run
        report = self("run")
        assert self.calls() == ["A-1 40"]
        [pending] = report["pendingApprovals"]
        return str(pending["id"])

    def race(self, *answers: dict[str, Any]) -> list[dict[str, Any]]:
        """Resume once per answer, in as many processes, released at the same moment."""
        barrier = self.tmp / f"barrier-{uuid.uuid4().hex[:8]}"
        barrier.mkdir()
        processes = [self.start("resume", json.dumps(a), f"--barrier={barrier}") for a in answers]
        try:
            give_up = time.monotonic() + 60
            while len(list(barrier.glob("*.ready"))) < len(processes):
                assert all(p.poll() is None for p in processes), "a worker ended early"
                assert time.monotonic() < give_up, "the workers never got ready"
                time.sleep(0.005)
            (barrier / "go").touch()
            results = []
            for process in processes:
                out, err = process.communicate(timeout=120)
                assert process.returncode == 0, err
                results.append(json.loads(out))
            return results
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()


@pytest.fixture(scope="module")
def sqlite_first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One first run on SQLite for the module: its folder (store file, refunds) and the
    id of the decision it waits for."""
    where = tmp_path_factory.mktemp("first-run")
    return where, Desk(f"sqlite:{where / 'checkpoints.sqlite'}", where).first()


@pytest.fixture(params=["sqlite", "postgres"])
def desk(request: pytest.FixtureRequest, tmp_path: Path) -> Desk:
    """Worker processes on one SQLite file, then on one PostgreSQL schema (with a server).

    On SQLite each test starts from a copy of one first run (its file closed, as after
    a run of its own); a PostgreSQL schema cannot be copied so, and runs it per test.
    """
    if request.param == "sqlite":
        where, decision = request.getfixturevalue("sqlite_first_run")
        shutil.copytree(where, tmp_path, dirs_exist_ok=True)
        return Desk(f"sqlite:{tmp_path / 'checkpoints.sqlite'}", tmp_path, first_run=decision)
    request.getfixturevalue("postgres_dsn")
    return Desk(f"postgres:{request.getfixturevalue('postgres_schema')}", tmp_path)


def entry(report: dict[str, Any], topic: str) -> dict[str, Any]:
    return next(e for e in report["coverage"] if e["topic"] == topic)


APPROVE = {"approve": True}


class TestTwoProcessesAnswerAtOnce:
    def test_two_approvals_refund_once(self, desk: Desk) -> None:
        """Two processes approve at the same moment: one refunds, once; the other is told."""
        decision = desk.first()
        results = desk.race({decision: APPROVE}, {decision: APPROVE})
        losers = [r["usageError"] for r in results if "usageError" in r]
        reports = [r for r in results if "usageError" not in r]
        assert (len(losers), len(reports)) == (1, 1), results
        assert "already answered: Approve() at" in losers[0]
        assert entry(reports[0], "B-2")["status"] == "covered"
        assert desk.calls() == ["A-1 40", "B-2 900"]

    def test_approve_against_reject_exactly_one_wins(self, desk: Desk) -> None:
        """Approve and Reject at the same moment: one wins, the loser hears which, and the
        refund is paid only if Approve won."""
        decision = desk.first()
        approved, rejected = desk.race({decision: APPROVE}, {decision: {"reject": "no refund"}})
        assert ("usageError" in approved) != ("usageError" in rejected), (approved, rejected)
        if "usageError" in rejected:
            assert "already answered: Approve() at" in rejected["usageError"]
            assert entry(approved, "B-2")["status"] == "covered"
            assert desk.calls() == ["A-1 40", "B-2 900"]
        else:
            assert "already answered: Reject('no refund') at" in approved["usageError"]
            assert entry(rejected, "B-2")["reason"].startswith("rejected by a person: no refund")
            assert desk.calls() == ["A-1 40"]


class TestAResumeKilledDuringTheCall:
    def test_the_call_is_not_made_again_without_a_person(self, desk: Desk) -> None:
        """Killed after the refund was claimed and before its result was written: going on
        does not refund again but asks, saying the call may have run; approved, it refunds
        once more, and only once."""
        decision = desk.first()
        answer = json.dumps({decision: APPROVE})
        process = desk.start("resume", answer, "--block-in-refund")
        try:
            give_up = time.monotonic() + 60
            while "B-2 900" not in desk.calls():
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < give_up, "the refund never started"
                time.sleep(0.01)
        finally:
            os.kill(process.pid, signal.SIGKILL)
            process.communicate()
        # One rule: the answer was claimed by the resume that died; giving it again is refused.
        again = desk("resume", answer)
        assert "already answered: Approve() at" in again["usageError"]
        assert "call resume('desk-run') without it" in again["usageError"]
        report = desk("resume", "{}")
        assert desk.calls() == ["A-1 40", "B-2 900"]  # not made again
        [asked] = report["pendingApprovals"]
        assert asked["id"] != decision
        assert "the call of refund may have run" in asked["reason"]
        assert "may have run" in entry(report, "B-2")["reason"]
        approved = desk("resume", json.dumps({asked["id"]: APPROVE}))
        assert entry(approved, "B-2")["status"] == "covered"
        assert desk.calls() == ["A-1 40", "B-2 900", "B-2 900"]
        assert "pendingApprovals" not in desk("resume", "{}")
        assert desk.calls() == ["A-1 40", "B-2 900", "B-2 900"]


class TestABatchOfAnswers:
    async def test_a_batch_that_loses_one_answer_says_which_it_claimed(
        self, store: CheckpointStore
    ) -> None:
        """Two answers given together, one taken meanwhile by someone else: the error names
        the winner of that one and the answer this call claimed, which stands."""
        from agentmesh._engine._human import DecisionBook

        desk = GatedDesk()
        other = Task(query="refund order D-4", topic="D-4", metadata={"amount": 700})
        first = await desk.coordinator(store).run([BIG, other], run_id="r1")
        one, two = (p.id for p in first.pending_approvals)
        mine = await DecisionBook.load(store, "r1")  # read before the other person answered
        theirs = await DecisionBook.load(store, "r1")
        await theirs.give({two: Reject("no")})
        with pytest.raises(UsageError) as caught:
            await mine.give({one: Approve(), two: Approve()})
        assert f"{two!r} was already answered: Reject('no') at" in str(caught.value)
        assert f"This call claimed [{one!r}] first: those answers stand" in str(caught.value)
        report = await desk.coordinator(store).resume("r1")
        assert report.pending_approvals == ()
        assert desk.refunds == [900]
