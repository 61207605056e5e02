"""Run every benchmark side by side, print the tables and write them as JSON.

    python -m benchmarks                 # the full run (a few minutes)
    python -m benchmarks --quick         # smaller sizes and fewer rounds (under a minute)
    python -m benchmarks --only dispatch,memory --json /tmp/results.json

Every comparison is made in this one invocation: contenders alternate round by round
(in a rotating order), each table cell is the median with the min-max of the rounds,
and ratios are to raw `asyncio.gather` measured in the same rounds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import (
    cost_cap,
    dispatch,
    event_log,
    lean,
    logging_cost,
    memory,
    overload,
    rate,
    rate_limits,
    ray_cluster,
    retry_storm,
    stores,
)
from benchmarks._harness import Samples, machine, rotated, spread, table, time_call

SECTIONS = (
    "lean",
    "dispatch",
    "memory",
    "rate",
    "storm",
    "logging",
    "overload",
    "costcap",
    "ratelimits",
    "stores",
    "ray",
    "eventlog",
)
# name -> (share of first attempts that fail, whether every attempt suspends once)
SCENARIOS = {
    "happy": (0.0, False),
    "failures": (0.1, False),
    "happy_suspending": (0.0, True),
    "failures_suspending": (0.1, True),
}
SCENARIO_TITLES = {
    "happy": "Dispatch, happy path (nothing fails)",
    "failures": "Dispatch, 10% of first attempts fail with a transient error (retried)",
    "happy_suspending": "Dispatch, happy path, every attempt suspends once (asyncio.sleep(0))",
    "failures_suspending": "Dispatch, 10% transient first attempts, every attempt suspends once",
}
SUSPENDING_MAX_N = 10_000  # the size; 100,000 would add minutes for the same ratios


def _n(n: int) -> str:
    return f"{n:,}"


def run_dispatch(
    sizes: Sequence[int], rounds: dict[int, int], langgraph_rounds: int, langgraph_max_n: int
) -> dict[str, Any]:
    """µs per task for every contender, scenario and N; GC time apart."""
    with_langgraph = dispatch.langgraph_available()
    results: dict[str, Any] = {}
    for scenario, (failure_rate, suspend) in SCENARIOS.items():
        per_n: dict[str, Any] = {}
        for n in _sizes_of(scenario, sizes):
            contenders = [
                c
                for c in dispatch.CONTENDERS
                if c.runs_at(n)
                and (c.key != "langgraph" or (with_langgraph and n <= langgraph_max_n))
            ]
            wall = {c.key: Samples() for c in contenders}
            in_gc = {c.key: Samples() for c in contenders}
            full = {c.key: Samples() for c in contenders}
            for round_number in range(rounds[n]):
                for contender in rotated(contenders, round_number):
                    if contender.key == "langgraph" and round_number >= langgraph_rounds:
                        continue  # seconds per round at 10,000: fewer rounds
                    workload = dispatch.Workload(
                        n, failure_rate, retried=contender.retries, suspend=suspend
                    )
                    timing = time_call(contender.prepare(workload))
                    dispatch.check(contender.key, timing.result, workload)
                    wall[contender.key].add(1e6 * timing.wall / n)
                    in_gc[contender.key].add(1e6 * timing.gc / n)
                    full[contender.key].add(timing.full_collections)
                    print(".", end="", flush=True)
            per_n[str(n)] = {
                key: {
                    "name": dispatch.BY_KEY[key].name,
                    "us_per_task": wall[key].to_json(),
                    "gc_us_per_task": in_gc[key].to_json(),
                    "full_collections": full[key].to_json(),
                    # Paired by round (both ran back to back), then the median: a round
                    # slowed by other work on the machine slows both sides of its ratio.
                    "ratio_to_raw": Samples(
                        [
                            mine / raw
                            for mine, raw in zip(wall[key].values, wall["raw"].values, strict=False)
                        ]
                    ).median,
                }
                for key in wall
            }
        results[scenario] = per_n
    print()
    if not with_langgraph:
        results["note"] = "langgraph is not installed: pip install -e '.[bench]'"
    return results


def _sizes_of(scenario: str, sizes: Sequence[int]) -> list[int]:
    """The sizes a scenario runs at: the suspending ones stop at SUSPENDING_MAX_N."""
    if SCENARIOS[scenario][1]:
        return [n for n in sizes if n <= SUSPENDING_MAX_N]
    return list(sizes)


def print_dispatch(results: dict[str, Any], all_sizes: Sequence[int]) -> None:
    for scenario in SCENARIOS:
        per_n = results[scenario]
        sizes = _sizes_of(scenario, all_sizes)
        headers = ["contender"]
        for n in sizes:
            headers += [f"N={_n(n)} µs/task", "× raw"]
        rows = []
        for contender in dispatch.CONTENDERS:
            row = [contender.name]
            for n in sizes:
                cell = per_n[str(n)].get(contender.key)
                if cell is None:
                    row += ["skipped", ""]
                    continue
                samples = Samples(cell["us_per_task"]["samples"])
                row += [spread(samples), f"{cell['ratio_to_raw']:.1f}×"]
            rows.append(row)
        print(table(headers, rows, SCENARIO_TITLES[scenario]))
        gc_rows = []
        for key in ("raw", "coordinator"):
            row = [dispatch.BY_KEY[key].name]
            for n in sizes:
                cell = per_n[str(n)][key]
                row.append(
                    f"{cell['gc_us_per_task']['median']:.1f} µs, "
                    f"{cell['full_collections']['median']:g} full"
                )
            gc_rows.append(row)
        print()
        print(
            table(
                ["inside it, the cyclic GC", *[f"N={_n(n)}" for n in sizes]],
                gc_rows,
                "Of which in the cyclic garbage collector (median µs/task, full collections)",
            )
        )
        if "note" in results:
            print(results["note"])
        print()


def run_memory(n: int, langgraph_n: int, rounds: int) -> dict[str, Any]:
    keys = ["raw", "loop", "tenacity", "subagent", "coordinator"]
    if dispatch.langgraph_available():
        keys.append("langgraph")
    per_task = {key: Samples() for key in keys}
    peak = {key: Samples() for key in keys}
    sizes = {key: (langgraph_n if key == "langgraph" else n) for key in keys}
    for round_number in range(rounds):
        for key in rotated(keys, round_number):
            result = memory.measure_in_subprocess(key, sizes[key], 0.1)
            per_task[key].add(result["bytes_per_task"])
            peak[key].add(result["peak_rss"])
            print(".", end="", flush=True)
    print()
    return {
        key: {
            "name": dispatch.BY_KEY[key].name,
            "n": sizes[key],
            "bytes_per_task": per_task[key].to_json(),
            "peak_rss_bytes": peak[key].to_json(),
            "ratio_to_raw": per_task[key].median / per_task["raw"].median,
        }
        for key in keys
    }


def print_memory(results: dict[str, Any]) -> None:
    rows = []
    for cell in results.values():
        samples = Samples([b / 1024 for b in cell["bytes_per_task"]["samples"]])
        rows.append(
            [
                cell["name"],
                _n(cell["n"]),
                spread(samples, "{:.2f}"),
                f"{cell['ratio_to_raw']:.1f}×",
                f"{cell['peak_rss_bytes']['median'] / 2**20:.0f}",
            ]
        )
    print(
        table(
            ["contender", "in flight", "KiB per task", "× raw", "peak RSS MiB"],
            rows,
            "Memory with every task in flight (10% failures retried; one process per run)",
        )
    )
    print()


def print_rate(rows: list[rate.RateRow], waiters: int, limit: int, per: float) -> None:
    lines = [
        [
            row.name,
            spread(row.cpu_seconds, "{:.2f}"),
            spread(row.cpu_per_acquisition_us, "{:.0f}"),
            f"{100 * row.idle_cpu_share.median:.0f}%",
            f"{100 * row.achieved_share.median:.1f}%",
            str(row.max_in_window),
            "yes" if row.fifo else "no",
        ]
        for row in rows
    ]
    print(
        table(
            [
                "contender",
                "CPU s",
                "CPU µs/acquisition",
                "CPU while waiting",
                "rate achieved",
                "max in a window",
                "FIFO",
            ],
            lines,
            f"Rate limiting: {_n(waiters)} tasks waiting on {limit} per {per:g} s",
        )
    )
    print()


def print_storm(rows: list[retry_storm.StormRow], n: int) -> None:
    lines = [
        [
            row.name,
            f"{row.attempts_per_first.median:.2f}",
            f"{row.gaps:,} of {row.tasks:,}",
            spread(row.us_per_task, "{:.0f}"),
        ]
        for row in rows
    ]
    print(
        table(
            ["contender", "attempts per first attempt", "tasks failed, reported", "µs/task"],
            lines,
            f"Retry storm: {_n(n)} tasks against a source down 100%, "
            f"{retry_storm.ATTEMPTS} attempts allowed",
        )
    )
    print()


def print_logging(rows: list[logging_cost.LoggingRow], micro: dict[str, float], n: int) -> None:
    base = rows[0].us_per_task.median
    lines = [
        [
            row.name,
            spread(row.us_per_task),
            f"{row.us_per_task.median - base:+.1f}",
            f"{row.lines_per_task:.2f}",
            (
                f"{(row.us_per_task.median - base) / row.lines_per_task:.1f}"
                if row.lines_per_task
                else ""
            ),
        ]
        for row in rows
    ]
    print(
        table(
            ["logging", "µs/task", "Δ µs/task", "lines/task", "µs/line"],
            lines,
            f"Logging: Coordinator.run, {_n(n)} tasks, 10% failures",
        )
    )
    print(
        f"At the default level a task pays one get_logger ({micro['get_logger_us']:.2f} µs) "
        f"and a few filtered-out calls ({micro['filtered_call_us']:.2f} µs each)."
    )
    print()


def run_overload(rounds: int) -> dict[str, Any]:
    """The overload section: covered tasks and calls to the primary, for each contender."""
    rows = overload.run(rounds)
    lines = [
        [
            row.name,
            f"{row.covered.median:.0f} of {overload.TASKS}",
            f"{row.primary_calls.median:.0f}",
            spread(row.seconds, "{:.2f}"),
            ", ".join(f"{name} {size}" for name, size in row.concurrency.items()),
        ]
        for row in rows
    ]
    print(
        table(
            ["contender", "covered", "calls to the primary", "s", "settled in flight"],
            lines,
            f"Overload: {overload.TASKS} tasks, {overload.IN_FLIGHT} in flight, primary always "
            f"529, fallback healthy, max_model_calls={overload.MAX_CALLS}",
        )
    )
    print()
    return {
        "tasks": overload.TASKS,
        "in_flight": overload.IN_FLIGHT,
        "max_model_calls": overload.MAX_CALLS,
        **{row.name: row.to_json() for row in rows},
    }


def targets(results: dict[str, Any], sizes: Sequence[int]) -> list[tuple[str, str, bool]]:
    """The issue's targets, each with the measured figure and whether it is met."""
    checks: list[tuple[str, str, bool]] = []
    dispatch_results = results.get("dispatch")
    if dispatch_results and "10000" in dispatch_results["happy"]:
        happy = dispatch_results["happy"]["10000"]["coordinator"]["ratio_to_raw"]
        failing = dispatch_results["failures"]["10000"]["coordinator"]["ratio_to_raw"]
        checks.append(("happy path ≤ 3× raw at 10,000", f"{happy:.1f}×", happy <= 3))
        checks.append(("10% failures ≤ 4× raw at 10,000", f"{failing:.1f}×", failing <= 4))
    if dispatch_results and "10000" in dispatch_results["happy_suspending"]:
        # Issue 18's targets hold for work that suspends (as a real subagent's does).
        happy = dispatch_results["happy_suspending"]["10000"]["coordinator"]["ratio_to_raw"]
        failing = dispatch_results["failures_suspending"]["10000"]["coordinator"]["ratio_to_raw"]
        checks.append(("suspending, happy path ≤ 5× raw at 10,000", f"{happy:.1f}×", happy <= 5))
        checks.append(
            ("suspending, 10% failures ≤ 6× raw at 10,000", f"{failing:.1f}×", failing <= 6)
        )
    if dispatch_results and {"1000", "100000"} <= set(dispatch_results["failures"]):
        small = dispatch_results["failures"]["1000"]["coordinator"]["us_per_task"]["median"]
        large = dispatch_results["failures"]["100000"]["coordinator"]["us_per_task"]["median"]
        checks.append(
            ("cost at 100,000 ≤ 1.5× cost at 1,000", f"{large / small:.2f}×", large / small <= 1.5)
        )
    if "memory" in results:
        kib = results["memory"]["coordinator"]["bytes_per_task"]["median"] / 1024
        checks.append(("≤ 3 KiB per task in flight", f"{kib:.1f} KiB", kib <= 3))
    if "rate" in results:
        limiter = results["rate"]["agentmesh Limiter"]
        cpu = limiter["cpu_per_acquisition_us"]["median"]
        share = limiter["achieved_rate_share"]["median"]
        checks.append(("≤ 50 µs CPU per acquisition", f"{cpu:.0f} µs", cpu <= 50))
        checks.append(("rate delivered within 5%", f"{100 * share:.1f}%", abs(share - 1) <= 0.05))
    if "overload" in results:
        covered = results["overload"][overload.NAMES["shared"]]["covered"]["median"]
        checks.append(("overload: ≥ 48 of 50 covered", f"{covered:.0f} of 50", covered >= 48))
    return checks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--rounds", type=int, help="rounds per dispatch size (default 5/5/3)")
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).with_name("results.json"), help="output"
    )
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")

    quick = args.quick
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    rounds = {1_000: 3, 10_000: 3} if quick else {1_000: 5, 10_000: 5, 100_000: 3}
    if args.rounds:
        rounds = dict.fromkeys(sizes, args.rounds)
    memory_n = 10_000 if quick else 100_000
    waiters, limit, per = (10_000, 2_500, 0.25) if quick else (10_000, 2_000, 0.5)

    started = time.perf_counter()
    facts = machine()
    print(
        f"agentmesh benchmarks on {facts['cpu']} ({facts['cpus']} CPUs), Python "
        f"{facts['python']}, {facts['platform']}{' — quick' if quick else ''}\n"
    )
    results: dict[str, Any] = {
        "command": " ".join(
            ["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])]
        ),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": facts,
        "quick": quick,
    }
    if "lean" in sections:
        print("lean core, against the baseline commit ", end="", flush=True)
        results["lean"] = lean.run(rounds=3 if quick else 5, n=2_000 if quick else lean.PROBE_N)
        lean.print_table(results["lean"])
    if "dispatch" in sections:
        print("dispatch ", end="", flush=True)
        results["dispatch"] = run_dispatch(
            sizes,
            rounds,
            langgraph_rounds=1 if quick else 2,  # 5-10 s per round at 10,000
            langgraph_max_n=1_000 if quick else dispatch.LANGGRAPH_MAX_N,
        )
        print_dispatch(results["dispatch"], sizes)
    if "memory" in sections:
        print("memory ", end="", flush=True)
        results["memory"] = run_memory(
            memory_n,
            min(memory_n, dispatch.LANGGRAPH_MAX_N),
            1,  # deterministic to ~0.1%
        )
        print_memory(results["memory"])
    if "rate" in sections:
        rate_rows = rate.run(waiters, limit, per, 1 if quick else 3)
        results["rate"] = {
            "waiters": waiters,
            "limit": [limit, per],
            **{row.name: row.to_json() for row in rate_rows},
        }
        print_rate(rate_rows, waiters, limit, per)
    if "storm" in sections:
        storm_n = 1_000
        storm_rows = retry_storm.run(storm_n, 1 if quick else 3)
        results["retry_storm"] = {"n": storm_n, **{row.name: row.to_json() for row in storm_rows}}
        print_storm(storm_rows, storm_n)
    if "logging" in sections:
        log_n = 10_000
        log_rows = logging_cost.run(log_n, 3 if quick else 5, 0.1)
        micro = logging_cost.micro()
        results["logging"] = {
            "n": log_n,
            "micro": micro,
            **{row.name: row.to_json() for row in log_rows},
        }
        print_logging(log_rows, micro, log_n)

    if "costcap" in sections:
        cap_rows = cost_cap.run(3 if quick else 5)
        results["cost_cap"] = {row.name: row.to_json() for row in cap_rows}
        cost_cap.print_table(cap_rows)
    if "overload" in sections:
        print("overload ", end="", flush=True)
        results["overload"] = run_overload(1 if quick else 5)
    if "ratelimits" in sections:
        limit_rows = rate_limits.run(1 if quick else 3)
        results["rate_limits"] = {row.name: row.to_json() for row in limit_rows}
        rate_limits.print_table(limit_rows)

    if "stores" in sections:
        print("stores ", end="", flush=True)
        store_n = 2_000 if quick else 10_000
        store_rows = stores.run(3 if quick else 5, store_n)
        results["stores"] = {"n": store_n, **{row.name: row.to_json() for row in store_rows}}
        stores.print_table(store_rows, store_n)
        if not quick:
            print("stores growth ", end="", flush=True)
            results["stores"]["growth"] = stores.growth(3, 10_000, 100_000)
            stores.print_growth(results["stores"]["growth"])

    if "eventlog" in sections:
        print("eventlog ", end="", flush=True)
        log_n = 2_000 if quick else 10_000
        log_rows = event_log.run(3 if quick else 5, log_n)
        results["event_log"] = {"n": log_n, **{row.name: row.to_json() for row in log_rows}}
        event_log.print_table(log_rows, log_n)

    if "ray" in sections:
        print("ray, two nodes ", end="", flush=True)
        results["ray"] = ray_cluster.run(1 if quick else 3)
        ray_cluster.print_table(results["ray"])

    checks = (
        targets(results, sizes)
        + stores.targets(results.get("stores", {}))
        + ray_cluster.targets(results.get("ray", {}))
    )
    if checks:
        print(
            table(
                ["target", "measured", "met"],
                [[name, value, "yes" if ok else "NO"] for name, value, ok in checks],
                "Targets (issues 7, 18, 26, 28 and 31)",
            )
        )
        results["targets"] = [
            {"target": name, "measured": value, "met": ok} for name, value, ok in checks
        ]
    results["seconds"] = round(time.perf_counter() - started, 1)
    args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\n{results['seconds']:.0f} s; results written to {args.json}")


if __name__ == "__main__":
    main()
