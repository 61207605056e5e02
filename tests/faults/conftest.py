"""Shared by the fault suite: a planted API key, and a scan of everything a test produced.

Every test here runs with agentmesh's logging on at DEBUG (JSON, into a buffer) and with
a planted Anthropic key in the environment. At teardown the log, pytest's captured
records and every artifact the test handed to `captured` (envelopes, reports, exception
messages) are scanned for the key: a leak anywhere fails the test that caused it.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from pydantic import BaseModel

from agentmesh import Report, configure_logging

PLANTED_KEY = "sk-ant-api03-faultsuite-PLANTED-0123456789abcdef"
"""An Anthropic-shaped key: in the environment for every test, and planted where it may leak."""

PLANTED_TOKEN = "eyJhbGciOiJIUzI1NiJ9.faultsuitePLANTEDbearer.c2lnbmF0dXJl"
"""A bearer token that is not shaped like an Anthropic key (an OAuth or proxy token)."""

PLANTED_PASSWORD = "hunter2-faultsuite-PLANTED-pw"
"""A password, planted in URLs (`postgresql://bob:<it>@db/x`) and under `password=`."""

# The tails too: a leak that masked only the prefix is still a leak.
_NEEDLES = (
    PLANTED_KEY,
    PLANTED_KEY[-24:],
    PLANTED_TOKEN,
    PLANTED_TOKEN[20:45],
    PLANTED_PASSWORD,
    PLANTED_PASSWORD[-12:],
)


def leaks(text: str) -> list[str]:
    """The planted secrets (or recognisable parts of them) found in `text`."""
    return [needle for needle in _NEEDLES if needle in text]


class Captured:
    """What a test produced that leaves the process: scanned for the planted secrets."""

    def __init__(self) -> None:
        self.log = io.StringIO()
        self.texts: list[str] = []

    def add(self, *items: Any) -> None:
        for item in items:
            self.texts.append(_render(item))

    def everything(self) -> str:
        return "\n".join([self.log.getvalue(), *self.texts])


def _render(item: Any) -> str:
    if isinstance(item, Report):
        return "\n".join([item.to_json(), item.to_markdown(), repr(item)])
    if isinstance(item, BaseModel):
        return "\n".join([item.model_dump_json(), repr(item), str(item)])
    if isinstance(item, BaseException):
        return "\n".join([str(item), repr(item), repr(item.args)])
    return str(item)


@pytest.fixture(autouse=True)
def captured(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> Iterator[Captured]:
    """Log every agentmesh event at DEBUG into a buffer; scan it all for the planted key."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    caplog.set_level(logging.DEBUG)
    artifacts = Captured()
    configure_logging("DEBUG", json=True, stream=artifacts.log)
    try:
        yield artifacts
    finally:
        structlog.reset_defaults()
    # A test that documents a known leak (xfail) fails in its own body, not here.
    if request.node.get_closest_marker("xfail") is None:
        found = leaks(artifacts.everything() + caplog.text)
        assert not found, f"planted secret leaked into what the test produced: {found}"


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """`figure(name, value)`: a measured figure, kept in the test's `user_properties`.

    docs/reliability.md quotes them; `--junitxml` with `-o junit_family=xunit1`
    writes them out. Unlike `record_property`, this never warns under other families.
    """

    def record(name: str, value: object) -> None:
        request.node.user_properties.append((name, value))

    return record
