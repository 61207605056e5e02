"""Plain data below what uses it: the report under the hub and the events, the events
under the hub. Every import counts, also one inside a function or under `TYPE_CHECKING`:
a lazy import that breaks a circle at run time still points the wrong way."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import agentmesh
import agentmesh.coordinator
import agentmesh.events
import agentmesh.report
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Route,
    TryAlternative,
)

PACKAGE = Path(agentmesh.__file__).parent
ROOT = Path(__file__).resolve().parents[2]

# What the report's data may not know of: the hub, the events, and the engine that runs
# tasks (anything that produces a report or consumes one).
ABOVE_THE_REPORT = (
    "agentmesh.coordinator",
    "agentmesh.events",
    "agentmesh.context",
    "agentmesh.scope",
    "agentmesh.executors",
    "agentmesh.subagents",
    "agentmesh.models",
    "agentmesh.policies",
    "agentmesh.mcp",
    "agentmesh.console",
    "agentmesh.agui",
    "agentmesh.pipeline",
    "agentmesh._engine",
)


def modules_of(package: str) -> list[Path]:
    """The source files of `package` (`agentmesh.events` -> `events.py` or `events/*.py`)."""
    base = PACKAGE.joinpath(*package.split(".")[1:])
    files = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    assert all(path.exists() for path in files), f"{package} has no source"
    return files


@functools.cache  # each file is parsed once for the module's tests (the sources do not change)
def imports_of(path: Path) -> frozenset[str]:
    """Every module `path` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def offending(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in modules_of(package)
        for name in imports_of(path)
        if any(name == above or name.startswith(f"{above}.") for above in forbidden)
    )


class TestLayers:
    def test_the_report_imports_nothing_that_produces_or_consumes_it(self) -> None:
        """`agentmesh.report` imports neither the hub, the events nor the task engine."""
        assert offending("agentmesh.report", ABOVE_THE_REPORT) == []

    def test_the_events_never_import_the_coordinator(self) -> None:
        """`agentmesh.events` sits below the hub it reports on: no import of the coordinator."""
        assert offending("agentmesh.events", ("agentmesh.coordinator",)) == []

    def test_approvals_are_plain_data_below_the_report(self) -> None:
        """`agentmesh.approvals`, a person's answers, imports neither the report nor its users."""
        assert offending("agentmesh.approvals", ("agentmesh.report", *ABOVE_THE_REPORT)) == []

    def test_no_module_imports_the_deprecated_decisions(self) -> None:
        """The library uses `agentmesh.approvals`; `agentmesh.decisions` only forwards to it."""
        users = sorted(
            str(path.relative_to(PACKAGE.parent))
            for path in PACKAGE.rglob("*.py")
            if path != PACKAGE / "decisions.py"
            and any(n.startswith("agentmesh.decisions") for n in imports_of(path))
        )
        assert users == []

    def test_the_coordinator_re_exports_the_report_and_the_routes(self) -> None:
        """Every name of `agentmesh.report` still imports from `agentmesh.coordinator`, the same
        object."""
        for name in agentmesh.report.__all__:
            assert getattr(agentmesh.coordinator, name) is getattr(agentmesh.report, name)
            assert name in agentmesh.coordinator.__all__
        assert agentmesh.Report is agentmesh.report.Report


class TestRouteName:
    def test_a_route_is_any_of_the_six_routes(self) -> None:
        """`Route` is the union of the coordinator's six routes, as a router returns them."""
        assert set(Route.__args__) == {
            Accept,
            AcceptEmpty,
            RetryWithFeedback,
            TryAlternative,
            Escalate,
            RecordGap,
        }
        assert "Route" in agentmesh.coordinator.__all__
        assert "RouteDecision" not in agentmesh.coordinator.__all__

    @pytest.mark.parametrize("module", [agentmesh.coordinator, agentmesh.report])
    def test_the_old_name_still_imports_with_a_warning(self, module: object) -> None:
        """`RouteDecision` is `Route` for one more release, with a DeprecationWarning."""
        with pytest.warns(DeprecationWarning, match="RouteDecision is now Route"):
            old = module.RouteDecision  # type: ignore[attr-defined]
        assert old is Route

    def test_an_unknown_name_is_still_an_attribute_error(self) -> None:
        """The module's `__getattr__` answers only the old name, never anything else."""
        with pytest.raises(AttributeError, match="RouteDecisions"):
            _ = agentmesh.coordinator.RouteDecisions


