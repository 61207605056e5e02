"""Test doubles for agentmesh users: record backoff delays, inject failures, fake the API.

sleep = RecordingSleep()
policy = RetryPolicy(max_attempts=4, initial_delay=0.1, jitter="none", sleep=sleep)
...
assert sleep.delays == [0.1, 0.2, 0.4]

`FakeMessagesAPI` serves a scripted Anthropic Messages API on loopback for the real SDK,
`FakeChatCompletionsAPI` OpenAI's Chat Completions API for the `openai` SDK, and
`FakeGeminiAPI` the Gemini Developer API for the `google-genai` SDK; the
`fake_messages_api`, `fake_chat_completions_api` and `fake_gemini_api` pytest fixtures
(registered by agentmesh's pytest plugin) give each test a started one. They need the
`testing` extra (`pip install 'agentmesh-failwell[testing]'`, for their HTTP server) and
are imported on first use, so `RecordingSleep` and `FailTimes` cost nothing more.
"""

from typing import TYPE_CHECKING

from agentmesh._signatures import loaded_at_first_use
from agentmesh.testing._faults import FailTimes, RecordingSleep

if TYPE_CHECKING:
    from agentmesh.testing._chat_replies import (
        ChatCompletionReply,
        ChatErrorReply,
        ChatRawReply,
        ChatReply,
        ChatSlowReply,
        ChatStreamCut,
    )
    from agentmesh.testing._fake_chat_completions import FakeChatCompletionsAPI
    from agentmesh.testing._fake_gemini_api import FakeGeminiAPI, GeminiRequest
    from agentmesh.testing._fake_messages_api import (
        ErrorReply,
        FakeMessagesAPI,
        MessageReply,
        RawReply,
        RecordedRequest,
        Reply,
        SlowReply,
        StreamErrorReply,
    )
    from agentmesh.testing._gemini_replies import (
        GeminiAnswer,
        GeminiError,
        GeminiReply,
        GeminiSlow,
        GeminiStreamCut,
    )

__all__ = [
    "ChatCompletionReply",
    "ChatErrorReply",
    "ChatRawReply",
    "ChatReply",
    "ChatSlowReply",
    "ChatStreamCut",
    "ErrorReply",
    "FailTimes",
    "FakeChatCompletionsAPI",
    "FakeGeminiAPI",
    "FakeMessagesAPI",
    "GeminiAnswer",
    "GeminiError",
    "GeminiReply",
    "GeminiRequest",
    "GeminiSlow",
    "GeminiStreamCut",
    "MessageReply",
    "RawReply",
    "RecordedRequest",
    "RecordingSleep",
    "Reply",
    "SlowReply",
    "StreamErrorReply",
]

_HOMES = {
    **dict.fromkeys(
        [
            "ChatCompletionReply",
            "ChatErrorReply",
            "ChatRawReply",
            "ChatReply",
            "ChatSlowReply",
            "ChatStreamCut",
        ],
        "agentmesh.testing._chat_replies",
    ),
    "FakeChatCompletionsAPI": "agentmesh.testing._fake_chat_completions",
    "FakeGeminiAPI": "agentmesh.testing._fake_gemini_api",
    "GeminiRequest": "agentmesh.testing._fake_gemini_api",
    **dict.fromkeys(
        ["GeminiAnswer", "GeminiError", "GeminiReply", "GeminiSlow", "GeminiStreamCut"],
        "agentmesh.testing._gemini_replies",
    ),
    **dict.fromkeys(
        [
            "ErrorReply",
            "FakeMessagesAPI",
            "MessageReply",
            "RawReply",
            "RecordedRequest",
            "Reply",
            "SlowReply",
            "StreamErrorReply",
        ],
        "agentmesh.testing._fake_messages_api",
    ),
}
__getattr__, __dir__ = loaded_at_first_use(__name__, _HOMES)
