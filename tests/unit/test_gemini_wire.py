"""GeminiModel's translation of the conversation and of the answer (no SDK, no server)."""

from __future__ import annotations

from typing import Any

import pytest

from agentmesh.models import TextBlock, ToolUseBlock
from agentmesh.models._gemini_wire import (
    contents_of,
    response_of,
    signatures_of,
    tool_config_of,
    usage_of,
)


def answer(*parts: dict[str, Any], finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        candidate["finish_reason"] = finish
    return {"candidates": [candidate], "response_id": "r1", **extra}


class TestContents:
    def test_roles_and_blocks(self) -> None:
        """assistant is model; text, tool_use and tool_result become parts, the result named
        after its call."""
        contents = contents_of(
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "let me look"},
                        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "c1",
                            "content": [{"type": "text", "text": "no such book"}],
                            "is_error": True,
                        }
                    ],
                },
            ],
            {"c1": "c2ln"},
        )
        assert contents == [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "let me look"},
                    {
                        "function_call": {"name": "lookup", "args": {"q": 1}, "id": "c1"},
                        "thought_signature": "c2ln",
                    },
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "function_response": {
                            "name": "lookup",
                            "response": {"error": "no such book"},
                            "id": "c1",
                        }
                    }
                ],
            },
        ]

    def test_a_made_id_is_not_sent_and_blocks_gemini_cannot_take_are_left_out(self) -> None:
        """Another provider's thinking block is dropped; the two user turns become one."""
        contents = contents_of(
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "gemini_call_r_0", "content": "x"}
                    ],
                },
            ],
            {},
        )
        assert contents == [
            {
                "role": "user",
                "parts": [
                    {"text": "hi"},
                    {"function_response": {"name": "unknown_tool", "response": {"output": "x"}}},
                ],
            }
        ]

    @pytest.mark.parametrize(
        ("choice", "config"),
        [
            (None, None),
            ({"type": "auto"}, {"mode": "AUTO"}),
            ({"type": "any"}, {"mode": "ANY"}),
            ({"type": "none"}, {"mode": "NONE"}),
            ({"type": "tool", "name": "t"}, {"mode": "ANY", "allowed_function_names": ["t"]}),
        ],
    )
    def test_tool_choice(self, choice: dict[str, Any] | None, config: Any) -> None:
        expected = None if config is None else {"function_calling_config": config}
        assert tool_config_of(choice) == expected


class TestAnswer:
    def test_text_parts_join_and_thoughts_are_left_out(self) -> None:
        response = response_of(
            answer({"text": "a "}, {"text": "plan", "thought": True}, {"text": "b"}), "m"
        )
        assert not isinstance(response, str)
        assert response.content == (TextBlock(text="a b"),)
        assert response.stop_reason == "end_turn"
        assert response.id == "r1"

    def test_a_call_without_an_id_gets_the_same_made_id_each_time(self) -> None:
        reply = answer({"function_call": {"name": "t", "args": {"x": 1}}, "thought_signature": "s"})
        first, second = response_of(reply, "m"), response_of(reply, "m")
        assert not isinstance(first, str)
        assert first == second
        assert first.content == (ToolUseBlock(id="gemini_call_r1_0", name="t", input={"x": 1}),)
        assert first.stop_reason == "tool_use"
        assert signatures_of(reply, first) == {"gemini_call_r1_0": "s"}

    def test_max_tokens(self) -> None:
        response = response_of(answer({"text": "cut"}, finish="MAX_TOKENS"), "m")
        assert not isinstance(response, str)
        assert response.stop_reason == "max_tokens"

    @pytest.mark.parametrize("finish", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "SPII"])
    def test_a_safety_stop_is_a_refusal_naming_the_reason(self, finish: str) -> None:
        response = response_of(answer(finish=finish), "m")
        assert not isinstance(response, str)
        assert response.stop_reason == "refusal"
        assert f"finish_reason {finish}" in response.text

    @pytest.mark.parametrize(
        ("reply", "problem"),
        [
            ({"candidates": []}, "no candidate"),
            (answer({"text": "half"}, finish=None), "ended before"),
            (answer(finish="MALFORMED_FUNCTION_CALL"), "malformed function call"),
        ],
    )
    def test_what_is_no_answer(self, reply: dict[str, Any], problem: str) -> None:
        said = response_of(reply, "m")
        assert isinstance(said, str)
        assert problem in said


class TestUsage:
    def test_counts(self) -> None:
        assert usage_of(
            {
                "prompt_token_count": 100,
                "cached_content_token_count": 30,
                "tool_use_prompt_token_count": 5,
                "candidates_token_count": 20,
                "thoughts_token_count": 7,
            }
        ) == {
            "input_tokens": 75,
            "cache_read_input_tokens": 30,
            "output_tokens": 27,
            "reasoning_tokens": 7,
        }

    def test_none_is_nothing_counted(self) -> None:
        assert usage_of(None) == {}
