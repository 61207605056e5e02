"""Structured logging for agentmesh: quiet unless asked, redacted always.

Every attempt, retry, classification, policy decision and outcome is a structlog event
bound with ``run_id``, ``task_id``, ``subagent``, ``tool`` and ``attempt``. Where those
events go is decided when a run or context asks for a logger (never at import, never
per event):

* Nobody configured structlog: a private logger, built without touching structlog's
  global configuration, drops everything below WARNING (the filtered methods are
  ``return None``) and writes redacted lines to stderr. An unconfigured structlog would
  print every level to stdout; that never reaches a user who asked for nothing.
* The application configured structlog: our events go through its chain and its
  logger factory (``structlog.get_logger("agentmesh")`` semantics), with
  `redact_secrets` run first.
* `configure_logging` is the explicit opt-in: it configures structlog globally with
  level filtering, timestamps, redaction and a JSON or console renderer.

`structlog.reset_defaults()` returns to the quiet default for loggers made afterwards.

structlog itself is imported by the first logger or `configure_logging`, not by
``import agentmesh``: its package imports `rich` when that is installed (about 0.16 s).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO, cast

from agentmesh._redaction import redact_mapping, redact_text
from agentmesh.errors import UsageError

if TYPE_CHECKING:
    # At run time `_load_structlog` binds this name, at the first logger.
    import structlog
    from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

__all__ = [
    "LOGGER_NAME",
    "configure_logging",
    "get_logger",
    "logs_info",
    "redact_secrets",
]

LOGGER_NAME: Final = "agentmesh"
"""Bound as ``logger`` on every event and passed to the user's logger factory."""


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Replace credentials in an event with ``"[REDACTED]"``; a structlog processor.

    Values under keys such as ``api_key``, ``x-api-key``, ``authorization``, ``token``,
    ``secret`` or ``password`` (any case and separator, also as a suffix like
    ``anthropic_api_key``) are concealed, and Anthropic keys (``sk-ant-...``), bearer
    tokens and ``api_key=...``-style fields are cut out of any string, recursively
    through dicts, mappings, lists and tuples. Nothing the caller owns is mutated: what
    changes is copied, and an event without secrets comes back as the same object.

    It runs in every agentmesh logger. If you configure structlog yourself, add it to
    your own chain (before the renderer) to cover your other loggers too.

    Args:
        logger: The wrapped logger; unused.
        method_name: The log method's name; unused.
        event_dict: The event to clean.

    Returns:
        The event, with every secret replaced.
    """
    return cast("EventDict", redact_mapping(event_dict))


def _redact_rendered(logger: WrappedLogger, method_name: str, rendered: Any) -> Any:
    # Runs after the renderer: a secret inside an arbitrary object's repr is only text
    # once rendered, so this is the last chance to catch it.
    return redact_text(rendered) if isinstance(rendered, str) else rendered


class _RedactFirst:
    """A user's processor chain with `redact_secrets` in front, read on every event.

    Reading the list live, rather than copying it, keeps structlog's own semantics:
    `structlog.testing.capture_logs` swaps the configured list's contents in place and
    still sees loggers bound before it started.
    """

    __slots__ = ("_chain",)

    def __init__(self, chain: Iterable[Processor]) -> None:
        self._chain = chain

    def __iter__(self) -> Iterator[Processor]:
        chain = self._chain
        if redact_secrets not in chain:
            yield redact_secrets
        yield from chain

    def __repr__(self) -> str:
        return f"_RedactFirst({self._chain!r})"


_Defaults = tuple[Any, Any, tuple[Any, ...]]
"""structlog's builtin logger factory, wrapper class and processors."""


@dataclass(frozen=True, slots=True)
class _Quiet:
    """What agentmesh reads from and builds with structlog, once per process."""

    wrapper: type[FilteringBoundLogger]
    processors: tuple[Processor, ...]
    # None when the application had configured structlog before agentmesh saw it.
    builtin_defaults: _Defaults | None


_quiet: _Quiet | None = None


def _load_structlog() -> _Quiet:
    """Import structlog, read its builtin defaults and build the quiet default logger."""
    global _quiet, structlog
    import structlog  # deliberately late: see the module docstring

    if _quiet is None:
        _quiet = _Quiet(
            wrapper=structlog.make_filtering_bound_logger(logging.WARNING),
            processors=_quiet_processors(),
            builtin_defaults=_builtin_defaults(),
        )
    return _quiet


def _quiet_processors() -> tuple[Processor, ...]:
    return (
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        # Formatting tracebacks to text before redaction keeps secrets in exception
        # messages out, and keeps rich's locals-showing tracebacks out of our output.
        structlog.processors.format_exc_info,
        redact_secrets,
        structlog.dev.ConsoleRenderer(colors=False),
        _redact_rendered,
    )


def _read_defaults() -> _Defaults:
    config = structlog.get_config()
    return (config["logger_factory"], config["wrapper_class"], tuple(config["processors"]))


def _builtin_defaults() -> _Defaults | None:
    """structlog's builtin defaults, read through its public API.

    structlog keeps them private. When agentmesh is imported after structlog, they are
    read then, as the objects `reset_defaults()` restores, or None when the application
    had already configured structlog: its choice stands. Otherwise nobody could have
    configured structlog before agentmesh, and they are read at the first logger.
    """
    if not structlog.is_configured():
        return _read_defaults()
    if _IMPORTED_AFTER_STRUCTLOG:
        return None
    # structlog was imported and configured after agentmesh, before its first logger
    # (say a test's `capture_logs` block): what `reset_defaults()` restores are the
    # builtins. The configuration is put back as it was, the same processor list
    # included, so loggers bound to it and `capture_logs` still see it. This runs once
    # per process; like `capture_logs` itself, it is not safe against a thread logging
    # at that instant.
    configured = structlog.get_config()
    structlog.reset_defaults()
    defaults = _read_defaults()
    structlog.configure(**configured)
    return defaults


