"""What a newcomer sees of the public surface: `dir()`, the version, `help()` and the types.

A name a user meets in a public signature must be one they can import from a public
module: a private type there (`UsageLimits.refusal(used: _Counts)`) is an API nobody
can spell.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import pydoc
import re
import subprocess
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from importlib.metadata import version
from types import ModuleType
from typing import Any

import pytest

import agentmesh
import agentmesh.testing
from agentmesh.subagents import LLMSubagent, SubagentKwargs
from agentmesh.tools import ToolKwargs

PUBLIC_MODULES = tuple(
    sorted(
        {"agentmesh"}
        | {
            f"agentmesh.{module.name}"
            for module in pkgutil.iter_modules(agentmesh.__path__)
            if not module.name.startswith("_")
        }
    )
)
"""`agentmesh` and its modules and subpackages without a leading underscore."""

# Left for the restructure of issue 25 (MCPServer's transports and its breaker sentinel;
# the constructors of the run's own objects): named here so that nothing else slips in
# unnoticed.
KNOWN = {
    # Built by `Subagent.run` only, over the task's engine.
    "agentmesh.Context.__init__": {"TaskEngine"},
    # Built by `MCPServer.tool` only; the protocol keeps the tool below its server.
    "agentmesh.mcp.MCPTool.__init__": {"ToolServer"},
    "agentmesh.mcp.MCPServer.__init__": {"_Default", "_Http", "_Stdio"},
    "agentmesh.mcp.MCPServer.stdio": {"_Default"},
    "agentmesh.mcp.MCPServer.http": {"_Default"},
    # Built by the coordinator only, from its run (`Runnable` is the protocol the
    # coordinator's `Run` meets, so that the events never import the hub).
    "agentmesh.events.RunStream.__init__": {"Runnable"},
    "agentmesh.scope.RunScope.__init__": {"DecisionBook"},
}


def run_python(code: str) -> Any:
    """The JSON printed by `code` in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


class TestDir:
    def test_lazy_testing_names_are_listed(self) -> None:
        """`dir(agentmesh.testing)` shows FakeMessagesAPI and its replies before first use."""
        listed = run_python(
            """
            import json, sys
            import agentmesh.testing
            names = dir(agentmesh.testing)
            print(json.dumps([names, "agentmesh.testing._fake_messages_api" in sys.modules]))
            """
        )
        names, loaded = listed
        assert set(agentmesh.testing.__all__) <= set(names)
        assert "FakeMessagesAPI" in names
        assert loaded is False

    def test_every_name_in_all_is_in_dir(self) -> None:
        """Every public module lists each name of its `__all__` in `dir()`."""
        for name in PUBLIC_MODULES:
            module = importlib.import_module(name)
            assert set(getattr(module, "__all__", ())) <= set(dir(module)), name


class TestVersion:
    def test_the_version_is_the_installed_distribution_s(self) -> None:
        """`agentmesh.__version__` is the version of the agentmesh-failwell distribution."""
        assert agentmesh.__version__ == version("agentmesh-failwell")
        assert "__version__" in dir(agentmesh)

    def test_reading_it_is_lazy(self) -> None:
        """`import agentmesh` does not load importlib.metadata; asking for the version does."""
        loaded = run_python(
            """
            import json, sys
            import agentmesh
            before = "importlib.metadata" in sys.modules
            print(json.dumps([before, agentmesh.__version__]))
            """
        )
        assert loaded == [False, version("agentmesh-failwell")]

    def test_an_unknown_attribute_is_still_an_attribute_error(self) -> None:
        """The lazy lookup answers only for `__version__`."""
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = agentmesh.no_such_name


OPTION_OWNERS: list[tuple[Callable[..., Any], type]] = [
    (agentmesh.Subagent, SubagentKwargs),
    (agentmesh.subagent, SubagentKwargs),
    (LLMSubagent, SubagentKwargs),
    (agentmesh.Tool, ToolKwargs),
    (agentmesh.tool, ToolKwargs),
]


