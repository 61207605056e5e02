"""What `pip install` sees: the distribution's name, its licence, and the install lines we print.

The wheel itself is built, installed into a fresh venv and imported by
`python3 dev.py wheel-check` (scripts/wheel_check.py), which CI runs after the tests.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# `agentmesh` on PyPI is somebody else's placeholder: an install line naming it, with or
# without extras, installs that instead of us.
OLD_INSTALL = re.compile(r"pip install\s+['\"]?agentmesh(?![-\w])")
OLD_EXTRA = re.compile(r"(?<![-\w/.])agentmesh\[")
SKIPPED = {
    ".git",
    ".venv",
    ".agentmesh",
    ".bench-cache",
    ".pytest_cache",
    "site",
    "build",
    "dist",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".yml", ".yaml", ".sh", ""}


def repository_text_files() -> list[Path]:
    """Every text file of the checkout a user or an error message could quote."""
    found = []
    for path in ROOT.rglob("*"):
        parts = set(path.relative_to(ROOT).parts)
        if parts & SKIPPED or any(part.endswith(".egg-info") for part in parts):
            continue
        if path.is_file() and path.suffix in TEXT_SUFFIXES and path.stat().st_size < 2_000_000:
            found.append(path)
    return found


class TestDistribution:
    def test_the_distribution_is_agentmesh_failwell(self) -> None:
        """`pip install agentmesh-failwell` is the name; the import name stays agentmesh."""
        assert PYPROJECT["project"]["name"] == "agentmesh-failwell"
        assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["agentmesh*"]

    def test_the_licence_is_an_spdx_string_with_its_file(self) -> None:
        """An SPDX `license` string and a LICENSE file: setuptools warns about a table."""
        assert PYPROJECT["project"]["license"] == "MIT"
        assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
        licence = (ROOT / "LICENSE").read_text()
        assert licence.startswith("MIT License")
        assert "the agentmesh authors" in licence

    def test_the_build_backend_reads_spdx_strings(self) -> None:
        """setuptools before 77 does not know `license-files`, so the build pins it."""
        (setuptools,) = [
            Requirement(spec)
            for spec in PYPROJECT["build-system"]["requires"]
            if Requirement(spec).name == "setuptools"
        ]
        assert not setuptools.specifier.contains(Version("76.1"))
        assert setuptools.specifier.contains(Version("77.0"))

    def test_own_extras_name_the_new_distribution(self) -> None:
        """The `dev` extra pulls the other extras of agentmesh-failwell, not of `agentmesh`."""
        names = {
            Requirement(spec).name for spec in PYPROJECT["project"]["optional-dependencies"]["dev"]
        }
        assert "agentmesh" not in names
        assert "agentmesh-failwell" in names


class TestInstallLines:
    def test_no_install_line_names_the_old_distribution(self) -> None:
        """README, docs, examples, error messages: every install line says agentmesh-failwell."""
        stale = [
            f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in repository_text_files()
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if OLD_INSTALL.search(line) or OLD_EXTRA.search(line)
        ]
        assert stale == []
