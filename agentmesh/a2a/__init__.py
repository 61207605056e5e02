"""A2A (the Agent2Agent protocol) with the official SDK (the `a2a` extra,
`pip install 'agentmesh-failwell[a2a]'`), both ways: a remote agent as a subagent whose
every end is an outcome a coordinator can route, and subagents or a coordinator served
as an A2A agent whose every outcome is a task state.

    from agentmesh.a2a import A2AAgent, serve

    research = A2AAgent("http://127.0.0.1:9999", name="research", timeout=60)
    outcome = await research.run("fresh papers on retry budgets")

    app = serve([docs_agent, web_agent], url="http://127.0.0.1:9999")  # an ASGI app
    # or: python -m agentmesh.a2a serve myapp.agents:subagents --port 9999

`import agentmesh` does not import this package nor the SDK; the SDK loads with the first
of these names used, so `python -m agentmesh.a2a serve` checks its arguments before.
"""

from typing import TYPE_CHECKING

from agentmesh._signatures import loaded_at_first_use

if TYPE_CHECKING:
    from agentmesh.a2a._agent import A2AAgent
    from agentmesh.a2a._server import serve

__all__ = ["A2AAgent", "serve"]

# `_server` first: it imports the SDK, or says which extra to install when it is missing.
__getattr__, __dir__ = loaded_at_first_use(
    __name__,
    {"serve": "agentmesh.a2a._server", "A2AAgent": "agentmesh.a2a._agent"},
    first="agentmesh.a2a._server",
)