def _follows_user_config() -> bool:
    """Whether structlog's global configuration is someone's choice, not its defaults.

    `structlog.testing.capture_logs` leaves ``is_configured()`` true with the builtin
    defaults restored, which print every level to stdout; that state counts as
    unconfigured.
    """
    builtin_defaults = (_quiet or _load_structlog()).builtin_defaults
    if not structlog.is_configured():
        return False
    if builtin_defaults is None:
        return True
    factory, wrapper_class, processors = builtin_defaults
    config = structlog.get_config()
    return not (
        config["logger_factory"] is factory
        and config["wrapper_class"] is wrapper_class
        and tuple(config["processors"]) == processors
    )


def get_logger(**bindings: Any) -> FilteringBoundLogger:
    """Return a logger for one run, task or tool call, with `bindings` in every event.

    Call it when a run or context is created, not per event: the choice between the
    application's structlog configuration and the quiet default is made here.

    Below the level (WARNING unless configured otherwise) a filtering logger's methods
    are ``return None``: ``log.debug("tool_attempt", attempt=n)`` then costs a method
    call plus building its keyword arguments, so pass values that are already computed.

    Args:
        **bindings: Context for every event, by convention ``run_id``, ``task_id``,
            ``subagent``, ``tool`` and ``attempt``.

    Returns:
        A bound logger with ``debug``, ``info``, ``warning``, ``error``, ``exception``
        and ``bind``.
    """
    context = {"logger": LOGGER_NAME, **bindings}
    quiet = _quiet or _load_structlog()
    if _follows_user_config():
        proxy = structlog.wrap_logger(
            None,
            processors=_RedactFirst(structlog.get_config()["processors"]),
            logger_factory_args=(LOGGER_NAME,),
        )
        return cast("FilteringBoundLogger", proxy.bind(**context))
    # The quiet default, built directly: this runs once per task, and structlog's lazy
    # proxy plus a new WriteLogger cost about 3 us more than the bound logger itself.
    # FilteringBoundLogger is a Protocol without __init__; the class is BoundLoggerBase's.
    return quiet.wrapper(_stderr_logger(), quiet.processors, context)  # type: ignore[call-arg]


def logs_info(log: Any) -> bool:
    """Whether `log` may write an INFO line, as its own public `is_enabled_for` says.

    For a hot path that would otherwise build the values of an event per task only for
    the quiet default (WARNING and up) to drop them. A logger without the method may
    write anything: True.
    """
    enabled = getattr(log, "is_enabled_for", None)
    return True if enabled is None else bool(enabled(logging.INFO))


# A cache, not state: (stream, its WriteLogger). A race between threads builds one twice.
_stderr_writer: tuple[TextIO, structlog.WriteLogger] | None = None


def _stderr_logger() -> structlog.WriteLogger:
    """A WriteLogger on the current `sys.stderr`, reused while stderr stays the same."""
    global _stderr_writer
    # Looked up now, not at import, so redirected or captured stderr is honoured.
    stream, cached = sys.stderr, _stderr_writer
    if cached is not None and cached[0] is stream:
        return cached[1]
    writer = structlog.WriteLogger(stream)
    _stderr_writer = (stream, writer)
    return writer


_LEVELS: Final = {
    "NOTSET": logging.NOTSET,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
    "FATAL": logging.CRITICAL,
}


def _level_number(level: int | str) -> int:
    # structlog's filtering loggers exist for the standard levels only.
    number = _LEVELS.get(level.upper()) if isinstance(level, str) else level
    if number is None or isinstance(number, bool) or number not in _LEVELS.values():
        raise UsageError(
            f"level={level!r} is not a standard logging level; use one of "
            "'DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL' or the logging constants"
        )
    return number


def _wants_colors(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def configure_logging(
    level: int | str = "INFO", *, json: bool = False, stream: TextIO | None = None
) -> None:
    """Configure structlog globally to show agentmesh events at `level` and above.

    This is the explicit opt-in; the library never calls it. It replaces structlog's
    global configuration, so the application's own structlog loggers share it. Events
    are filtered by level before any processing, timestamped (ISO 8601, UTC), redacted
    with `redact_secrets` and rendered one per line.

    Args:
        level: The lowest level shown, as a name (``"DEBUG"``) or a number
            (``logging.DEBUG``).
        json: Render JSON lines for machines instead of aligned ``key=value`` text.
        stream: Where lines go; standard error when omitted.

    Raises:
        UsageError: If `level` is not a standard logging level.
    """
    number = _level_number(level)
    _load_structlog()
    out = sys.stderr if stream is None else stream
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=_wants_colors(out))
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            redact_secrets,
            renderer,
            _redact_rendered,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        context_class=dict,
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


# structlog already imported: read its state now, as before it became lazy, so a
# configuration the application made before importing agentmesh keeps counting as its own.
_IMPORTED_AFTER_STRUCTLOG: Final = "structlog" in sys.modules
if _IMPORTED_AFTER_STRUCTLOG:
    _load_structlog()
