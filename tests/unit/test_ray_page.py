"""The Ray page's table of features names, in each cell, a test that exists."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operations" / "ray.md"
NODE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)::(\w+)`")


def table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading` (header and rule left out)."""
    section = PAGE.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]


@functools.cache  # the table names a few files many times: each is parsed once
def methods_of(path: str) -> frozenset[tuple[str, str]]:
    """(class, test) of every test method of a test file."""
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(
        (node.name, item.name)
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and item.name.startswith("test_")
    )


class TestFeatureTable:
    def test_every_row_has_a_test_on_ray_and_one_locally_or_says_why_not(self) -> None:
        rows = table("Feature by feature")
        assert len(rows) >= 15
        for feature, local, on_ray, store in rows:
            assert NODE.search(on_ray), f"{feature}: no Ray test named"
            assert NODE.search(local) or local.startswith("n/a: "), f"{feature}: no local test"
            assert store in ("shared", "none", "—"), f"{feature}: store {store!r}"

    def test_every_test_named_exists(self) -> None:
        named = [
            match.groups()
            for row in table("Feature by feature")
            for cell in row[1:3]
            for match in NODE.finditer(cell)
        ]
        missing = [
            "::".join(node) for node in named if (node[1], node[2]) not in methods_of(node[0])
        ]
        assert named
        assert missing == []

    def test_the_features_that_need_a_shared_store_are_those_the_page_lists(self) -> None:
        """Approvals, resume and checkpoints; nothing else needs one."""
        shared = [row[0] for row in table("Feature by feature") if row[3] == "shared"]
        assert shared
        assert all(
            any(word in feature for word in ("approv", "resume", "checkpoint", "person"))
            for feature in shared
        )
