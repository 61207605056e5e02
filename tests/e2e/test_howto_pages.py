"""The how-to pages are complete where they are read: on GitHub, on the site, after pip.

Each page holds its program whole (GitHub showed a bare `--8<--` include line instead),
the same text as the file under examples/howto that tests/e2e/test_howto.py runs, and
the program needs nothing from the repository: a user who installed with pip, who has no
`examples/`, saves it from the page and runs it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "how-to").glob("*.md"))
PROGRAMS = sorted(p for p in (ROOT / "examples" / "howto").glob("*.py") if p.name != "__init__.py")
MARKER = re.compile(r"<!-- program: (\S+) -->")
SYNC = "python3 dev.py howto"


def marked() -> dict[Path, Path]:
    """Each program named by a page's marker, and the page."""
    return {ROOT / path: page for page in PAGES for path in MARKER.findall(page.read_text("utf-8"))}


def block_after_marker(page: Path, program: Path) -> str:
    """The code block that follows `program`'s marker on `page`."""
    text = page.read_text("utf-8")
    start = text.index(f"<!-- program: {program.relative_to(ROOT)} -->")
    opened = text.index("```python\n", start) + len("```python\n")
    return text[opened : text.index("\n```\n", opened) + 1]


class TestPagesHoldTheirPrograms:
    def test_no_page_includes_a_file(self) -> None:
        """No how-to page has a snippet include, which GitHub shows as a bare line."""
        including = [page.name for page in PAGES if "--8<--" in page.read_text("utf-8")]
        assert including == []

    def test_every_program_is_on_a_page(self) -> None:
        """Each program under examples/howto is named by a page's marker."""
        assert sorted(marked()) == PROGRAMS

    @pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
    def test_the_page_holds_the_program_whole(self, program: Path) -> None:
        """The block on the page is the file, character for character."""
        page = marked()[program]
        shown = block_after_marker(page, program)
        assert shown == program.read_text("utf-8"), f"{page.name} is stale: run `{SYNC}`"


class TestProgramsStandAlone:
    @pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
    def test_a_program_imports_nothing_from_the_repository(self, program: Path) -> None:
        """A pip user has no `examples` nor `tests` package: the programs import neither."""
        tree = ast.parse(program.read_text("utf-8"))
        imported = {
            alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            "." if node.level else (node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
        }  # fmt: skip
        assert imported & {"examples", "tests", "."} == set()

    @pytest.mark.parametrize(
        ("program", "shows"),
        [
            ("support_hub.py", "refund    escalated"),
            ("checkpointed_pipeline.py", "emails in the outbox: 1"),
        ],
    )
    def test_a_program_saved_from_its_page_runs(
        self, program: str, shows: str, tmp_path: Path
    ) -> None:
        """Saved from the page as a file and run with `python FILE`, the program works."""
        source = ROOT / "examples" / "howto" / program
        saved = tmp_path / program
        saved.write_text(block_after_marker(marked()[source], source), encoding="utf-8")
        run = subprocess.run(
            [sys.executable, saved.name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert shows in run.stdout
