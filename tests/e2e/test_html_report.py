"""The HTML report in a real browser: Debian's headless Chromium parses and paints it.

`--dump-dom` gives the document as Chromium built it (not as we wrote it), and a
screenshot shows that each status cell is painted in its colour. Chromium is a system
package: CI installs it (`apt-get install -y chromium`); elsewhere the test is skipped
when it is missing.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from agentmesh import Report
from agentmesh.envelope import PartialResults
from agentmesh.report import CoverageEntry, CoverageStatus
from examples.research_agent.planner import Plan, Subtopic
from examples.research_agent.rendering import RunInfo, to_html
from examples.research_agent.terminal import coverage_grid
from tests.e2e.conftest import Run

# The cell colours of the page's grid, as RGB.
COLOURS = {
    "covered": (0x2E, 0x7D, 0x32),
    "empty": (0x15, 0x65, 0xC0),
    "partial": (0xF9, 0xA8, 0x25),
    "gap": (0xC6, 0x28, 0x28),
    "escalated": (0x8E, 0x24, 0xAA),
    "unsure": (0x82, 0x77, 0x17),  # partial, unsure its passages answer: not a failure
}


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def browse(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", *flags, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


class _Cells(HTMLParser):
    """The grid's status cells, the findings and the gap rows of the parsed page."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[str] = []
        self.findings = 0
        self.gap_rows = 0
        self.links: list[str] = []
        self._table: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "table":
            self._table = attributes.get("id")
        elif tag == "td" and "status" in classes:
            self.statuses.append(next(c for c in classes if c != "status"))
        elif tag == "div" and "finding" in classes:
            self.findings += 1
        elif tag == "tr" and self._table == "gaps":
            self.gap_rows += 1
        for name in ("href", "src"):
            if attributes.get(name):
                self.links.append(str(attributes[name]))


class TestHtmlReport:
    def test_dom_has_the_grid_findings_and_gaps(self, flaky: Run) -> None:
        """Chromium's DOM holds one cell per coverage entry, every finding, every gap."""
        run = flaky
        assert run.returncode == 0, run.stderr
        dom = browse(run.html, "--dump-dom").stdout
        cells = _Cells()
        cells.feed(dom)
        assert cells.statuses == [entry["status"] for entry in run.report["coverage"]]
        assert cells.findings == len(run.report["findings"])
        problems = [e for e in run.report["coverage"] if e["status"] not in ("covered", "empty")]
        assert cells.gap_rows == 1 + len(problems)  # the header row, then one per problem
        assert "permission" in dom
        assert "preliminary" in dom

    def test_self_contained(self, flaky: Run) -> None:
        """No external asset: no link, no script, no source URL to fetch."""
        html = flaky.html.read_text(encoding="utf-8")
        cells = _Cells()
        cells.feed(html)
        assert cells.links == []
        assert "<script" not in html
        assert "<link" not in html

    def test_cells_painted_in_their_colours(self, flaky: Run, tmp_path: Path) -> None:
        """The screenshot shows each status of the report painted in its own colour."""
        shot = tmp_path / "page.png"
        # Half scale keeps the picture small to decode; a cell is still ~40x14 pixels.
        browse(
            flaky.html,
            *("--hide-scrollbars", "--window-size=1100,700", "--force-device-scale-factor=0.5"),
            f"--screenshot={shot}",
        )
        pixels = _rgb_pixels(shot.read_bytes())
        present = {entry["status"] for entry in flaky.report["coverage"]}
        assert present == {"covered", "partial", "escalated", "empty"}
        for status in present:
            painted = sum(1 for rgb in pixels if _near(rgb, COLOURS[status]))
            # Cells plus the legend's swatch; the swatch alone is ~50 pixels.
            assert painted > 200, f"{status} cells are not painted {COLOURS[status]}"


class TestUnsure:
    """A partial entry unsure of its passages did not fail: it is not painted as one."""

    def test_unsure_has_its_own_colour_and_label(self, tmp_path: Path) -> None:
        page = tmp_path / "unsure.html"
        page.write_text(to_html(_unsure_and_failed(), _INFO), encoding="utf-8")
        dom = browse(page, "--dump-dom").stdout
        cells = _Cells()
        cells.feed(dom)
        assert cells.statuses == ["partial", "partial"]  # the status, as the JSON says
        assert '<td class="status partial unsure"' in dom
        assert ">unsure</td>" in dom
        assert "partial (unsure)" in dom  # its row in the gaps table
        shot = tmp_path / "unsure.png"
        browse(page, "--hide-scrollbars", "--window-size=900,500", f"--screenshot={shot}")
        pixels = _rgb_pixels(shot.read_bytes())
        for status in ("unsure", "partial"):
            painted = sum(1 for rgb in pixels if _near(rgb, COLOURS[status]))
            assert painted > 800, f"{status} cells are not painted {COLOURS[status]}"

    def test_the_terminal_grid_says_unsure_too(self) -> None:
        console = Console(file=io.StringIO(), record=True, width=100, color_system="truecolor")
        console.print(coverage_grid(_unsure_and_failed(), ["with"], ["pydoc", "stdlib"]))
        text = console.export_text(clear=False)
        (row,) = [line for line in text.splitlines() if "with" in line]
        assert row.split() == ["│", "with", "│", "unsure", "│", "partial", "│"]
        assert "passages found that may not answer" in text
        # Painted olive, as on the page, not in the failures' gold.
        assert "background-color: #827717" in console.export_html(inline_styles=True)


_INFO = RunInfo(
    plan=Plan("q", (Subtopic("with", "with statement"),)),
    sources=("pydoc", "stdlib"),
    mode="offline",
    seed=1,
)


def _unsure_and_failed() -> Report:
    """pydoc unsure of what it found; stdlib failed after reading one document."""
    unsure = CoverageEntry(
        topic="with",
        source="pydoc",
        status=CoverageStatus.PARTIAL,
        reason="unsure: the passages found do not answer the question",
        attempted_query="with statement",
        is_retryable=False,
    )
    failed = CoverageEntry(
        topic="with",
        source="stdlib",
        status=CoverageStatus.PARTIAL,
        reason="timeout after local retries",
        attempted_query="with statement",
        is_retryable=True,
        partial=PartialResults(completed=("contextlib",), pending=("abc",)),
    )
    return Report(run_id="r", findings=(), coverage=(unsure, failed), escalations=(), records=())


def _near(rgb: tuple[int, int, int], target: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 3 for a, b in zip(rgb, target, strict=True))


def _rgb_pixels(png: bytes) -> list[tuple[int, int, int]]:
    """The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, data, header = 8, b"", b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        body = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            data += body
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8
    assert colour in (2, 6)
    assert interlace == 0
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = zlib.decompress(data)
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = row[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                row[x] = (row[x] + left) & 0xFF
            elif kind == 2:
                row[x] = (row[x] + up) & 0xFF
            elif kind == 3:
                row[x] = (row[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[x] = (row[x] + best) & 0xFF
        rows.append(row)
        previous = row
    return [(row[x], row[x + 1], row[x + 2]) for row in rows for x in range(0, stride, channels)]
