"""The command line's options, checked before anything heavy is imported.

Bad input (an empty question, an unknown source or fault kind, a probability outside
0..1, an output file that cannot be written, a run to resume that the checkpoints do not
have)
raises `BadInput` with one line for the user; the entry point prints it and exits with
code 2.
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import platformdirs

from .faults import Fault, parse_fault
from .planner import Plan, plan
from .sources import SOURCES

ONLINE_SOURCES = (*SOURCES, "web")
DEFAULT_MODEL = "claude-sonnet-4-5"
# Asked when the model stays overloaded: another model's capacity, at a lower price.
DEFAULT_FALLBACK_MODEL = "claude-haiku-4-5"

__all__ = [
    "CACHE_DIRECTORY",
    "DEFAULT_CHECKPOINTS",
    "DEFAULT_INDEX_CACHE",
    "PROG",
    "SAMPLE_QUESTION",
    "BadInput",
    "Options",
    "RunSpec",
    "check_faults",
    "parse_options",
]

SAMPLE_QUESTION = "How does the with statement handle exceptions in context managers?"
PROG = "python -m examples.research_agent"
# The user's cache directory (platformdirs: ~/.cache/agentmesh on Linux, or under
# $XDG_CACHE_HOME), not the folder the example happens to be run from. `--checkpoints`
# overrides the checkpoint file, `--no-cache` turns the saved indexes off.
CACHE_DIRECTORY = platformdirs.user_cache_path("agentmesh") / "research_agent"
DEFAULT_CHECKPOINTS = CACHE_DIRECTORY / "checkpoints.sqlite"
DEFAULT_INDEX_CACHE = CACHE_DIRECTORY / "indexes"


class BadInput(Exception):
    """Input the run cannot start with; the message is shown as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the usage too; one line that names the problem is enough.
        raise BadInput(message)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a run researches, and what `--resume` keeps identical: its checkpoints
    belong to these tasks. Saved under the run id when the run starts.

    Faults, seed, timeout and outputs are not part of it: they describe one attempt at
    the run, and a resume is another attempt (usually without the fault).
    """

    plan: Plan
    sources: tuple[str, ...]
    model: str | None = None  # None: offline
    fallback: str | None = None  # the model asked when `model` stays overloaded

    @property
    def mode(self) -> str:
        return "offline" if self.model is None else f"online ({self.model})"


@dataclass(frozen=True, slots=True)
class Options:
    spec: RunSpec | None  # None with --resume: the run's own spec is read back
    faults: tuple[Fault, ...]
    seed: int
    timeout: float
    json: bool
    out: Path | None
    html: Path | None
    quiet: bool
    verbose: bool
    checkpoints: Path = DEFAULT_CHECKPOINTS
    events: Path | None = None  # write the run's events there, one JSON line each
    resume: str | None = None  # the run id to resume
    index_cache: Path | None = DEFAULT_INDEX_CACHE  # None: build the indexes every run


def qualified(model: str) -> str:
    """A model string: a bare name (no provider) is Claude's, on Anthropic's API."""
    return model if ":" in model else f"anthropic:{model}"


def searches_the_web(model: str | None) -> bool:
    """Whether `model` has the `web` source: web search is a tool of Anthropic's API."""
    return model is not None and qualified(model).startswith("anthropic:")


