"""The layers of the package point one way: what the low layers may import of agentmesh.

Read from the source with `scripts/house.py`'s import graph, where every import counts
(also those inside functions and under `TYPE_CHECKING`): at run time `import agentmesh`
loads everything, so only the source shows what a module depends on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _house() -> ModuleType:
    spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reached_from(start: str) -> set[str]:
    """The agentmesh modules `start` depends on, directly or not."""
    house = _house()
    found = house.modules()
    defined = house.definitions(found)
    graph = {
        name: house.imports_of(name, path, set(found), defined) for name, path in found.items()
    }
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


class TestRedactionLayer:
    def test_redaction_imports_nothing_of_agentmesh(self) -> None:
        """The redaction module stands alone, below everything that redacts."""
        assert reached_from("agentmesh._redaction") == set()

    @pytest.mark.parametrize(
        "low", ["agentmesh.envelope", "agentmesh._limits", "agentmesh.checkpoints._ledger"]
    )
    def test_low_layers_do_not_reach_the_logging_configuration(self, low: str) -> None:
        """Envelopes, size limits and the tool ledger redact without the logging setup."""
        reached = reached_from(low)
        assert "agentmesh._redaction" in reached
        assert "agentmesh._logging" not in reached


class TestUsageLayer:
    def test_the_envelope_reaches_only_the_usage_records(self) -> None:
        """The envelope carries usage records; the limits and prices stay above it."""
        usage = {name for name in reached_from("agentmesh.envelope") if ".usage" in name}
        assert usage == {"agentmesh.usage._records"}

    def test_usage_records_are_plain_data(self) -> None:
        """The usage records import nothing of agentmesh."""
        assert reached_from("agentmesh.usage._records") == set()
