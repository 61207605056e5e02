"""A damaged store row is a `CheckpointError` naming the store, the run and the key.

Rows are damaged the way a disk, a hand edit or other code would: text that is not JSON,
a list where a record was, a record of the wrong shape. On SQLite the bytes are written
into the file with `sqlite3`; on `MemoryStore` the raw row is put in its place. Whatever
the row, `resume`, the ledger and `Pipeline.run` say which checkpoint cannot be read,
never `JSONDecodeError`, `TypeError`, `KeyError` or pydantic's error from inside.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    Outcome,
    Pipeline,
    RetryPolicy,
    Task,
    subagent,
    tool,
)
from agentmesh.approvals import Approve
from agentmesh.checkpoints import (
    Checkpoint,
    CheckpointError,
    MemoryStore,
    SQLiteStore,
)
from agentmesh.checkpoints._store import StoreBase
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

RUN = "r1"
NEVER = RetryPolicy.never()
NOT_JSON = '{"pending": {"id": '


class Damage:
    """Writes a raw value under a key of a store: into the SQLite file, or the memory rows."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = tmp_path / "checkpoints.sqlite"

    def open(self) -> StoreBase:
        return SQLiteStore(self.path) if self.kind == "sqlite" else MemoryStore()

    async def write(self, store: StoreBase, stage: str, key: str, raw: str) -> StoreBase:
        """`store` with the row replaced by `raw` (for SQLite a new store on the file)."""
        if isinstance(store, MemoryStore):
            # The row as a broken writer would leave it: MemoryStore keeps JSON text too.
            await store._put((RUN, stage, key, 1, raw, time.time()))  # schema version 1
            return store
        await store.close()
        with sqlite3.connect(self.path) as connection:
            changed = connection.execute(
                "UPDATE checkpoints SET value = ? WHERE run_id = ? AND stage = ? AND key = ?",
                (raw, RUN, stage, key),
            ).rowcount
        assert changed == 1, f"no row {RUN}/{stage}/{key} to damage"
        return await SQLiteStore(self.path).open()


@pytest.fixture(params=["sqlite", "memory"])
def damage(request: pytest.FixtureRequest, tmp_path: Path) -> Damage:
    return Damage(request.param, tmp_path)


def names_the_row(caught: pytest.ExceptionInfo[CheckpointError], store: str, key: str) -> None:
    """The error names the store (`store`, its repr then), the run and the key."""
    error = caught.value
    assert (error.store, error.run_id, error.key) == (store, RUN, key)
    assert store in str(error)
    assert f"{RUN}/" in str(error)
    assert key in str(error)


# -- a run waiting for a person's decision -----------------------------------------------------


@pre_tool_use(tool="refund", asks=True)
def over_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > 100:
        return Ruling.ask("over the limit")
    return None


class Desk:
    def __init__(self) -> None:
        self.refunds: list[int] = []

        @tool(impact="financial")
        async def refund(order: str, amount: int) -> str:
            self.refunds.append(amount)
            return f"refunded {amount}"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> str:
            amount = task.metadata["amount"]
            return await ctx.call(refund, order=task.query, amount=amount)

        self.subagent = desk

    def coordinator(self, store: StoreBase) -> Coordinator:
        return Coordinator([self.subagent], policies=[over_limit], store=store)


TASKS = [
    Task(query="A-1", id="small", metadata={"amount": 40}),
    Task(query="B-2", id="big", metadata={"amount": 900}),
]


async def waiting_run(store: StoreBase) -> str:
    """Run the desk: the small refund is made, the big one waits; the decision's id."""
    report = await Desk().coordinator(store).run(TASKS, run_id=RUN)
    (pending,) = report.pending_approvals
    return pending.id


PENDING = {
    "id": "d1",
    "kind": "tool_call",
    "taskId": "big",
    "subagent": "desk",
    "topic": "B-2",
    "query": "B-2",
    "reason": "over the limit",
    "policy": "over_limit",
}
SHAPES = {
    "decision": {
        "a list": "[1, 2]",
        "no pending question": json.dumps({"answer": None, "applied": False}),
        "an answer breaking its rules": json.dumps(
            {"pending": PENDING, "answer": {"decision": "reject", "reason": " "}, "applied": False}
        ),
        "an unknown answer": json.dumps(
            {"pending": PENDING, "answer": {"decision": "maybe"}, "applied": False}
        ),
        "applied as text": json.dumps({"pending": PENDING, "answer": None, "applied": "yes"}),
    },
    "plan": {
        "a dict": json.dumps({"jobs": []}),
        "a list of numbers": "[1, 2]",
        "a job without a task": json.dumps([{"taskId": "small", "subagent": "desk"}]),
        "a task that is not one": json.dumps(
            [{"taskId": "small", "task": {"query": 5}, "subagent": "desk"}]
        ),
    },
    "record": {
        "a list": "[]",
        "no steps": json.dumps(
            {
                "taskId": "small",
                "task": {"query": "A-1"},
                "subagent": "desk",
                "steps": [],
                "status": "covered",
            }
        ),
        "an unknown status": json.dumps({"taskId": "small", "steps": [], "status": "fine"}),
    },
}
CASES = [
    (target, label, raw)
    for target, shapes in SHAPES.items()
    for label, raw in [("not JSON", NOT_JSON), *shapes.items()]
]