def parse_options(argv: Sequence[str] | None) -> Options:
    """The options, checked; raises BadInput with a one-line message."""
    parser = _Parser(
        prog=PROG,
        description="Research a question over local Python documentation, with agentmesh.",
        epilog=f'example: {PROG} "{SAMPLE_QUESTION}" --inject stdlib=timeout',
    )
    parser.add_argument("question", nargs="?", help="the question, in quotes")
    parser.add_argument(
        "--sources",
        help=f"comma-separated sources (default: {','.join(SOURCES)}, and web when online)",
    )
    parser.add_argument(
        "--model",
        help="go online with this model: a Claude name or a model string such as "
        "openai:gpt-5-mini, google:gemini-2.5-flash, bedrock:<model id>, vertex:<model> or "
        "openai-compatible:<model>@<base_url> (default when ANTHROPIC_API_KEY is set: "
        f"$AGENTMESH_MODEL or {DEFAULT_MODEL}); the web source needs a Claude model",
    )
    parser.add_argument(
        "--fallback-model",
        help="online, the model asked when --model stays overloaded or unavailable "
        f"(default with a Claude model: {DEFAULT_FALLBACK_MODEL}; 'none' for no fallback)",
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
        "--timeout",
        "--deadline",  # its name before agentmesh's "timeout means seconds" rule
        dest="timeout",
        type=float,
        default=30.0,
        help="seconds for the whole run (default 30)",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="rerun run RUN_ID (its question, sources and model), reusing what it searched",
    )
    parser.add_argument(
        "--checkpoints",
        type=Path,
        default=DEFAULT_CHECKPOINTS,
        metavar="PATH",
        help=f"the checkpoint file (default: {DEFAULT_CHECKPOINTS})",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help=f"build the source indexes afresh, not from or into {DEFAULT_INDEX_CACHE}",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--out", type=Path, help="write the report to FILE instead of stdout")
    parser.add_argument("--html", type=Path, help="also write a self-contained HTML report")
    parser.add_argument(
        "--events", type=Path, metavar="FILE", help="also write the run's events as JSON lines"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress, no grid")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show every agentmesh event as a log line"
    )
    args = parser.parse_args(argv)

    if args.resume is not None:
        _check_resume(args)
        spec = None  # read back from the checkpoints, where the faults are checked too
    else:
        spec = _new_run(args)
    known = ONLINE_SOURCES if spec is None or searches_the_web(spec.model) else SOURCES
    faults: list[Fault] = []
    for text in args.inject:
        try:
            faults.append(parse_fault(text, known))
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    if spec is not None:
        check_faults(faults, spec.sources, "(--sources)")
    if not args.timeout > 0:
        raise BadInput(f"--timeout must be more than 0 seconds, got {args.timeout:g}")
    _check_outputs({"--out": args.out, "--html": args.html, "--events": args.events})
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    return Options(
        spec=spec,
        faults=tuple(faults),
        seed=seed,
        timeout=args.timeout,
        json=args.json,
        out=args.out,
        html=args.html,
        quiet=args.quiet,
        verbose=args.verbose,
        checkpoints=args.checkpoints,
        resume=args.resume,
        events=args.events,
        index_cache=None if args.no_cache else DEFAULT_INDEX_CACHE,
    )


def _check_outputs(paths: dict[str, Path | None]) -> None:
    """Refuse an output the run could not write, before any work: not after the whole run."""
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        _check_writable(flag, path)
        same = seen.setdefault(path.resolve(), flag)
        if same != flag:
            raise BadInput(f"{flag} {path}: the same file as {same}; give each its own")


def _check_writable(flag: str, path: Path) -> None:
    if path.is_dir():
        raise BadInput(f"{flag} {path}: is a directory; give a file name")
    if not path.parent.is_dir():
        raise BadInput(f"{flag} {path}: directory {path.parent} does not exist")
    existed = path.exists()
    try:
        # Opening to append truncates nothing; it is the one sure test of "can be written"
        # (permissions, read-only mounts, a root user's overrides, special files).
        with path.open("ab"):
            pass
    except OSError as exc:
        raise BadInput(f"{flag} {path}: cannot be written ({exc.strerror or exc})") from None
    if not existed:
        path.unlink(missing_ok=True)  # a failed run leaves no empty file behind


def check_faults(faults: Sequence[Fault], sources: Sequence[str], where: str) -> None:
    """Every fault names a source the run searches; raises BadInput otherwise."""
    for fault in faults:
        if fault.source not in sources:
            raise BadInput(
                f"--inject {str(fault)!r}: source {fault.source!r} is not searched {where}"
            )


def _new_run(args: argparse.Namespace) -> RunSpec:
    if args.question is None:
        raise BadInput("a question is needed (or --resume RUN_ID)")
    try:
        the_plan = plan(args.question)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    model = None
    if not args.offline and (args.model or os.environ.get("ANTHROPIC_API_KEY")):
        model = args.model or os.environ.get("AGENTMESH_MODEL") or DEFAULT_MODEL
        # Other providers' keys are their SDKs' to find (and to miss: a failed call).
        if searches_the_web(model) and not os.environ.get("ANTHROPIC_API_KEY"):
            raise BadInput("--model needs ANTHROPIC_API_KEY in the environment (or --offline)")
    known = ONLINE_SOURCES if searches_the_web(model) else SOURCES
    chosen = args.sources if args.sources is not None else ",".join(known)
    sources = tuple(dict.fromkeys(s.strip() for s in chosen.split(",") if s.strip()))
    unknown = [s for s in sources if s not in known]
    if unknown or not sources:
        named = ", ".join(unknown) or "(none)"
        online = " (web needs ANTHROPIC_API_KEY)" if "web" in unknown else ""
        raise BadInput(f"--sources: unknown source {named}; known: {', '.join(known)}{online}")
    fallback = None
    if model is not None and args.fallback_model != "none":
        # Claude's default fallback only follows a Claude model (it needs Anthropic's key).
        default = DEFAULT_FALLBACK_MODEL if searches_the_web(model) else None
        fallback = args.fallback_model or default
    return RunSpec(plan=the_plan, sources=sources, model=model, fallback=fallback)


def _check_resume(args: argparse.Namespace) -> None:
    """A resume reruns the saved run as it was: nothing may redefine what it researches."""
    if not args.resume:
        raise BadInput("--resume needs a run id (the one a run prints when it starts)")
    given = [
        name
        for name, value in (
            ("QUESTION", args.question),
            ("--sources", args.sources),
            ("--model", args.model),
            ("--fallback-model", args.fallback_model),
            ("--offline", args.offline or None),
        )
        if value is not None
    ]
    if given:
        raise BadInput(
            f"--resume {args.resume} reruns that run's question, sources and model; "
            f"drop {', '.join(given)}"
        )
    if not args.checkpoints.is_file():
        raise BadInput(
            f"--resume {args.resume}: no checkpoint file {args.checkpoints} "
            "(--checkpoints PATH names the one the run used)"
        )
