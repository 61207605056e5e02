"""The command line's options, checked before anything heavy is imported.

Bad input (an empty question, an unknown source or fault kind, a probability outside
0..1, a missing output directory) raises `BadInput` with one line for the user; the
entry point prints it and exits with code 2.
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from .faults import Fault, parse_fault
from .planner import Plan, plan
from .sources import SOURCES

ONLINE_SOURCES = (*SOURCES, "web")
DEFAULT_MODEL = "claude-sonnet-4-5"

__all__ = ["PROG", "SAMPLE_QUESTION", "BadInput", "Options", "parse_options"]

SAMPLE_QUESTION = "How does the with statement handle exceptions in context managers?"
PROG = "python -m examples.research_agent"


class BadInput(Exception):
    """Input the run cannot start with; the message is shown as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the usage too; one line that names the problem is enough.
        raise BadInput(message)


@dataclass(frozen=True, slots=True)
class Options:
    plan: Plan
    sources: tuple[str, ...]
    faults: tuple[Fault, ...]
    seed: int
    deadline: float
    json: bool
    out: Path | None
    html: Path | None
    quiet: bool
    verbose: bool
    model: str | None = None  # None: offline

    @property
    def mode(self) -> str:
        return "offline" if self.model is None else f"online ({self.model})"


def parse_options(argv: Sequence[str] | None) -> Options:
    """The options, checked; raises BadInput with a one-line message."""
    parser = _Parser(
        prog=PROG,
        description="Research a question over local Python documentation, with agentmesh.",
        epilog=f'example: {PROG} "{SAMPLE_QUESTION}" --inject stdlib=timeout',
    )
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument(
        "--sources",
        help=f"comma-separated sources (default: {','.join(SOURCES)}, and web when online)",
    )
    parser.add_argument(
        "--model",
        help="go online with this Claude model (default when ANTHROPIC_API_KEY is set: "
        f"$AGENTMESH_MODEL or {DEFAULT_MODEL})",
    )
    parser.add_argument("--offline", action="store_true", help="stay offline, key or not")
    parser.add_argument(
        "--inject",
        action="append",
        default=[],
        metavar="SOURCE=KIND[@P]",
        help="make SOURCE fail: timeout, rate_limit, unavailable, permission, invalid or empty, "
        "on every call or with probability P (repeatable)",
    )
    parser.add_argument("--seed", type=int, help="seed for injected faults (default: random)")
    parser.add_argument(
        "--deadline", type=float, default=30.0, help="seconds for the whole run (default 30)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--out", type=Path, help="write the report to FILE instead of stdout")
    parser.add_argument("--html", type=Path, help="also write a self-contained HTML report")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress, no grid")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show every agentmesh event as a log line"
    )
    args = parser.parse_args(argv)

    try:
        the_plan = plan(args.question)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    model = None
    if not args.offline and (args.model or os.environ.get("ANTHROPIC_API_KEY")):
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise BadInput("--model needs ANTHROPIC_API_KEY in the environment (or --offline)")
        model = args.model or os.environ.get("AGENTMESH_MODEL") or DEFAULT_MODEL
    known = ONLINE_SOURCES if model else SOURCES
    chosen = args.sources if args.sources is not None else ",".join(known)
    sources = tuple(dict.fromkeys(s.strip() for s in chosen.split(",") if s.strip()))
    unknown = [s for s in sources if s not in known]
    if unknown or not sources:
        named = ", ".join(unknown) or "(none)"
        online = " (web needs ANTHROPIC_API_KEY)" if "web" in unknown else ""
        raise BadInput(f"--sources: unknown source {named}; known: {', '.join(known)}{online}")
    faults: list[Fault] = []
    for text in args.inject:
        try:
            fault = parse_fault(text, known)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        if fault.source not in sources:
            raise BadInput(
                f"--inject {text!r}: source {fault.source!r} is not searched (--sources)"
            )
        faults.append(fault)
    if not args.deadline > 0:
        raise BadInput(f"--deadline must be more than 0 seconds, got {args.deadline:g}")
    for flag, path in (("--out", args.out), ("--html", args.html)):
        if path is not None and not path.parent.is_dir():
            raise BadInput(f"{flag} {path}: directory {path.parent} does not exist")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    return Options(
        plan=the_plan,
        sources=sources,
        faults=tuple(faults),
        seed=seed,
        deadline=args.deadline,
        json=args.json,
        out=args.out,
        html=args.html,
        quiet=args.quiet,
        verbose=args.verbose,
        model=model,
    )
