"""Every public name has an entry on a reference page of the docs site.

The pages under `docs/reference/` hold mkdocstrings directives (`::: agentmesh.events`,
maybe with `options: members:` or `filters:`). Building the site to look is slow, so this
test loads the package with griffe (what mkdocstrings itself reads) and selects what each
directive renders by the same rules: an explicit `members` list wins; otherwise the
`filters`, a member's being public (its module's `__all__` for an import) and its having a
docstring (`show_if_no_docstring` is off).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import griffe
import pytest
import yaml

from tests.test_exported_members import PUBLIC_API

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*\n((?:(?:[ \t]+.*)?\n)*)", re.MULTILINE)


def handler_options() -> dict[str, Any]:
    """The site-wide options of the python handler (mkdocs.yml)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            options: dict[str, Any] = plugin["mkdocstrings"]["handlers"]["python"]["options"]
            return options
    raise AssertionError("mkdocs.yml configures no mkdocstrings python handler")


def directives() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """`(page, identifier, options)` for each `::: identifier` of the reference pages."""
    for page in sorted(REFERENCE.glob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text()):
            block = yaml.safe_load(match.group(2).replace("\t", "    ")) if match.group(2) else None
            yield page.name, match.group(1), (block or {}).get("options") or {}


def kept_by_filters(name: str, filters: list[str]) -> bool:
    """mkdocstrings' filter rule: the last matching pattern decides (`!` excludes)."""
    keep = None
    kinds = set()
    for pattern in filters:
        exclude = pattern.startswith("!")
        kinds.add(exclude)
        if re.search(pattern.removeprefix("!"), name):
            keep = not exclude
    return kinds != {False} if keep is None else keep


def rendered(package: griffe.Module) -> dict[str, str]:
    """Canonical path of each module-level object rendered -> the page that renders it."""
    defaults = handler_options()
    found: dict[str, str] = {}
    for page, identifier, local in directives():
        options = {**defaults, **local}
        obj = package if identifier == "agentmesh" else package[identifier.split(".", 1)[1]]
        if not obj.is_module:
            found.setdefault(obj.canonical_path, page)
            continue
        members = options.get("members")
        for name, member in obj.members.items():
            if isinstance(members, list):
                keep = name in members
            else:
                keep = (
                    kept_by_filters(name, options.get("filters", []))
                    and (not member.is_imported or member.is_public)
                    and (options.get("show_if_no_docstring", False) or member.has_docstrings)
                )
            if keep:
                found.setdefault(member.canonical_path, page)
    return found


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    loaded = griffe.load("agentmesh", search_paths=[str(ROOT)], resolve_aliases=True)
    assert isinstance(loaded, griffe.Module)
    return loaded


def public_objects(package: griffe.Module) -> dict[str, str]:
    """Canonical path of every public name -> one public spelling of it."""
    found: dict[str, str] = {}
    for module, names in PUBLIC_API.items():
        space = package if module == "agentmesh" else package[module.split(".", 1)[1]]
        for name in sorted(names):
            found.setdefault(space[name].canonical_path, f"{module}.{name}")
    return found


class TestReferencePages:
    def test_every_public_name_has_a_reference_entry(self, package: griffe.Module) -> None:
        """Each name of a public `__all__` is rendered, by itself, on some reference page."""
        shown = rendered(package)
        missing = sorted(
            spelling for path, spelling in public_objects(package).items() if path not in shown
        )
        assert missing == []

    def test_every_directive_names_a_public_module(self) -> None:
        """A reference page documents public modules only, never an underscore path."""
        wrong = [
            f"{page}: {identifier}"
            for page, identifier, _ in directives()
            if identifier.split(".")[0] != "agentmesh"
            or any(part.startswith("_") for part in identifier.split("."))
        ]
        assert wrong == []

    def test_an_explicit_members_list_names_only_exported_names(self) -> None:
        """A `members:` list cannot name what the module does not export (a stale entry)."""
        stale = [
            f"{page}: {identifier}.{name}"
            for page, identifier, options in directives()
            if isinstance(options.get("members"), list)
            for name in options["members"]
            if name not in importlib.import_module(identifier).__all__
        ]
        assert stale == []

    def test_every_reference_page_is_in_the_nav(self) -> None:
        """A reference page the nav leaves out is a page nobody finds."""
        nav = (ROOT / "mkdocs.yml").read_text()
        assert [p.name for p in REFERENCE.glob("*.md") if f"reference/{p.name}" not in nav] == []
