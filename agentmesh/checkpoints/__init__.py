"""Durable checkpoints: resume a run after a failure or a crash instead of starting over.

* `CheckpointStore`: async `get` / `put` / `list` / `delete` of JSON values, namespaced
  by run id, stage and key; values go in as pydantic models or JSON data.
* `SQLiteStore(path)`: the embedded default (`.agentmesh/checkpoints.sqlite`).
* `PostgresStore(dsn)`: a PostgreSQL database, for runs that span machines (the
  `postgres` extra).
* `MemoryStore`: the same behaviour in memory, for tests.

`Pipeline` (in `agentmesh.coordinator`) checkpoints each stage's output; a subagent run
with `store=` records its non-idempotent tool calls (and, with `checkpoint=True`, its
partial results) so that a resumed run neither repeats a side effect nor starts over.
"""

from agentmesh._codec import SCHEMA_VERSION
from agentmesh.checkpoints._postgres import PostgresStore
from agentmesh.checkpoints._sqlite import DEFAULT_PATH, SQLiteStore
from agentmesh.checkpoints._store import Checkpoint, CheckpointStore, MemoryStore
from agentmesh.errors import CheckpointError

__all__ = [
    "DEFAULT_PATH",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
]