class TestHelpShowsTheOptions:
    @pytest.mark.parametrize(
        ("owner", "keywords"), OPTION_OWNERS, ids=[o.__name__ for o, _ in OPTION_OWNERS]
    )
    def test_each_option_is_a_keyword_of_the_signature(
        self, owner: Callable[..., Any], keywords: type
    ) -> None:
        """`inspect.signature` (and so help()) names every option, not only `**options`."""
        parameters = inspect.signature(owner).parameters
        assert set(keywords.__annotations__) <= set(parameters)
        assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values())

    def test_help_of_subagent_shows_retry_and_its_type(self) -> None:
        """`help(Subagent)` shows `retry: RetryPolicy | None` and `max_concurrency`."""
        shown = pydoc.render_doc(agentmesh.Subagent, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
        assert "retry: 'RetryPolicy | None' = None" in shown
        assert "max_concurrency: 'int | None' = None" in shown
        assert "**options" not in shown

    def test_a_default_shown_is_the_default_used(self) -> None:
        """Each default in the signature is what the option is when not given."""
        made = agentmesh.subagent(name="plain")(_body)
        parameters = inspect.signature(agentmesh.subagent).parameters
        assert made.options.checkpoint is parameters["checkpoint"].default
        assert made.alternatives == parameters["alternatives"].default


async def _body(task: agentmesh.Task, ctx: agentmesh.Context) -> str:
    return task.query


def _public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every public function and class, and the public methods of the classes."""
    seen: set[int] = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if id(value) in seen or isinstance(value, ModuleType):
                continue
            seen.add(id(value))
            where = f"{module_name}.{name}"
            if inspect.isclass(value):
                for attribute, member in vars(value).items():
                    if attribute.startswith("_") and attribute != "__init__":
                        continue
                    if isinstance(member, classmethod | staticmethod):
                        member = member.__func__
                    if isinstance(member, property) and member.fget is not None:
                        member = member.fget
                    if inspect.isfunction(member):
                        yield f"{where}.{attribute}", member
            elif inspect.isfunction(value):
                yield where, value


def _public_type_names() -> set[str]:
    names: set[str] = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            # A name loaded at first use (`agentmesh.mcp`, `agentmesh.a2a`) is loaded now:
            # the private types of its modules are then known, whatever ran before.
            getattr(module, name)
            names.add(name)
    return names


def _private_type_names(public: set[str]) -> set[str]:
    """Classes defined in agentmesh that no public module exports."""
    private: set[str] = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("agentmesh"):
            continue
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == name
                and value.__name__ == attribute
                and attribute not in public
            ):
                private.add(attribute)
    return private


def _types_in(function: Callable[..., Any]) -> set[str]:
    """The names of the classes `function`'s annotations mention (Annotated's extras aside)."""
    try:
        hints = typing.get_type_hints(function)
    except NameError:  # a name imported for type checking only: read the text instead
        return _written_in(function)
    names: set[str] = set()
    for hint in hints.values():
        _walk(hint, names)
    return names


def _walk(hint: Any, names: set[str]) -> None:
    if isinstance(hint, type):
        # A parametrised pydantic generic (`Success[Any]`) is a class of its own.
        generic = getattr(hint, "__pydantic_generic_metadata__", None) or {}
        names.add((generic.get("origin") or hint).__name__)
    for argument in typing.get_args(hint):
        _walk(argument, names)


def _written_in(function: Callable[..., Any]) -> set[str]:
    """The classes named in `function`'s annotations as written."""
    text = " ".join(
        a if isinstance(a, str) else inspect.formatannotation(a)
        for a in function.__annotations__.values()
    )
    scope = getattr(function, "__globals__", {})
    return {
        name
        for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)
        if name not in scope or inspect.isclass(scope[name])
    }


class TestNoPrivateTypes:
    def test_no_public_signature_names_a_private_type(self) -> None:
        """Every type in a public signature is importable from a public module."""
        public = _public_type_names()
        private = _private_type_names(public)
        found: dict[str, set[str]] = {}
        for where, function in _public_callables():
            names = {
                name
                for name in _types_in(function)
                if name in private or (name.startswith("_") and not name.startswith("__"))
            }
            if names:
                found[where] = names
        unexpected = {
            where: sorted(names - KNOWN.get(where, set())) for where, names in found.items()
        }
        assert {where: names for where, names in unexpected.items() if names} == {}
        # An entry fixed since is taken off the list, so that it cannot come back.
        stale = [where for where, names in KNOWN.items() if not names <= found.get(where, set())]
        assert stale == []

    def test_usage_limits_shows_only_its_limits(self) -> None:
        """`UsageLimits` has no public method taking the meter's private counts."""
        from agentmesh.models import UsageLimits

        methods = [
            name
            for name, value in vars(UsageLimits).items()
            if callable(value) and not name.startswith("_")
        ]
        assert methods == []
