"""The agentmesh pytest plugin, registered through the `pytest11` entry point.

It gives every project that installs agentmesh the `fake_messages_api` and
`fake_chat_completions_api` and `fake_gemini_api` fixtures. The fake servers (and the
vendor SDKs they serve) are imported inside the fixtures; loading the plugin imports
agentmesh's core, about as much as `import agentmesh`, in every test session of an
environment that has agentmesh installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agentmesh.testing._fake_chat_completions import FakeChatCompletionsAPI
    from agentmesh.testing._fake_gemini_api import FakeGeminiAPI
    from agentmesh.testing._fake_messages_api import FakeMessagesAPI


@pytest.fixture
def fake_messages_api() -> Iterator[FakeMessagesAPI]:
    """A started `FakeMessagesAPI` on loopback, closed after the test.

    At teardown, any problem the server saw (an exhausted script, a handler that raised)
    fails the test, unless the test already took it with `api.check()`.
    """
    from agentmesh.testing._fake_messages_api import FakeMessagesAPI

    with FakeMessagesAPI() as api:
        yield api
        api.check()


@pytest.fixture
def fake_chat_completions_api() -> Iterator[FakeChatCompletionsAPI]:
    """A started `FakeChatCompletionsAPI` on loopback, closed after the test; any problem
    the server saw fails the test at teardown, unless the test took it with `check()`."""
    from agentmesh.testing._fake_chat_completions import FakeChatCompletionsAPI

    with FakeChatCompletionsAPI() as api:
        yield api
        api.check()


@pytest.fixture
def fake_gemini_api() -> Iterator[FakeGeminiAPI]:
    """A started `FakeGeminiAPI` on loopback, closed after the test.

    At teardown, any problem the server saw (an exhausted script, a handler that raised)
    fails the test, unless the test already took it with `api.check()`.
    """
    from agentmesh.testing._fake_gemini_api import FakeGeminiAPI

    with FakeGeminiAPI() as api:
        yield api
        api.check()
