"""Models: the `Model` protocol, `AnthropicModel` (the real SDK) and `ScriptedModel` (offline)."""

from agentmesh.models._anthropic import MODEL_ENV, AnthropicModel
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
from agentmesh.models._scripted import ScriptedModel

__all__ = [
    "MODEL_ENV",
    "AnthropicModel",
    "ContentBlock",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OtherBlock",
    "ScriptedModel",
    "TextBlock",
    "ToolUseBlock",
    "Usage",
]
