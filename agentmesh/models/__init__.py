"""Models: the `Model` protocol; `AnthropicModel`, `OpenAIModel` and `GeminiModel` (the
providers' own SDKs, Claude on Bedrock and Vertex too) and `ScriptedModel` (offline).

`resolve_model("anthropic:claude-sonnet-4-5")` builds one from a string; every place that
takes a model takes such a string too.

Also what a run's model calls may use and did use: `FallbackModel` chains, the health of
each model that the tasks of a run share (`ModelHealth`), `UsageLimits`,
the usage an outcome carries (`UsageSummary`, `ModelUsage`, `ModelFailover`) and the
prices that give it a cost (`DEFAULT_PRICES`, `ModelPrice`, `PriceTable`). These live in
`agentmesh.usage` and are re-exported here.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.models import _anthropic
from agentmesh.models._anthropic import AnthropicModel
from agentmesh.models._base import (
    ContentBlock,
    Model,
    ModelRequest,
    ModelResponse,
    OtherBlock,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from agentmesh.models._fallback import DEFAULT_FAILOVER_ON, FallbackModel
from agentmesh.models._gemini import GeminiModel
from agentmesh.models._health import ModelHealth
from agentmesh.models._openai import OpenAIModel
from agentmesh.models._scripted import ScriptedModel
from agentmesh.models._shorthand import resolve_model
from agentmesh.usage import (
    DEFAULT_PRICES,
    ModelFailover,
    ModelPrice,
    ModelUsage,
    PriceTable,
    UsageLimits,
    UsageSummary,
)

__all__ = [
    "DEFAULT_FAILOVER_ON",
    "DEFAULT_PRICES",
    "AnthropicModel",
    "ContentBlock",
    "FallbackModel",
    "GeminiModel",
    "Model",
    "ModelFailover",
    "ModelHealth",
    "ModelPrice",
    "ModelRequest",
    "ModelResponse",
    "ModelUsage",
    "OpenAIModel",
    "OtherBlock",
    "PriceTable",
    "ScriptedModel",
    "TextBlock",
    "ToolUseBlock",
    "Usage",
    "UsageLimits",
    "UsageSummary",
    "resolve_model",
]


# Exported before issue 25: the variable's name, AGENTMESH_MODEL, is the API.
__getattr__ = kept_for_one_release(
    __name__, {"MODEL_ENV": ("is internal to agentmesh", lambda: _anthropic.MODEL_ENV)}
)
