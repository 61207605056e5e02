"""Logging: quiet by default, opt-in configuration, the user's structlog, redaction."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agentmesh._logging import (
    configure_logging,
    get_logger,
    logs_info,
    redact_secrets,
)
from agentmesh._redaction import REDACTED
from agentmesh.errors import UsageError

BOUND = {"run_id": "run-1", "task_id": "task-1", "subagent": "docs", "tool": "search"}
ANTHROPIC_KEY = "sk-ant-api03-Zx9_Qw-7rT2pLmN0vB4cXs8Kj1Hg6FdEaUiOyT5R"


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def redact(**event: Any) -> dict[str, Any]:
    return dict(redact_secrets(None, "info", event))


class Request:
    """Stands for a third-party object whose repr shows its headers."""

    def __repr__(self) -> str:
        return f"Request(headers={{'x-api-key': '{ANTHROPIC_KEY}'}})"


class Exploding:
    def __repr__(self) -> str:
        raise AssertionError("a filtered-out event was processed")


class TestQuietDefault:
    def test_debug_and_info_print_nothing(self, capsys: pytest.CaptureFixture[str]) -> None:
        """With nothing configured, debug and info events reach neither stdout nor stderr."""
        log = get_logger(**BOUND)
        log.debug("tool_attempt", attempt=1)
        log.info("retry_scheduled", attempt=1, delay=0.2)
        assert capsys.readouterr() == ("", "")

    def test_warning_goes_to_stderr_not_stdout(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A warning is written as one line to stderr, with the bound fields, never to stdout."""
        get_logger(**BOUND, attempt=2).warning("retry_budget_exhausted")
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1
        for text in ("warning", "retry_budget_exhausted", "run_id=run-1", "task_id=task-1"):
            assert text in err
        assert "subagent=docs" in err
        assert "tool=search" in err
        assert "attempt=2" in err

    def test_exceptions_show_a_redacted_traceback(self, capsys: pytest.CaptureFixture[str]) -> None:
        """log.exception writes the traceback to stderr with secrets in its message cut out."""
        try:
            raise PermissionError(f"403 for {ANTHROPIC_KEY}")
        except PermissionError:
            get_logger(**BOUND).exception("tool_failed")
        err = capsys.readouterr().err
        assert f"PermissionError: 403 for {REDACTED}" in err
        assert ANTHROPIC_KEY not in err

    def test_filtered_calls_never_process_the_event(self) -> None:
        """Below WARNING the log methods do nothing, not even look at their arguments."""
        log = get_logger(**BOUND)
        log.debug("tool_attempt", payload=Exploding())
        log.info("tool_outcome", payload=Exploding())

    def test_global_configuration_is_left_untouched(self) -> None:
        """Making and using a default logger does not configure structlog."""
        get_logger(**BOUND).warning("something")
        assert structlog.is_configured() is False

    def test_defaults_left_behind_by_capture_logs_stay_quiet(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """After capture_logs, structlog counts as configured with its print-everything
        defaults; agentmesh still stays quiet below WARNING."""
        with capture_logs():
            pass
        assert structlog.is_configured() is True
        get_logger(**BOUND).info("tool_outcome")
        assert capsys.readouterr() == ("", "")

    def test_reset_defaults_after_configure_logging_is_quiet_again(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """structlog.reset_defaults() undoes configure_logging for loggers made afterwards."""
        configure_logging("DEBUG")
        structlog.reset_defaults()
        get_logger(**BOUND).info("tool_outcome")
        assert capsys.readouterr() == ("", "")


class TestConfigureLogging:
    def test_json_lines_carry_the_bound_fields(self) -> None:
        """Each event is one JSON object with run_id, task_id, subagent, tool and attempt."""
        stream = io.StringIO()
        configure_logging("INFO", json=True, stream=stream)
        log = get_logger(**BOUND).bind(attempt=3)
        log.info("retry_scheduled", delay=0.4)
        log.warning("subagent_outcome", status="gap")
        first, second = json_lines(stream.getvalue())
        assert first["event"] == "retry_scheduled"
        assert first["delay"] == 0.4
        assert first["level"] == "info"
        assert first["logger"] == "agentmesh"
        assert "timestamp" in first
        for line in (first, second):
            assert {key: line[key] for key in (*BOUND, "attempt")} == {**BOUND, "attempt": 3}

    def test_events_below_the_level_are_dropped(self) -> None:
        """At WARNING, debug and info are dropped and warning and error are kept."""
        stream = io.StringIO()
        configure_logging("warning", json=True, stream=stream)
        log = get_logger(**BOUND)
        log.debug("a")
        log.info("b")
        log.warning("c")
        log.error("d")
        assert [line["event"] for line in json_lines(stream.getvalue())] == ["c", "d"]

    def test_numeric_level_debug_shows_debug(self) -> None:
        """A logging constant works as the level, and DEBUG shows debug events."""
        stream = io.StringIO()
        configure_logging(logging.DEBUG, json=True, stream=stream)
        get_logger(**BOUND).debug("tool_attempt", attempt=1)
        assert json_lines(stream.getvalue())[0]["level"] == "debug"

    def test_console_rendering_is_key_value_text(self) -> None:
        """Without json, lines are human-readable text with the bound fields as key=value."""
        stream = io.StringIO()
        configure_logging("INFO", stream=stream)
        get_logger(**BOUND, attempt=1).info("retry_scheduled")
        line = stream.getvalue()
        assert "retry_scheduled" in line
        assert "run_id=run-1" in line
        assert "attempt=1" in line
        assert "\x1b[" not in line

    def test_stderr_is_the_default_stream(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without a stream, configured output goes to stderr and stdout stays clean."""
        configure_logging("INFO", json=True)
        get_logger(**BOUND).info("tool_outcome")
        out, err = capsys.readouterr()
        assert out == ""
        assert json_lines(err)[0]["event"] == "tool_outcome"

    def test_exceptions_are_rendered_as_text(self) -> None:
        """log.exception puts the formatted traceback into the line's exception field."""
        stream = io.StringIO()
        configure_logging("INFO", json=True, stream=stream)
        try:
            raise TimeoutError("upstream timed out")
        except TimeoutError:
            get_logger(**BOUND).exception("tool_failed")
        line = json_lines(stream.getvalue())[0]
        assert "TimeoutError: upstream timed out" in line["exception"]

    @pytest.mark.parametrize("level", ["LOUD", 15, -1, True])
    def test_unknown_level_is_rejected(self, level: Any) -> None:
        """A level that is not a standard logging level raises UsageError naming it."""
        with pytest.raises(UsageError, match="level="):
            configure_logging(level)
        assert structlog.is_configured() is False


class TestLogsInfo:
    def test_the_quiet_default_writes_no_info(self) -> None:
        """The default logger (WARNING and up) says it would drop an INFO line."""
        assert logs_info(get_logger(**BOUND)) is False

    @pytest.mark.parametrize(("level", "expected"), [("INFO", True), ("WARNING", False)])
    def test_a_configured_level_decides(self, level: str, expected: bool) -> None:
        """configure_logging's level is what the check reports."""
        configure_logging(level, json=True, stream=io.StringIO())
        assert logs_info(get_logger(**BOUND)) is expected

    def test_capture_logs_sees_info(self) -> None:
        """Under capture_logs every level is kept, so INFO events are built."""
        with capture_logs():
            assert logs_info(get_logger(**BOUND)) is True

    def test_a_logger_without_the_check_may_write(self) -> None:
        """A logger without `is_enabled_for` is never skipped."""
        assert logs_info(object()) is True


class TestUserConfiguredStructlog:
    def test_capture_logs_receives_agentmesh_events(self) -> None:
        """structlog.testing.capture_logs sees our events, bound fields and all."""
        with capture_logs() as logs:
            get_logger(**BOUND, attempt=1).debug("tool_attempt")
        assert logs == [
            {
                **BOUND,
                "attempt": 1,
                "logger": "agentmesh",
                "event": "tool_attempt",
                "log_level": "debug",
            }
        ]

    def test_logger_made_before_capture_logs_is_captured(self) -> None:
        """A logger made under the user's configuration follows in-place chain changes."""
        structlog.configure(processors=[structlog.processors.JSONRenderer()])
        log = get_logger(**BOUND)
        with capture_logs() as logs:
            log.info("tool_outcome")
        assert [entry["event"] for entry in logs] == ["tool_outcome"]

    def test_custom_chain_factory_and_level_are_used(self) -> None:
        """Events go through the user's processors, logger factory and level filter."""
        stream = io.StringIO()
        structlog.configure(
            processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
            logger_factory=structlog.WriteLoggerFactory(stream),
        )
        log = get_logger(**BOUND)
        log.debug("dropped")
        log.info("kept", api_key="plain-key")
        (line,) = json_lines(stream.getvalue())
        assert line["event"] == "kept"
        assert line["api_key"] == REDACTED

    def test_stdlib_logging_gets_the_agentmesh_logger_name(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """With structlog on top of logging, our events arrive on the "agentmesh" logger."""
        structlog.configure(
            processors=[structlog.processors.KeyValueRenderer()],
            wrapper_class=structlog.stdlib.BoundLogger,
            logger_factory=structlog.stdlib.LoggerFactory(),
        )
        with caplog.at_level(logging.INFO, logger="agentmesh"):
            get_logger(**BOUND).info("tool_outcome", authorization="Bearer abc.def")
        (record,) = caplog.records
        assert record.name == "agentmesh"
        assert "abc.def" not in record.getMessage()
        assert "run_id='run-1'" in record.getMessage()


class TestRedactSecrets:
    @pytest.mark.parametrize(
        "key",
        [
            "api_key",
            "apikey",
            "apiKey",
            "x-api-key",
            "X-Api-Key",
            "x_api_key",
            "Authorization",
            "proxy-authorization",
            "token",
            "access_token",
            "secret",
            "client_secret",
            "password",
            "PASSWORD",
            "anthropic_api_key",
        ],
    )
    def test_secret_keys_are_concealed(self, key: str) -> None:
        """A value under a credential key name is replaced whatever its case or separator."""
        assert redact(**{key: "hunter2"})[key] == REDACTED

    @pytest.mark.parametrize("key", ["max_tokens", "tokens", "token_count", "tool", "secretary"])
    def test_lookalike_keys_are_kept(self, key: str) -> None:
        """Keys that only resemble a credential name keep their values."""
        assert redact(**{key: 1024})[key] == 1024

    def test_missing_credentials_stay_visible(self) -> None:
        """None and empty values are not secrets, so "no key configured" stays debuggable."""
        assert redact(api_key=None, token="") == {"api_key": None, "token": ""}

    def test_nested_headers_are_redacted_without_mutating_them(self) -> None:
        """Headers nested in dicts, lists and tuples are redacted in a copy."""
        headers = {"x-api-key": "plain-key", "Authorization": "Bearer abc", "accept": "json"}
        request = {"method": "POST", "headers": headers, "history": [({"token": "t0"},)]}
        event = {"event": "tool_attempt", "request": request}
        out = redact(**event)
        assert out["request"]["headers"] == {
            "x-api-key": REDACTED,
            "Authorization": REDACTED,
            "accept": "json",
        }
        assert out["request"]["history"] == [({"token": REDACTED},)]
        assert headers["x-api-key"] == "plain-key"
        assert request["history"] == [({"token": "t0"},)]

    def test_raw_header_pairs_are_redacted(self) -> None:
        """(name, value) pairs, as httpx keeps raw headers, have their values concealed."""
        out = redact(raw=[(b"x-api-key", b"plain-key"), (b"accept", b"json")])
        assert out["raw"] == [(b"x-api-key", REDACTED), (b"accept", b"json")]

    def test_anthropic_keys_are_cut_out_of_free_text(self) -> None:
        """An sk-ant- key anywhere in a string is replaced, and the rest of the text kept."""
        out = redact(event="call failed", message=f"401 for key {ANTHROPIC_KEY}: invalid")
        assert out["message"] == f"401 for key {REDACTED}: invalid"

    def test_bearer_tokens_are_cut_out_of_free_text(self) -> None:
        """A bearer token in text is replaced while the scheme stays readable."""
        out = redact(event="sent Authorization: Bearer eyJhbGciOi.J9.eyJzdWIi= ok")
        assert out["event"] == f"sent Authorization: Bearer {REDACTED} ok"
        assert redact(note="bearer abc/def+ghi")["note"] == f"bearer {REDACTED}"

    def test_key_fields_in_text_are_cut_out(self) -> None:
        """api_key=... in a URL and x-api-key: ... in a header dump are replaced."""
        out = redact(url="https://h/v1?api_key=plain-key&q=1", dump="{'x-api-key': 'plain-key'}")
        assert out["url"] == f"https://h/v1?api_key={REDACTED}&q=1"
        assert out["dump"] == f"{{'x-api-key': '{REDACTED}'}}"

    def test_clean_events_come_back_unchanged(self) -> None:
        """An event without secrets is returned as the same object, untouched."""
        event = {"event": "tool_outcome", "max_tokens": 1024, "query": "input_tokens=12"}
        assert redact_secrets(None, "info", event) is event

    def test_redaction_is_idempotent(self) -> None:
        """Redacting an already redacted event changes nothing."""
        once = redact(event=f"key {ANTHROPIC_KEY} and Bearer abc", api_key="k", q="api_key=v")
        assert redact(**once) == once

    def test_self_referencing_values_terminate(self) -> None:
        """A list that contains itself is walked to a bounded depth instead of forever."""
        loop: list[Any] = ["Bearer abc"]
        loop.append(loop)
        out = redact(loop=loop)
        assert out["loop"][0] == f"Bearer {REDACTED}"


class TestRedactionInEveryPath:
    def test_quiet_default(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The default stderr line carries no key, header value or token, even in a repr."""
        get_logger(**BOUND).warning(
            f"auth failed for {ANTHROPIC_KEY}",
            headers={"x-api-key": "plain-key", "authorization": "Bearer abc"},
            detail="retry with Bearer xyz",
            request=Request(),
        )
        err = capsys.readouterr().err
        for secret in (ANTHROPIC_KEY, "plain-key", "abc", "xyz"):
            assert secret not in err
        assert REDACTED in err

    def test_configured_json(self) -> None:
        """JSON lines carry no secret, even inside an object's repr or an exception."""

        stream = io.StringIO()
        configure_logging("DEBUG", json=True, stream=stream)
        log = get_logger(**BOUND)
        log.debug("tool_attempt", request=Request(), password="hunter2")
        try:
            raise PermissionError("403 with Authorization: Bearer abc.def")
        except PermissionError:
            log.exception("tool_failed")
        text = stream.getvalue()
        for secret in (ANTHROPIC_KEY, "hunter2", "abc.def"):
            assert secret not in text
        first, second = json_lines(text)
        assert first["request"] == f"Request(headers={{'x-api-key': '{REDACTED}'}})"
        assert f"Bearer {REDACTED}" in second["exception"]

    def test_user_configuration(self) -> None:
        """Events sent through the user's own structlog chain are redacted first."""
        with capture_logs() as logs:
            get_logger(**BOUND, api_key=ANTHROPIC_KEY).info(
                "tool_attempt", headers={"X-Api-Key": "plain-key"}
            )
        (entry,) = logs
        assert entry["api_key"] == REDACTED
        assert entry["headers"] == {"X-Api-Key": REDACTED}

    def test_user_chain_that_already_redacts_runs_it_once(self) -> None:
        """If the user's chain holds redact_secrets, it is not put in front a second time."""
        calls: list[str] = []

        def spy(logger: Any, method_name: str, event_dict: Any) -> Any:
            calls.append(event_dict["event"])
            return event_dict

        structlog.configure(
            processors=[spy, redact_secrets, spy, structlog.processors.JSONRenderer()],
            logger_factory=structlog.WriteLoggerFactory(io.StringIO()),
        )
        get_logger(**BOUND).info("tool_attempt", token="t")
        assert calls == ["tool_attempt", "tool_attempt"]


class TestImport:
    def test_importing_agentmesh_configures_nothing(self) -> None:
        """Importing the package leaves structlog unconfigured and prints nothing."""
        code = (
            "import structlog, agentmesh, agentmesh._logging;"
            "print(structlog.is_configured(), end='')"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert (result.stdout, result.stderr) == ("False", "")

    def test_structlog_is_imported_by_the_first_logger_not_by_agentmesh(self) -> None:
        """`import agentmesh` leaves structlog (and rich, which it pulls in) unimported."""
        stdout, stderr = run_python(
            """
            import sys, agentmesh
            print("structlog" in sys.modules, "rich" in sys.modules, end=" ")
            agentmesh._logging.get_logger().warning("hello")
            print("structlog" in sys.modules, end="")
            """
        )
        assert (stdout, stderr.split()[1:]) == (
            "False False True",
            ["[warning", "]", "hello", "[agentmesh]"],
        )

    def test_configuration_made_before_importing_agentmesh_is_followed(self) -> None:
        """A structlog configured before agentmesh's import carries agentmesh's events."""
        stdout, _ = run_python(
            """
            import structlog
            structlog.configure(processors=[structlog.processors.KeyValueRenderer()])
            import agentmesh._logging
            agentmesh._logging.get_logger(run_id="r").debug("seen")
            """
        )
        assert stdout == "logger='agentmesh' run_id='r' event='seen'\n"

    def test_configuration_made_after_importing_agentmesh_is_followed(self) -> None:
        """A structlog imported and configured after agentmesh carries its events."""
        stdout, _ = run_python(
            """
            import agentmesh._logging, structlog
            structlog.configure(processors=[structlog.processors.KeyValueRenderer()])
            agentmesh._logging.get_logger(run_id="r").debug("seen")
            """
        )
        assert stdout == "logger='agentmesh' run_id='r' event='seen'\n"

    def test_capture_logs_before_the_first_logger_leaves_agentmesh_quiet(self) -> None:
        """Defaults that a capture_logs block left behind before agentmesh's first logger
        still count as unconfigured, and reading them leaves structlog's state as it was."""
        stdout, stderr = run_python(
            """
            import agentmesh._logging, structlog, structlog.testing
            with structlog.testing.capture_logs():
                pass
            chain = structlog.get_config()["processors"]
            agentmesh._logging.get_logger().info("hidden")
            with structlog.testing.capture_logs() as logs:
                structlog.get_logger().info("mine")
            print(structlog.is_configured(), structlog.get_config()["processors"] is chain, end=" ")
            print([entry["event"] for entry in logs], end="")
            """
        )
        assert (stdout, stderr) == ("True True ['mine']", "")


def run_python(code: str) -> tuple[str, str]:
    """stdout and stderr of `code` run in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return result.stdout, result.stderr
