"""agentmesh uses only the public APIs of tenacity, asyncio-throttle, structlog and pydantic.

A dependency's private attribute can change in any release without a deprecation; a use
of one would break us on an upgrade without a test failing. This scan of the package's
source with `ast` finds such uses and names them, file:line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import agentmesh

DEPENDENCIES = frozenset(
    {"tenacity", "asyncio_throttle", "structlog", "pydantic", "pydantic_core"}
    # agentmesh.mcp: the mcp SDK and what it is built on.
    | {"mcp", "anyio", "httpx2", "jsonschema", "referencing"}
)
PACKAGE = Path(agentmesh.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(module: str | None) -> str:
    return (module or "").split(".", 1)[0]


def _protected(name: str) -> bool:
    """An instance's `__dict__` or pydantic's per-instance state (`__pydantic_fields_set__`)."""
    return name == "__dict__" or (name.startswith("__pydantic_") and name.endswith("__"))


class _Scanner(ast.NodeVisitor):
    """Finds private uses of the dependencies in one module."""

    def __init__(self) -> None:
        self.bound: set[str] = set()  # names bound to a dependency's module or its objects
        self.objects: set[str] = set()  # attribute names holding a dependency's objects
        self.problems: list[tuple[int, str]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _root(alias.name) in DEPENDENCIES:
                if any(_private(part) for part in alias.name.split(".")):
                    self.problems.append((node.lineno, f"imports private module {alias.name}"))
                self.bound.add(alias.asname or alias.name.split(".", 1)[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or _root(node.module) not in DEPENDENCIES:
            return
        module = node.module or ""
        if any(_private(part) for part in module.split(".")):
            self.problems.append((node.lineno, f"imports from private module {module}"))
        for alias in node.names:
            if _private(alias.name):
                self.problems.append((node.lineno, f"imports private {module}.{alias.name}"))
            self.bound.add(alias.asname or alias.name)

    def bind_objects(self, tree: ast.AST) -> None:
        """Bind the variables and attributes that hold a dependency's objects.

        `self._throttler: Throttler | None = Throttler(...)` and then
        `throttler = self._throttler`: both names hold a `Throttler`, whose private
        attributes are as private as the module's.
        """
        # The assignments in the order a walk meets them, found once for the three rounds.
        assignments = [n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign | ast.Assign)]
        for _ in range(3):  # aliases of aliases, a few levels deep
            for node in assignments:
                if isinstance(node, ast.AnnAssign) and self._mentions(node.annotation):
                    self._bind(node.target)
                elif (
                    isinstance(node, ast.AnnAssign | ast.Assign)
                    and node.value is not None
                    and self._holds(node.value)
                ):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        self._bind(target)

    def _mentions(self, expression: ast.expr) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.bound for n in ast.walk(expression))

    def _holds(self, value: ast.expr) -> bool:
        """A call of a bound name, or a bound variable or attribute itself."""
        if isinstance(value, ast.Call):
            value = value.func
        if isinstance(value, ast.Name):
            return value.id in self.bound
        return isinstance(value, ast.Attribute) and value.attr in self.objects

    def _bind(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.bound.add(target.id)
        elif isinstance(target, ast.Attribute):
            self.objects.add(target.attr)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if (
            _private(node.attr)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in self.objects
        ):
            self.problems.append((node.lineno, f"reads {node.value.attr}.{node.attr}"))
            return
        chain, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in self.bound:
            private = [part for part in reversed(chain) if _private(part)]
            if private:
                self.problems.append((node.lineno, f"reads {base.id}.{'.'.join(reversed(chain))}"))
                return  # one problem per chain, not one per link
        if isinstance(node.ctx, ast.Store | ast.Del) and _protected(node.attr):
            self.problems.append((node.lineno, f"writes {node.attr}"))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        target = node.value
        if (
            isinstance(node.ctx, ast.Store | ast.Del)
            and isinstance(target, ast.Attribute)
            and _protected(target.attr)
        ):
            self.problems.append((node.lineno, f"writes into {target.attr}"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        # setattr(obj, "__dict__", ...), object.__setattr__(obj, "__pydantic_...", ...) and
        # any alias of them: every call naming such an attribute but the reading ones.
        function = node.func
        name = function.id if isinstance(function, ast.Name) else None
        if isinstance(function, ast.Attribute):
            name = function.attr
        if name not in ("getattr", "hasattr") and len(node.args) >= 2:
            attribute = node.args[1]
            if (
                isinstance(attribute, ast.Constant)
                and isinstance(attribute.value, str)
                and _protected(attribute.value)
            ):
                self.problems.append((node.lineno, f"writes {attribute.value} with {name}"))
        self.generic_visit(node)


def scan(source: str) -> list[tuple[int, str]]:
    """The private uses of a dependency in one module's source, by line."""
    tree = ast.parse(source)
    scanner = _Scanner()
    # Imports first, wherever they are: a name bound anywhere may be used anywhere.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            scanner.visit(node)
    tree = _WithoutImports().visit(tree)
    scanner.bind_objects(tree)
    scanner.visit(tree)
    return sorted(scanner.problems)


class _WithoutImports(ast.NodeTransformer):
    """The tree with its imports removed, so the second pass sees only their uses."""

    def visit_Import(self, node: ast.Import) -> None:
        return None

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        return None


def package_problems() -> Iterator[str]:
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, problem in scan(path.read_text()):
            yield f"{path.relative_to(PACKAGE.parent)}:{line}: {problem}"


class TestDependencyApis:
    def test_the_package_uses_no_private_attribute_of_its_dependencies(self) -> None:
        """No module of agentmesh imports, reads or writes a dependency's private parts."""
        problems = list(package_problems())
        assert not problems, "private dependency APIs used:\n" + "\n".join(problems)

    def test_the_scan_finds_each_kind_of_private_use(self) -> None:
        """Private imports, reads through a bound name and pydantic state writes are found."""
        source = "\n".join(
            [
                "import structlog",
                "from structlog._config import _BUILTIN_DEFAULT_PROCESSORS",
                "from asyncio_throttle import Throttler",
                "import tenacity as t",
                "x = structlog._config",
                "y = Throttler._task_logs",
                "z = t.retry_state._inner.value",
                "object.__setattr__(model, '__pydantic_fields_set__', set())",
                "model.__dict__ = {}",
                "model.__dict__['a'] = 1",
                "_set_attribute(model, '__dict__', data)",
                "self._throttler: Throttler | None = None",
                "throttler = self._throttler",
                "log = throttler._task_logs",
                "other = self._throttler._task_logs",
            ]
        )
        found = sorted({line for line, _ in scan(source)})
        assert found == [2, 5, 6, 7, 8, 9, 10, 11, 14, 15]

    def test_public_uses_pass(self) -> None:
        """Public names, the package's own private names and pydantic's config hook pass."""
        source = "\n".join(
            [
                "import structlog",
                "from pydantic import BaseModel, ConfigDict",
                "from agentmesh._redaction import redact",
                "config = structlog.get_config()",
                "class Record:",
                "    __pydantic_config__ = ConfigDict()",
                "self._private = 1",
                "BaseModel.model_construct()",
                "attrs = getattr(exc, '__dict__', {})",
            ]
        )
        assert scan(source) == []
