"""Lean core (issue 18): this tree against a baseline commit, side by side in one run.

    python -m benchmarks --only lean                  # baseline: the commit before issue 18
    python -m benchmarks.lean --baseline REF --rounds 5

Each measurement runs in a fresh interpreter whose `sys.path` starts with one tree's
copy of agentmesh (the baseline is extracted with `git archive` into
`.bench-cache/<commit>/`); the two trees alternate round by round. The probe below uses
only public names that both trees have, and each ratio is taken inside one process
(agentmesh against raw `asyncio.gather` measured in the same interpreter, same round).

The dispatch work suspends once (`await asyncio.sleep(0)`) in every task, in raw
gather's coroutine too: a real subagent always awaits I/O, and a task that never
suspends hides what in-flight objects cost the garbage collector. Times are CPU time
(`time.process_time`), medians of the rounds.

Each tree's sources are compiled once (`compileall` into the normal `__pycache__`) before
any child runs, and the children may read that bytecode: a user who ran `pip install` has
it, so the import figure is what they get, not the cost of compiling our sources.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench-cache"
BASELINE = "d1c0eab"
"""The last commit before issue 18 (lean core): the "today" column."""

VENDOR_MODULES = ("anthropic", "werkzeug", "httpx2", "httpx")
PROBE_N = 10_000
RESEARCH_QUESTION = "How does the with statement handle exceptions in context managers?"


def tree(ref: str) -> Path:
    """A checkout of `ref`'s library, examples and benchmarks, made once and kept."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    target = CACHE / commit
    if (target / "agentmesh" / "__init__.py").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "agentmesh", "examples"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as extracted:
        extracted.extractall(target, filter="data")
    return target


def compiled(source: Path) -> Path:
    """`source` with bytecode for its library and examples, as `pip install` leaves it."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "agentmesh", "examples"],
        cwd=source,
        capture_output=True,
        check=True,
    )
    return source


def _python(source: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter that imports agentmesh from `source`."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=source,
        env=env,
        timeout=900,
    )


def _json_of(completed: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    if completed.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


_IMPORT_PROBE = """
import gc, json, sys, time
started = time.perf_counter()
import agentmesh
wall = time.perf_counter() - started
vendor = [m for m in {vendor!r} if m in sys.modules]
print(json.dumps({{"wall": wall, "gc_objects": len(gc.get_objects()), "vendor": vendor,
                  "file": agentmesh.__file__}}))
"""


def measure_import(source: Path) -> dict[str, Any]:
    """Fresh-interpreter wall time of `import agentmesh`, objects the GC tracks after it."""
    completed = _python(source, _IMPORT_PROBE.format(vendor=VENDOR_MODULES))
    result = _json_of(completed, "import probe")
    if not result["file"].startswith(str(source)):
        raise RuntimeError(f"imported {result['file']}, not the tree at {source}")
    return result


def import_time_top(source: Path, top: int = 5) -> list[tuple[str, float]]:
    """The largest cumulative entries of `python -X importtime -c 'import agentmesh'` (ms)."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import agentmesh"],
        capture_output=True,
        text=True,
        check=True,
        cwd=source,
        env=env,
    )
    rows: list[tuple[str, float]] = []
    for line in completed.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if name.strip() and not name.startswith("  "):  # top-level imports only
            rows.append((name.strip(), int(cumulative) / 1000))
    rows.sort(key=lambda row: -row[1])
    return rows[:top]


# The probe: raw gather and Coordinator.run on the same work, in one process, CPU time.
_DISPATCH_PROBE = """
import asyncio, gc, json, sys, time
from agentmesh import Coordinator, RetryPolicy, Task, TransientError, subagent

n, failure_rate = int(sys.argv[1]), float(sys.argv[2])
queries = [str(i) for i in range(n)]
every = round(1 / failure_rate) if failure_rate else 0
failing = frozenset(queries[::every]) if every else frozenset()

async def no_sleep(seconds):
    pass

async def step(query, attempt):
    await asyncio.sleep(0)
    if attempt == 1 and query in failing:
        raise TransientError("injected", error_type="unavailable")
    return query

@subagent(name="worker", retry=RetryPolicy(max_attempts=3, sleep=no_sleep))
async def worker(task, ctx):
    return await step(task.query, ctx.attempt)

coordinator = Coordinator([worker])
tasks = [Task(query=q) for q in queries]

async def raw():
    return await asyncio.gather(*(step(q, 1) for q in queries), return_exceptions=True)

async def mesh():
    report = await coordinator.run(tasks, run_id="bench")
    assert len(report.coverage) == n and report.coverage_ratio == 1.0
    return report

def cpu(runner):
    gc.collect()
    async def timed():
        started = time.process_time()
        await runner()
        return time.process_time() - started
    return asyncio.run(timed())

cpu(raw); cpu(mesh)  # warm up: first-call caches of both
order = [raw, mesh] if int(sys.argv[3]) % 2 == 0 else [mesh, raw]
seconds = {runner.__name__: cpu(runner) for runner in order}
print(json.dumps({key: 1e6 * value / n for key, value in seconds.items()}))
"""

_MEMORY_PROBE = """
import asyncio, gc, json, sys
from agentmesh import Coordinator, RetryBudget, RetryPolicy, Task, subagent

n = int(sys.argv[1])
waiting = 0

def rss():
    import os
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

async def main():
    global waiting
    release, everyone = asyncio.Event(), asyncio.Event()

    async def no_sleep(seconds):
        pass

    @subagent(name="worker", retry=RetryPolicy(max_attempts=3, sleep=no_sleep))
    async def worker(task, ctx):
        global waiting
        waiting += 1
        if waiting == n:
            everyone.set()
        await release.wait()
        return task.query

    coordinator = Coordinator([worker], max_concurrency=n, retry_budget=RetryBudget.unlimited())
    tasks = [Task(query=str(i)) for i in range(n)]
    gc.collect()
    before = rss()
    job = asyncio.ensure_future(coordinator.run(tasks, run_id="bench"))
    await everyone.wait()
    in_flight = rss()
    release.set()
    await job
    print(json.dumps({"bytes_per_task": (in_flight - before) / n}))

asyncio.run(main())
"""