@functools.cache  # loaded once; its walks over the package are shared below
def _house() -> ModuleType:
    spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _import_graph(*, by_design: bool) -> dict[str, frozenset[str]]:
    """Each agentmesh module's imports of agentmesh modules, as `scripts/house.py` finds
    them; `by_design`: as it draws them, a package's `__init__` re-exporting (its own
    imports are no edges: a module that imports the package root for its name does not
    thereby depend on everything the root re-exports)."""
    house = _house()
    found = house.modules()
    if by_design:
        return {
            name: frozenset() if found[name].name == "__init__.py" else targets
            for name, targets in _import_graph(by_design=False).items()
        }
    defined = house.definitions(found)
    return {
        name: frozenset(house.imports_of(name, path, set(found), defined))
        for name, path in found.items()
    }


@functools.cache
def _house_figures() -> dict[str, object]:
    """`scripts/house.py`'s figures of the package, measured once."""
    figures: dict[str, object] = _house().measure()
    return figures


def _reached(graph: dict[str, frozenset[str]], start: str) -> set[str]:
    """The modules `start` depends on in `graph`, directly or not."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def reached_from(start: str) -> set[str]:
    """The agentmesh modules `start` depends on, directly or not."""
    return _reached(_import_graph(by_design=False), start)


class TestRedactionLayer:
    def test_redaction_imports_nothing_of_agentmesh(self) -> None:
        """The redaction module stands alone, below everything that redacts."""
        assert reached_from("agentmesh._redaction") == set()

    @pytest.mark.parametrize(
        "low", ["agentmesh.envelope", "agentmesh._limits", "agentmesh._engine._ledger"]
    )
    def test_low_layers_do_not_reach_the_logging_configuration(self, low: str) -> None:
        """Envelopes, size limits and the tool ledger redact without the logging setup."""
        reached = reached_from(low)
        assert "agentmesh._redaction" in reached
        assert "agentmesh._logging" not in reached


# What the task engine may not know of: what sits above it and drives it.
ABOVE_THE_ENGINE = (
    "agentmesh.context",
    "agentmesh.subagents",
    "agentmesh.coordinator",
    "agentmesh.executors",
    "agentmesh.mcp",
    "agentmesh.console",
    "agentmesh.agui",
    "agentmesh.pipeline",
)


class TestTaskEngine:
    def test_the_engine_imports_nothing_that_drives_it(self) -> None:
        """`agentmesh._engine` imports neither `Context`, the subagents, the hub nor the
        executors: a body's `Context` sits above the engine."""
        assert offending("agentmesh._engine", ABOVE_THE_ENGINE) == []

    def test_the_package_has_no_import_circles(self) -> None:
        """No two modules of agentmesh import each other, directly or not, lazily or not
        (as `scripts/house.py` counts them: a package's `__init__` re-exports)."""
        assert _house_figures()["circles"] == []


class TestPrivateImports:
    """A package's private modules are its own: no room imports another's (issue 25)."""

    def test_no_room_imports_another_package_s_private_module(self) -> None:
        """Only the task engine (`agentmesh._engine`) and the root's own helpers
        (`agentmesh._redaction`, ...) are private modules every room may import; a public
        name comes from its public package (as `scripts/house.py` counts the imports)."""
        assert _house_figures()["crossing"] == []

    @pytest.mark.parametrize(
        ("source", "target", "crosses"),
        [
            ("agentmesh.scope", "agentmesh.checkpoints._store", True),
            ("agentmesh._engine._task", "agentmesh.events._channel", True),
            ("agentmesh.mcp._serve", "agentmesh.coordinator._resume", True),
            ("agentmesh.checkpoints._sqlite", "agentmesh.checkpoints._store", False),
            ("agentmesh.coordinator._run", "agentmesh._engine._human", False),
            ("agentmesh.checkpoints._store", "agentmesh._codec", False),
            ("agentmesh.scope", "agentmesh.checkpoints", False),
        ],
    )
    def test_the_rule_names_what_crosses(self, source: str, target: str, crosses: bool) -> None:
        """Into another package's private module crosses, from the engine too; within a
        package, into the engine, into a root helper or a public package does not."""
        house = _house()
        path = PACKAGE.parent.joinpath(*source.split(".")).with_suffix(".py")
        assert house.crosses(source, path, target) is crosses


