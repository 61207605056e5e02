"""Measure the shape of the `agentmesh` package: the figures of issue 25's before/after table.

    python scripts/house.py [--json]

`--json` gives the figures with their lists: the circles, the long functions and each
import of another package's private module (`crossing`, as "source -> target"). The task
engine (`agentmesh._engine`) and the root's own helpers may be imported from anywhere.

Every `import` in the package counts, also those inside functions and under
`TYPE_CHECKING`: a lazy import that breaks a circle at run time is still a circle in
the design. Reads the source with `ast`; imports nothing of agentmesh.
"""

from __future__ import annotations

import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentmesh"
# A test double: its size is its job (a whole fake API server), not a room grown too big.
EXEMPT_FROM_SIZE = {"agentmesh.testing._fake_messages_api"}
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
# The task engine: the one private package any room may import.
ENGINE = "agentmesh._engine"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def definitions(found: dict[str, Path]) -> dict[tuple[str, str], str]:
    """`(package, name)` -> the module that defines a name a package `__init__` re-exports."""
    known = set(found)
    direct: dict[tuple[str, str], str] = {}
    for name, path in found.items():
        if path.name != "__init__.py":
            continue
        body = ast.parse(path.read_text()).body
        # A name a package loads on first use is imported under `if TYPE_CHECKING:` there.
        nested = [inner for node in body if isinstance(node, ast.If) for inner in node.body]
        for node in [*body, *nested]:
            if isinstance(node, ast.ImportFrom):
                target = _resolve(name, path, node)
                for alias in node.names:
                    if f"{target}.{alias.name}" not in known and target in known:
                        direct[(name, alias.asname or alias.name)] = target
    resolved: dict[tuple[str, str], str] = {}
    for (package, attr), target in direct.items():
        seen = {package}
        while (target, attr) in direct and target not in seen:
            seen.add(target)
            target = direct[(target, attr)]
        resolved[(package, attr)] = target
    return resolved


def imports_of(
    name: str, path: Path, known: set[str], defined: dict[tuple[str, str], str]
) -> set[str]:
    """The agentmesh modules `name` imports: a name re-exported by a package counts as an
    import of the module that defines it, which is what the importer depends on."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, path, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif (target, alias.name) in defined:
                    found.add(defined[(target, alias.name)])
                elif target in known:
                    found.add(target)
    found.discard(name)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: the import circles (components of 2+ modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def floors(graph: dict[str, set[str]], circles: list[list[str]]) -> int:
    """Levels of the import graph with each circle folded into one node (longest chain)."""
    group = {m: m for m in graph}
    for circle in circles:
        for member in circle:
            group[member] = circle[0]
    folded: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            if group[source] != group[target]:
                folded[group[source]].add(group[target])
    depth: dict[str, int] = {}

    def level(node: str) -> int:
        if node not in depth:
            depth[node] = 0  # a guard only: the folded graph has no cycle
            depth[node] = 1 + max((level(t) for t in folded[node]), default=0)
        return depth[node]

    sys.setrecursionlimit(10_000)
    return max(level(group[m]) for m in graph)


def is_private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def private_owner(name: str) -> str:
    """The package that owns a private module: the parent of its first private part."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:i])
    return name


def package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def crosses(source: str, source_path: Path, target: str) -> bool:
    """Whether `source` importing `target` reaches into another package's private module.

    A root private module (`agentmesh._redaction`) is the package's own helper, and the
    task engine (`agentmesh._engine`) is the one private package every room may use: an
    import of either never crosses. The engine importing another package's private
    module (`agentmesh.checkpoints._store`) does."""
    if not is_private(target) or target == ENGINE or target.startswith(f"{ENGINE}."):
        return False
    owner = private_owner(target)
    return owner != "agentmesh" and package_of(source, source_path) != owner


def crossing_imports(found: dict[str, Path], written: dict[str, set[str]]) -> list[tuple[str, str]]:
    """`(source, target)` for each import, as written, of another package's private module."""
    return sorted(
        (source, target)
        for source, targets in written.items()
        for target in targets
        if crosses(source, found[source], target)
    )


def public_names(found: dict[str, Path]) -> tuple[int, int]:
    names: set[str] = set()
    spaces = 0
    for name, path in found.items():
        if is_private(name):
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                    value = node.value
                    if isinstance(value, ast.List | ast.Tuple):
                        spaces += 1
                        names.update(e.value for e in value.elts if isinstance(e, ast.Constant))
    return len(names), spaces


def measure() -> dict[str, object]:
    found = modules()
    known = set(found)
    defined = definitions(found)
    # A package's `__init__` re-exports: it sits above its modules by construction, so its
    # own imports are no design edges; what others import through it is resolved above.
    graph = {
        name: set() if path.name == "__init__.py" else imports_of(name, path, known, defined)
        for name, path in found.items()
    }
    circles = strongly_connected(graph)
    sizes = {
        name: len(path.read_text().splitlines())
        for name, path in found.items()
        if name not in EXEMPT_FROM_SIZE
    }
    largest = max(sizes, key=lambda n: sizes[n])
    root_private = [
        n
        for n in found
        if n.count(".") == 1 and n.split(".")[1].startswith("_") and found[n].name != "__init__.py"
    ]
    # Imports as written: a public name taken from a public package is no private import.
    written = {
        name: set() if path.name == "__init__.py" else imports_of(name, path, known, {})
        for name, path in found.items()
    }
    crossing = crossing_imports(found, written)
    names, spaces = public_names(found)
    long_functions = sorted(
        f"{name}.{node.name} ({node.end_lineno - node.lineno + 1})"
        for name, path in found.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    )
    return {
        "largest_module": largest,
        "largest_module_lines": sizes[largest],
        "modules_over_450_lines": sum(n > MAX_MODULE_LINES for n in sizes.values()),
        "functions_over_60_lines": len(long_functions),
        "import_circles": len(circles),
        "largest_circle": max((len(c) for c in circles), default=0),
        "circles": circles,
        "long_functions": long_functions,
        "floors": floors(graph, circles),
        "private_root_modules": len(root_private),
        "cross_package_private_imports": len(crossing),
        "crossing": [f"{source} -> {target}" for source, target in crossing],
        "public_names": names,
        "public_namespaces": spaces,
    }


if __name__ == "__main__":
    figures = measure()
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            if key not in ("circles", "long_functions", "crossing"):
                print(f"{key:32} {value}")
        circles = figures["circles"]
        assert isinstance(circles, list)
        for circle in circles:
            print("circle:", ", ".join(circle))
        crossing = figures["crossing"]
        assert isinstance(crossing, list)
        for line in crossing:
            print("crossing:", line)