def measure_dispatch(
    source: Path, n: int, failure_rate: float, round_number: int
) -> dict[str, Any]:
    completed = _python(source, _DISPATCH_PROBE, str(n), str(failure_rate), str(round_number))
    result = _json_of(completed, "dispatch probe")
    result["ratio"] = result["mesh"] / result["raw"]
    return result


def measure_memory(source: Path, n: int) -> dict[str, Any]:
    return _json_of(_python(source, _MEMORY_PROBE, str(n)), "memory probe")


def measure_research(source: Path) -> float | None:
    """Wall seconds of the offline research example, interpreter start to exit."""
    if not (source / "examples" / "research_agent").exists():
        return None
    env = {**os.environ, "PYTHONPATH": str(source)}
    env.pop("ANTHROPIC_API_KEY", None)
    checkpoints = CACHE / f"research-{source.name}.sqlite"
    started = time.perf_counter()
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.research_agent",
            RESEARCH_QUESTION,
            "--offline",
            "-q",
            "--checkpoints",
            str(checkpoints),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=source,
        env=env,
        timeout=300,
    )
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(f"research example in {source} failed:\n{completed.stderr[-3000:]}")
    return wall


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def run(baseline: str = BASELINE, rounds: int = 5, n: int = PROBE_N) -> dict[str, Any]:
    """Every lean-core figure for the baseline and this tree, alternating round by round."""
    trees = {"baseline": compiled(tree(baseline)), "now": compiled(ROOT)}
    samples: dict[str, dict[str, list[float]]] = {
        name: {
            "import_wall": [],
            "happy_us": [],
            "happy_ratio": [],
            "failures_us": [],
            "failures_ratio": [],
            "memory_kib": [],
            "research_wall": [],
        }
        for name in trees
    }
    facts: dict[str, dict[str, Any]] = {}
    for round_number in range(rounds):
        order = list(trees.items())
        if round_number % 2:
            order.reverse()
        for name, source in order:
            cell = samples[name]
            imported = measure_import(source)
            facts[name] = {
                "gc_objects": imported["gc_objects"],
                "vendor_imported": imported["vendor"],
            }
            cell["import_wall"].append(imported["wall"])
            for scenario, rate in (("happy", 0.0), ("failures", 0.1)):
                measured = measure_dispatch(source, n, rate, round_number)
                cell[f"{scenario}_us"].append(measured["mesh"])
                cell[f"{scenario}_ratio"].append(measured["ratio"])
            if round_number < 3:  # deterministic to a few percent
                cell["memory_kib"].append(measure_memory(source, n)["bytes_per_task"] / 1024)
                research = measure_research(source)
                if research is not None:
                    cell["research_wall"].append(research)
            print(".", end="", flush=True)
    print()
    # The ref under its own key: "baseline" names that tree's figures below.
    results: dict[str, Any] = {"baseline_ref": baseline, "n": n, "rounds": rounds}
    for name, source in trees.items():
        results[name] = {
            **facts[name],
            **{key: _median(values) for key, values in samples[name].items() if values},
            "samples": samples[name],
            "import_top_ms": import_time_top(source),
        }
    return results


TARGETS = (
    ("import agentmesh, wall (s)", "import_wall", 0.200, "{:.3f}"),
    ("gc-tracked objects after import", "gc_objects", 40_000, "{:,.0f}"),
    ("Coordinator.run happy path, µs/task", "happy_us", None, "{:.1f}"),
    ("  × raw asyncio.gather", "happy_ratio", 5.0, "{:.1f}×"),
    ("Coordinator.run 10% transient, µs/task", "failures_us", None, "{:.1f}"),
    ("  × raw asyncio.gather", "failures_ratio", 6.0, "{:.1f}×"),
    ("memory per in-flight task (KiB)", "memory_kib", 6.0, "{:.2f}"),
    ("research example offline, wall (s)", "research_wall", 1.2, "{:.2f}"),
)


def rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per figure: the baseline's, this tree's, the target, met or not."""
    lines = []
    for title, key, target, fmt in TARGETS:
        before = results["baseline"].get(key)
        now = results["now"].get(key)
        met = "" if target is None or now is None else ("yes" if now <= target else "NO")
        lines.append(
            [
                title,
                "—" if before is None else fmt.format(before),
                "—" if now is None else fmt.format(now),
                "" if target is None else f"≤ {fmt.format(target)}",
                met,
            ]
        )
    vendor = [", ".join(results[name]["vendor_imported"]) or "none" for name in ("baseline", "now")]
    lines.append(["vendor SDKs loaded by the import", *vendor, "none", ""])
    return lines


def print_table(results: dict[str, Any]) -> None:
    from benchmarks._harness import table

    headers = ["figure", f"baseline {results['baseline_ref']}", "this tree", "target", "met"]
    print(table(headers, rows(results), f"Lean core (issue 18), {results['n']:,} tasks"))
    print()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lean", description=__doc__)
    parser.add_argument("--baseline", default=BASELINE, help="git ref of the 'today' column")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-n", type=int, default=PROBE_N, help="tasks per dispatch run")
    args = parser.parse_args(argv)
    results = run(args.baseline, args.rounds, args.n)
    print_table(results)


if __name__ == "__main__":
    main()
