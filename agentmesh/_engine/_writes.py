"""Whether a run's store takes writes behind (`WritesBehind`), asked once per class."""

from __future__ import annotations

from agentmesh.checkpoints import CheckpointStore, WritesBehind

__all__ = ["writes_behind"]

# A protocol check looks up each method on the object: microseconds, for a record that
# costs a few. A class answers once (a store's methods are its class's).
_ANSWERS: dict[type, bool] = {}


def writes_behind(store: CheckpointStore) -> WritesBehind | None:
    """`store` as a `WritesBehind` store, or None when it takes only awaited `put`s."""
    kind = type(store)
    known = _ANSWERS.get(kind)
    if known is None:
        known = _ANSWERS[kind] = isinstance(store, WritesBehind)
    return store if known else None  # type: ignore[return-value]  # checked above, per class
