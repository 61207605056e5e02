"""`ScriptedModel`: plays back a script, for tests and the offline default."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from agentmesh.errors import UsageError
from agentmesh.models._base import ModelRequest, ModelResponse

__all__ = ["ScriptedModel"]

ScriptStep: TypeAlias = ModelResponse | BaseException | Callable[[ModelRequest], ModelResponse]


class ScriptedModel:
    """A model that answers from a script and records every request it receives.

    Each step is a `ModelResponse` to return, an exception to raise (to play a failed
    call), or a function of the request that returns a response. Build responses with
    `ModelResponse.of_text(...)` / `of_tool_calls(...)`, or, for the tools the coordinator's
    helpers force, `ScriptedModel.propose_query(...)` and `ScriptedModel.write_summary(...)`.
    """

    def __init__(self, script: Iterable[ScriptStep], *, name: str = "scripted") -> None:
        self.name = name
        self._script = list(script)
        self.requests: list[ModelRequest] = []

    @staticmethod
    def propose_query(query: str | None, reason: str = "") -> ModelResponse:
        """The answer `LLMRewriter` forces: a `propose_query` call (None: no rewording can help)."""
        return ModelResponse.of_tool_calls(("propose_query", {"query": query, "reason": reason}))

    @staticmethod
    def write_summary(summary: str) -> ModelResponse:
        """The answer `LLMSynthesizer` forces: a `write_summary` call citing findings as [n]."""
        return ModelResponse.of_tool_calls(("write_summary", {"summary": summary}))

    @property
    def remaining(self) -> int:
        return len(self._script)

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        # Deep copies: the caller keeps appending to its conversation after this call.
        request = ModelRequest(
            messages=tuple(copy.deepcopy(dict(m)) for m in messages),
            system=system,
            tools=tuple(copy.deepcopy(dict(t)) for t in tools),
            tool_choice=dict(tool_choice) if tool_choice is not None else None,
            max_tokens=max_tokens,
        )
        self.requests.append(request)
        if not self._script:
            raise UsageError(
                f"ScriptedModel {self.name!r}: script exhausted after {len(self.requests) - 1} "
                "responses; add a step for this request"
            )
        step = self._script.pop(0)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return step
        return step(request)