class TestDamagedRunRows:
    @pytest.mark.parametrize(
        ("target", "label", "raw"), CASES, ids=[f"{t}-{label}" for t, label, _ in CASES]
    )
    async def test_resume_names_the_damaged_row(
        self, damage: Damage, target: str, label: str, raw: str
    ) -> None:
        """A decision, the plan or a task's record that cannot be read: a CheckpointError."""
        store = await damage.open().open()
        decision_id = await waiting_run(store)
        stage, key = {
            "decision": ("agentmesh.decisions", decision_id),
            "plan": ("agentmesh.run", "plan"),
            "record": ("agentmesh.run", "record/small"),
        }[target]
        store = await damage.write(store, stage, key, raw)
        desk, where = Desk(), repr(store)
        try:
            with pytest.raises(CheckpointError) as caught:
                await desk.coordinator(store).resume(RUN, approvals={decision_id: Approve()})
        finally:
            await store.close()
        names_the_row(caught, where, key)
        assert desk.refunds == []

    async def test_an_intact_store_still_resumes(self, damage: Damage) -> None:
        """The typed reading accepts every row agentmesh wrote: the approved refund is made."""
        store = await damage.open().open()
        decision_id = await waiting_run(store)
        desk = Desk()
        try:
            report = await desk.coordinator(store).resume(RUN, approvals={decision_id: Approve()})
        finally:
            await store.close()
        assert desk.refunds == [900]
        assert report.pending_approvals == ()


# -- the side-effect ledger ----------------------------------------------------------------------


class Checkout:
    """A subagent that charges once per task, its charges counted across runs."""

    def __init__(self) -> None:
        self.charges: list[str] = []

        @tool
        async def charge(order_id: str) -> str:
            self.charges.append(order_id)
            return "receipt"

        @subagent(name="checkout", retry=RetryPolicy.never())
        async def checkout(task: Task, ctx: Context) -> str:
            return await ctx.call(charge, order_id="#1")

        self.subagent = checkout
        self.task = Task(query="pay", id="t1")

    async def charged_then_rewritten(
        self, damage: Damage, raw: str
    ) -> tuple[StoreBase, Checkpoint]:
        """Charge once, then write `raw` over the ledger entry; the store and the entry."""
        store = await damage.open().open()
        await self.subagent.run(self.task, run_id=RUN, store=store)
        (entry,) = [c for c in await store.list(RUN) if c.key.startswith("call/")]
        return await damage.write(store, entry.stage, entry.key, raw), entry

    async def again(self, store: StoreBase) -> Outcome:
        try:
            return await self.subagent.run(self.task, run_id=RUN, store=store)
        finally:
            await store.close()


class TestDamagedLedgerEntry:
    @pytest.mark.parametrize(
        "raw",
        [NOT_JSON, "[1, 2]", json.dumps({"result": {"no": 1}})],
        ids=["not JSON", "a list", "a result of the wrong type"],
    )
    async def test_the_call_is_not_made_and_the_envelope_names_the_row(
        self, damage: Damage, raw: str
    ) -> None:
        """The ledger cannot say whether the call happened: no call, and which row says so."""
        checkout = Checkout()
        store, entry = await checkout.charged_then_rewritten(damage, raw)
        where = repr(store)
        outcome = await checkout.again(store)
        assert checkout.charges == ["#1"]  # the first run's call, never a second one
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.is_retryable is False
        assert entry.key in outcome.message
        assert where in outcome.message

    async def test_a_claim_without_a_result_is_a_call_that_may_have_run(
        self, damage: Damage
    ) -> None:
        """An entry with no result is a claim whose call may have run: never made again."""
        checkout = Checkout()
        store, _ = await checkout.charged_then_rewritten(damage, json.dumps({"tool": "charge"}))
        outcome = await checkout.again(store)
        assert checkout.charges == ["#1"]
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "call_may_have_run"
        assert not outcome.is_retryable


# -- a pipeline's checkpoints ------------------------------------------------------------------


async def fetch(query: str) -> list[str]:
    return [query]


async def count(docs: list[str]) -> int:
    raise ValueError("count has a bug")


class TestDamagedPipelineRows:
    @pytest.mark.parametrize(
        ("key", "raw"),
        [
            ("output", NOT_JSON),
            ("output", json.dumps({"docs": 1})),
            ("input", "[1, 2]"),
            ("input", json.dumps({"sha": "x"})),
            ("shape", json.dumps({"stages": "fetch"})),
            ("shape", NOT_JSON),
        ],
        ids=[
            "output-not JSON",
            "output-not its type",
            "input-a list",
            "input-no digest",
            "shape-stages as text",
            "shape-not JSON",
        ],
    )
    async def test_a_resumed_pipeline_names_the_damaged_row(
        self, damage: Damage, key: str, raw: str
    ) -> None:
        """A stage output, the input digest or the shape that cannot be read: CheckpointError."""
        store = await damage.open().open()
        pipeline = Pipeline(
            [("fetch", fetch), ("count", count)], store=store, name="p", retry=NEVER
        )
        assert isinstance(await pipeline.run("q", run_id=RUN), ErrorEnvelope)
        stage = "p/fetch" if key == "output" else "p"
        store = await damage.write(store, stage, key, raw)
        again = Pipeline([("fetch", fetch), ("count", count)], store=store, name="p", retry=NEVER)
        where = repr(store)
        try:
            with pytest.raises(CheckpointError) as caught:
                await again.run("q", run_id=RUN)
        finally:
            await store.close()
        names_the_row(caught, where, key)


class TestDamagedRowsThroughTheStore:
    async def test_get_and_list_name_a_row_that_is_not_json(self, damage: Damage) -> None:
        """`store.get` and `store.list` raise CheckpointError for a row that is not JSON."""
        store = await damage.open().open()
        await store.put(RUN, "stage", "key", {"fine": True})
        store = await damage.write(store, "stage", "key", NOT_JSON)
        where = repr(store)
        try:
            with pytest.raises(CheckpointError) as got:
                await store.get(RUN, "stage", "key")
            with pytest.raises(CheckpointError) as listed:
                await store.list(RUN)
        finally:
            await store.close()
        names_the_row(got, where, "key")
        names_the_row(listed, where, "key")
