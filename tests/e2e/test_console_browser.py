"""The run console as a person uses it, in Debian's Chromium driven by Playwright.

`python -m agentmesh.console STORE` runs as a process of its own, as a user starts it;
the person logs in with the link it prints, lists the runs, opens the one that waits,
approves one refund and rejects the other; the application then resumes the run, and
the page shows the refund made once. Then a run in progress: its page's grid changes
as its events arrive, without a reload. Chromium is a system package (CI installs it);
Playwright drives it (`executable_path`), never a browser of its own. Outside CI the
test skips without either.

With AGENTMESH_CONSOLE_SCREENSHOTS=DIR the three main pages are saved there too (the
how-to page's pictures: `docs/how-to/img`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.checkpoints import SQLiteStore
from agentmesh.events import EventLog
from tests.console.desk import TICKETS, Desk
from tests.e2e.test_html_report import chromium

ROOT = Path(__file__).resolve().parents[2]


def playwright_api():  # type: ignore[no-untyped-def]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must install playwright (the dev extra)")
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module's tests: launching it is most of their time."""
    executable = chromium()
    sync_playwright = playwright_api()
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def waiting(tmp_path: Path) -> tuple[Path, Desk]:
    path = tmp_path / "checkpoints.sqlite"
    desk = Desk()

    async def start() -> None:
        async with SQLiteStore(path) as store:
            await desk.coordinator(store).run(TICKETS[:1], run_id="quiet-run")
            await desk.coordinator(store).run(TICKETS, run_id="refunds")

    # In a thread of its own: the module's browser (Playwright's sync API) runs a loop here.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, start()).result(60)
    return path, desk


@pytest.fixture
def console(waiting: tuple[Path, Desk]) -> Iterator[tuple[str, str]]:
    """The console's process on a free port: (base URL, login link)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "agentmesh.console", str(waiting[0]), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        printed = "".join(process.stdout.readline() for _ in range(3))
        link = re.search(r"http://\S+/login/\S+", printed)
        assert link is not None, printed
        yield f"http://127.0.0.1:{port}", link.group(0)
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def test_a_person_approves_one_refund_and_rejects_another_and_it_is_made_once(
    waiting: tuple[Path, Desk], console: tuple[str, str], tmp_path: Path, browser: Any
) -> None:
    path, desk = waiting
    url, login = console
    shots = Path(os.environ.get("AGENTMESH_CONSOLE_SCREENSHOTS") or tmp_path)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(login)  # the one-time link: a session cookie, then the runs page
    page.wait_for_selector("#runs")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 2
    assert "refunds" in rows.nth(0).inner_text()
    assert "waiting for a person" in rows.nth(0).inner_text()
    page.screenshot(path=str(shots / "console-runs.png"))

    page.click("text=refunds")
    page.wait_for_selector("#grid")
    assert page.inner_text("#status") == "waiting for a person"
    page.screenshot(path=str(shots / "console-run.png"), full_page=True)

    page.click("nav >> text=Approvals")
    questions = page.locator(".approval")
    assert questions.count() == 2
    page.screenshot(path=str(shots / "console-approvals.png"), full_page=True)
    big = page.locator(".approval", has_text="refund of 900")
    big.locator("input[name=by]").fill("ann")
    big.locator("button[value=approve]").click()
    page.wait_for_selector(".answered")
    assert "Answered Approve() by ann" in page.inner_text(".approval:has-text('900')")

    page.goto(url + "/approvals")
    other = page.locator(".approval", has_text="refund of 600")
    other.locator("input[name=by]").fill("bob")
    other.locator("input[name=reason]").fill("a duplicate ticket")
    other.locator("button[value=reject]").click()
    page.wait_for_selector(".answered:has-text('bob')")
    assert page.inner_text("#status") == "answered, waiting to resume"

    async def go_on() -> None:  # the application that owns the coordinator
        async with SQLiteStore(path) as store:
            await desk.coordinator(store).resume("refunds")

    # In a thread of its own: Playwright's sync API runs a loop in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as application:
        application.submit(asyncio.run, go_on()).result(60)
    page.reload()
    assert page.inner_text("#status") == "finished"
    findings = page.inner_text("#findings")
    assert findings.count("refunded 900 on B-2") == 1
    assert "refunded 600" not in findings
    assert "rejected by a person: a duplicate ticket" in page.inner_text("#coverage")
    assert desk.refunds == [("A-1", 40), ("A-1", 40), ("B-2", 900)]


def test_a_person_watches_a_live_runs_grid_change_without_reloading(
    waiting: tuple[Path, Desk], console: tuple[str, str], browser: Any
) -> None:
    """A run goes on in another process's place (a thread with its own store); its page,
    opened while one task waits, shows that task's cell turn `covered` when it ends, and
    the run `finished`, from the event log alone: the page is never reloaded."""
    path, _desk = waiting
    url, _login = console
    gate = threading.Event()

    @subagent(name="live")
    async def live(task: Task, ctx: Context) -> str:
        if task.topic == "slow":
            await asyncio.to_thread(gate.wait, 60)
        return f"answer to {task.query}"

    async def run() -> None:
        async with SQLiteStore(path) as store:
            tasks = [Task(query="quick", topic="quick"), Task(query="slow", topic="slow")]
            await Coordinator([live], store=store, event_log=EventLog()).run(
                tasks, run_id="live-run"
            )

    cell = 'td[data-topic="slow"][data-source="live"]'
    with concurrent.futures.ThreadPoolExecutor(1) as application:
        running = application.submit(asyncio.run, run())
        try:
            page = browser.new_page()
            for _ in range(600):  # until the run's plan is in the store (30 s when loaded)
                if page.goto(url + "/runs/live-run").ok:
                    break
                time.sleep(0.05)
            page.wait_for_selector(cell)
            assert page.inner_text("#status") == "running"
            assert page.inner_text(cell) != "covered"
            page.evaluate("window.notReloaded = true")
            gate.set()
            page.wait_for_function(
                f"document.querySelector('{cell}').innerText === 'covered'", timeout=15_000
            )
            page.wait_for_function(
                "document.getElementById('status').innerText === 'finished'", timeout=15_000
            )
            assert page.evaluate("window.notReloaded") is True
            assert "run finished" in page.inner_text("#events")
        finally:
            gate.set()
            running.result(60)
