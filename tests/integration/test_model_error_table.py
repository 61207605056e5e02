"""docs/reference/model-errors.md is one table of every provider's errors, each row naming
the test that drives it: every test it names exists, so a renamed test fails here rather
than leaving the page pointing at nothing."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "reference" / "model-errors.md"
_REFERENCE = re.compile(r"`([^`]+)`")


def rows() -> list[list[str]]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    table = [line for line in lines if line.startswith("| ") and not line.startswith("| ---")]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table[1:]]


def named_tests() -> list[str]:
    """Every test the table names, each in full: `::TestX` goes on from the file before it,
    `::test_x` from the class before it, `[id]` from the test before it."""
    names: list[str] = []
    for row in rows():
        previous = ""
        for reference in _REFERENCE.findall(row[-1]):
            if reference.startswith("::Test"):
                reference = previous.split("::")[0] + reference
            elif reference.startswith("::"):
                parts = previous.split("[")[0].split("::")
                owner = parts[:-1] if parts[-1].startswith("test_") else parts
                reference = "::".join(owner) + reference
            elif reference.startswith("["):
                reference = previous.split("[")[0] + reference
            names.append(reference)
            previous = reference
    return names


def parameter_ids(test: Any) -> set[str]:
    ids: set[str] = set()
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize":
            given = mark.kwargs.get("ids") or [v for v in mark.args[1] if isinstance(v, str)]
            ids.update(given)
    return ids


@pytest.mark.parametrize("name", sorted(set(named_tests())))
def test_each_test_the_table_names_exists(name: str) -> None:
    path, _, parameter = name.partition("[")
    file, *attributes = path.split("::")
    assert re.fullmatch(r"test_\w+\.py", file), name
    found: Any = importlib.import_module(f"tests.integration.{file.removesuffix('.py')}")
    for attribute in attributes:
        assert hasattr(found, attribute), f"{name}: no {attribute} in {found!r}"
        found = getattr(found, attribute)
    if parameter:
        assert parameter.rstrip("]") in parameter_ids(found), name


def test_every_row_names_a_test_and_every_provider_says_what_an_unknown_error_is() -> None:
    table = rows()
    assert all(len(row) == 6 and _REFERENCE.search(row[-1]) for row in table), table
    unknown = {row[0]: row[3] for row in table if row[1] == "unknown"}
    assert set(unknown) == {"Anthropic", "OpenAI", "Gemini"}
    assert all(cell.startswith("`other` / `provider_error`") for cell in unknown.values())
