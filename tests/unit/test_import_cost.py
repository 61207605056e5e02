"""What `import agentmesh` costs: modules loaded, objects the garbage collector tracks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any


def after_import(code: str) -> Any:
    """The JSON printed by `code`, run in a fresh interpreter right after `import agentmesh`."""
    source = "import gc, json, sys\nimport agentmesh\n" + textwrap.dedent(code)
    result = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


class TestImportCost:
    def test_at_most_40k_objects_are_tracked_after_the_import(self) -> None:
        """Every full collection of a run walks what the import left behind: at most 40k."""
        assert after_import("print(len(gc.get_objects()))") <= 40_000

    def test_structlog_and_rich_wait_for_the_first_logger(self) -> None:
        """structlog, and rich which it imports, are not loaded by the import."""
        loaded = after_import(
            "print(json.dumps([m in sys.modules for m in ('structlog', 'rich')]))"
        )
        assert loaded == [False, False]

    def test_rarely_validated_models_are_built_at_first_use(self) -> None:
        """Report, Task, Checkpoint and the model messages build their schemas when used."""
        complete = after_import(
            """
            from agentmesh.checkpoints import Checkpoint
            from agentmesh.models import ModelRequest, ModelResponse
            models = (agentmesh.Report, agentmesh.Task, Checkpoint, ModelRequest, ModelResponse)
            before = [model.__pydantic_complete__ for model in models]
            agentmesh.Task(query="q", topic="t")
            print(json.dumps([before, agentmesh.Task.__pydantic_complete__]))
            """
        )
        assert complete == [[False] * 5, True]

    def test_the_import_builds_no_schema(self) -> None:
        """No model, dataclass record or TypeAdapter of agentmesh builds its schema at import.

        A schema build costs milliseconds each and makes pydantic load its plugins (and
        `importlib.metadata` with them): a first use pays for what it uses, no more.
        """
        built = after_import(
            """
            loaded = [m for name, m in list(sys.modules.items()) if name.startswith("agentmesh")]
            from pydantic import TypeAdapter
            complete = sorted(
                f"{module.__name__}.{name}"
                for module in loaded
                for name, value in vars(module).items()
                if (isinstance(value, type) and value.__module__ == module.__name__
                    and vars(value).get("__pydantic_complete__") is True)
                or (isinstance(value, TypeAdapter) and value.pydantic_complete)
            )
            print(json.dumps([complete, "importlib.metadata" in sys.modules]))
            """
        )
        assert built == [[], False]

    def test_a_name_loaded_at_first_use_is_listed_before_and_kept_after(self) -> None:
        """`agentmesh.testing`'s fake APIs (`loaded_at_first_use`): `dir()` lists them
        before their module is imported; the first use imports it and keeps the value in
        the package; an unknown name is an AttributeError naming the package."""
        seen = after_import(
            """
            import agentmesh.testing as testing
            home = "agentmesh.testing._fake_messages_api"
            before = [home in sys.modules, "FakeMessagesAPI" in dir(testing)]
            api = testing.FakeMessagesAPI
            after = [home in sys.modules, vars(testing)["FakeMessagesAPI"] is api]
            try:
                testing.FakeMessageAPI
            except AttributeError as exc:
                unknown = str(exc)
            print(json.dumps([before, after, unknown]))
            """
        )
        assert seen == [
            [False, True],
            [True, True],
            "module 'agentmesh.testing' has no attribute 'FakeMessageAPI'",
        ]
