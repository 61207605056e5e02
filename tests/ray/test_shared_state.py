"""How a worker's policy state writes merge into the run's state (no Ray needed)."""

from __future__ import annotations

from typing import Any

from agentmesh.executors._ray_shared import SharedState, apply_ops
from agentmesh.executors._ray_state import apply_op


class FakeLink:
    """Stands in for the worker's line to the actor: keeps what would be sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def write(self, op: tuple[Any, ...]) -> None:
        self.sent.append(op)


def worker(snapshot: dict[str, Any]) -> tuple[SharedState, FakeLink]:
    link = FakeLink()
    return SharedState(snapshot, link), link


class TestSharedState:
    def test_two_workers_filling_the_same_key_keep_both_items(self) -> None:
        """`setdefault(key, {})[item] = v` on two workers: the run keeps both items."""
        first, _ = worker({})
        second, _ = worker({})
        first.setdefault("denied", {})["vault"] = "no"
        second.setdefault("denied", {})["archive"] = "no"

        run: dict[str, Any] = {}
        apply_ops(run, first.ops)
        apply_ops(run, second.ops)

        assert run == {"denied": {"vault": "no", "archive": "no"}}

    def test_writes_go_to_the_actor_as_they_happen(self) -> None:
        """Each write is sent at once, in order, and recorded for the driver too."""
        state, link = worker({"seen": {"a": 1}})
        state["seen"]["b"] = 2
        state["count"] = 3
        del state["seen"]["a"]

        assert link.sent == state.ops
        run = {"seen": {"a": 1}}
        for op in link.sent:
            apply_op(run, op)
        assert run == {"seen": {"b": 2}, "count": 3}

    def test_reading_the_snapshot_writes_nothing(self) -> None:
        """Policies that only look (the pre-tool check) cost no message."""
        state, link = worker({"denied": {"vault": "no"}})
        assert state.get("denied", {}).get("vault") == "no"
        assert state.setdefault("forbidden", {}).get("x") is None  # an empty default
        assert link.sent == []
