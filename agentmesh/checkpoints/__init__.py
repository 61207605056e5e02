"""Durable checkpoints: resume a run after a failure or a crash instead of starting over.

* `CheckpointStore`: async `get` / `put` / `list` / `delete` of JSON values, namespaced
  by run id, stage and key; values go in as pydantic models or JSON data.
* `SQLiteStore(path)`: the embedded default (`.agentmesh/checkpoints.sqlite`).
* `PostgresStore(dsn)`: a PostgreSQL database, for runs that span machines (the
  `postgres` extra).
* `MemoryStore`: the same behaviour in memory, for tests.
* `store.runs()`: the runs a built-in store holds, newest first (`RunStamp`s): what
  the run console (`agentmesh.console`) lists.
* `WritesBehind`: what a store may add to take writes without each writer waiting for
  its commit (the built-in stores do; a store of one's own needs nothing of it).
* `KeepsEventLogs`: what a store adds to keep its runs' event logs (`store.event_table()`,
  an `EventTable` of `LogHead`s and `LoggedRow`s, watched through a `Watch`); the
  built-in stores do, and `event_table_of(store)` finds them (None: a store keeps none).

`Pipeline` (in `agentmesh.coordinator`) checkpoints each stage's output; a subagent run
with `store=` records its non-idempotent tool calls (and, with `checkpoint=True`, its
partial results) so that a resumed run neither repeats a side effect nor starts over.
"""

from agentmesh import _codec
from agentmesh._signatures import kept_for_one_release
from agentmesh.checkpoints import _sqlite
from agentmesh.checkpoints._event_rows import (
    EventTable,
    KeepsEventLogs,
    LoggedRow,
    LogHead,
    Watch,
    event_table_of,
)
from agentmesh.checkpoints._memory import MemoryStore
from agentmesh.checkpoints._postgres import PostgresStore
from agentmesh.checkpoints._sqlite import SQLiteStore
from agentmesh.checkpoints._store import Checkpoint, CheckpointStore, RunStamp, WritesBehind
from agentmesh.errors import CheckpointError

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "EventTable",
    "KeepsEventLogs",
    "LogHead",
    "LoggedRow",
    "MemoryStore",
    "PostgresStore",
    "RunStamp",
    "SQLiteStore",
    "Watch",
    "WritesBehind",
    "event_table_of",
]

__getattr__ = kept_for_one_release(
    __name__,
    {
        "DEFAULT_PATH": ("is internal to agentmesh", lambda: _sqlite.DEFAULT_PATH),
        "SCHEMA_VERSION": ("is internal to agentmesh", lambda: _codec.SCHEMA_VERSION),
    },
)