class TestUsageLayer:
    def test_the_envelope_reaches_only_the_usage_records(self) -> None:
        """The envelope carries usage records; the limits and prices stay above it."""
        usage = {name for name in reached_from("agentmesh.envelope") if ".usage" in name}
        assert usage == {"agentmesh.usage._records"}

    def test_usage_records_are_plain_data(self) -> None:
        """The usage records import nothing of agentmesh."""
        assert reached_from("agentmesh.usage._records") == set()


def reached_by_design(start: str) -> set[str]:
    """What `start` depends on as `scripts/house.py` draws it (`_import_graph`)."""
    return _reached(_import_graph(by_design=True), start)


class TestHubRooms:
    """The hub does one job per room: configuration, a run, one task's flow, the guard."""

    @pytest.mark.parametrize(
        ("room", "above"),
        [
            ("agentmesh.coordinator._run", ("agentmesh.coordinator._coordinator",)),
            (
                "agentmesh.coordinator._flow",
                ("agentmesh.coordinator._coordinator", "agentmesh.coordinator._run"),
            ),
            (
                "agentmesh.coordinator._guard",
                (
                    "agentmesh.coordinator._coordinator",
                    "agentmesh.coordinator._run",
                    "agentmesh.coordinator._flow",
                    "agentmesh.coordinator._router",
                ),
            ),
            ("agentmesh.coordinator._plan", ("agentmesh.coordinator._coordinator",)),
        ],
    )
    def test_each_room_of_the_hub_reaches_no_room_above_it(
        self, room: str, above: tuple[str, ...]
    ) -> None:
        """A run never reaches the Coordinator, a task's flow never the run, the guard no router."""
        assert reached_by_design(room) & set(above) == set()

    def test_the_stream_is_given_a_run_not_the_coordinator(self) -> None:
        """`agentmesh.events` reaches nothing of the hub: the stream drives a `Runnable`."""
        reached = reached_by_design("agentmesh.events._stream")
        assert {name for name in reached if name.startswith("agentmesh.coordinator")} == set()

    def test_no_room_of_the_hub_is_over_450_lines_nor_a_function_over_60(self) -> None:
        """Each module of `agentmesh.coordinator` reads in one sitting, each function too."""
        house = _house()
        long: list[str] = []
        for path in modules_of("agentmesh.coordinator"):
            lines = len(path.read_text().splitlines())
            if lines > house.MAX_MODULE_LINES:
                long.append(f"{path.name}: {lines} lines")
            long += [
                f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1})"
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.end_lineno is not None
                and node.end_lineno - node.lineno + 1 > house.MAX_FUNCTION_LINES
            ]
        assert long == []


class TestBridges:
    def test_nothing_of_the_library_imports_the_agui_bridge(self) -> None:
        """`agentmesh.agui` (an optional extra) sits on the top floor: no other room imports
        it, and it imports no other bridge (the console's answer path is the engine's)."""
        rooms = sorted(
            {
                ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:2])
                for path in PACKAGE.rglob("*.py")
            }
        )
        importers = [
            room
            for room in rooms
            if room != "agentmesh.agui" and offending(room, ("agentmesh.agui",))
        ]
        assert importers == []
        assert (
            offending("agentmesh.agui", ("agentmesh.console", "agentmesh.mcp", "agentmesh.a2a"))
            == []
        )
