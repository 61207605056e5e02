"""What may go to the Ray workers, and how: by value, or refused with a reason.

Modules that the workers cannot import (a script, a test file, a notebook) are pickled
by value; an object that cannot be pickled is refused with a `UsageError` naming the
part of it that failed; a store the workers would each get a private copy of (a
`MemoryStore`, a `SQLiteStore` on a cluster of several hosts) is refused too.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

from agentmesh.errors import UsageError


def refuse_unshared(executor: Any, store: object) -> None:
    """`RayExecutor.check_store`: refuse, before a run starts, a store its workers cannot
    share (see `_check_shared`); it connects only to count the hosts of a cluster it
    joins by address, for a SQLite file."""
    import ray

    from agentmesh.checkpoints import SQLiteStore

    if isinstance(store, SQLiteStore) and not ray.is_initialized():
        if executor.address is None:
            return  # the local instance it will start: this host only
        executor.connect()
    _check_shared(store)


def _check_shared(store: object) -> None:
    """Refuse a store that each worker would get a private copy of."""
    from agentmesh.checkpoints import MemoryStore, SQLiteStore

    if isinstance(store, MemoryStore):
        where = "this process's memory"
    elif isinstance(store, SQLiteStore) and len(_cluster_hosts()) > 1:
        where = f"a SQLite file ({store.path}) of one host, on a cluster of several"
    else:
        return
    raise UsageError(
        f"store {store!r} cannot be used by Ray workers: it keeps its checkpoints in "
        f"{where}, which is not storage the workers share (each would read and write a "
        "copy of its own, and a resumed run would not find them): checkpoints, the "
        "ledger of side effects, a person's approvals and resume need a store every "
        "worker opens itself. Give the coordinator a PostgresStore(dsn), sent to the "
        "workers as its connection string, or, when every worker runs on this machine, "
        "a SQLiteStore(path); without store= a run keeps its ledger in the run-state actor."
    )


def _cluster_hosts() -> set[str]:
    """The addresses of the live nodes of the connected cluster."""
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]  # unannotated upstream
    return {node["NodeManagerAddress"] for node in nodes if node.get("Alive")}


def _unshippable(obj: object, what: str, exc: Exception) -> UsageError:
    from ray import cloudpickle

    # Ray's own message carries a page of serializability diagnostics; pickling again
    # gives the one line that says what failed.
    try:
        cloudpickle.dumps(obj)  # type: ignore[no-untyped-call]  # unannotated upstream
    except Exception as plain:
        exc = plain
    reason = (str(exc).strip().splitlines() or [""])[0]
    culprit = _culprit(obj)
    where = f" ({culprit})" if culprit else ""
    return UsageError(
        f"{what} cannot be sent to Ray workers: {type(exc).__name__}: {reason}{where}. "
        "What a subagent (or a policy, or the store) holds is pickled and sent to each "
        "worker, so it must not hold what only lives in this process (a lock, a socket, an "
        "open client or connection): create those inside the subagent's code, or once per "
        "worker."
    )


def _culprit(obj: object) -> str | None:
    """Name the first part of `obj` that cannot be pickled, one level deep."""
    from ray import cloudpickle

    def bad(value: object) -> bool:
        try:
            cloudpickle.dumps(value)  # type: ignore[no-untyped-call]  # unannotated upstream
        except Exception:
            return True
        return False

    fn = getattr(obj, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is not None:
        for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):  # type: ignore[union-attr]  # fn has __code__, so it is a function
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if bad(value):
                return f"its function closes over {name!r}: {type(value).__name__}"
        global_names = getattr(fn, "__globals__", {})
        for name in code.co_names:
            if name in global_names and bad(global_names[name]):
                return f"its function uses the global {name!r}: {type(global_names[name]).__name__}"
    for name, value in getattr(obj, "__dict__", {}).items():
        if bad(value):
            return f"its attribute {name!r}: {type(value).__name__}"
    return None


def _module(module: ModuleType | str) -> ModuleType:
    if isinstance(module, ModuleType):
        return module
    if module not in sys.modules:
        raise UsageError(f"RayExecutor(ship_modules=): module {module!r} is not imported")
    return sys.modules[module]


def _modules_of(obj: object) -> list[ModuleType]:
    """The user modules that define `obj` (its class, its function, its parts')."""
    names: set[str] = set()
    items = list(obj) if isinstance(obj, tuple | list) else [obj]
    for item in items:
        names.add(type(item).__module__)
        fn = getattr(item, "fn", None)
        if fn is not None:
            names.add(getattr(fn, "__module__", "") or "")
    modules = [sys.modules.get(name) for name in names]
    return [m for m in modules if m is not None and not _importable_everywhere(m)]


def _importable_everywhere(module: ModuleType) -> bool:
    """Installed code (the standard library, site-packages, agentmesh) is imported by
    the workers; anything else (a script, a test file, a notebook) goes by value."""
    name = module.__name__
    if name == "__main__" or name == "agentmesh" or name.startswith("agentmesh."):
        return True  # cloudpickle ships __main__ by value by itself
    file = getattr(module, "__file__", None)
    if file is None:
        return True  # built-in
    path = Path(file).resolve()
    roots = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(path.is_relative_to(Path(root).resolve()) for root in roots)


_REGISTERED: set[str] = set()


def _by_value(module: ModuleType) -> None:
    from ray import cloudpickle

    if module.__name__ not in _REGISTERED:
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]  # unannotated upstream
        _REGISTERED.add(module.__name__)
