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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentmesh.a2a._agent import A2AAgent
    from agentmesh.a2a._server import serve

__all__ = ["A2AAgent", "serve"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # `_server` first: it imports the SDK, or says which extra to install when it is missing.
    from agentmesh.a2a import _agent, _server

    value = {"serve": _server.serve, "A2AAgent": _agent.A2AAgent}[name]
    globals()[name] = value  # loaded once: later uses find it without this function
    return value


def __dir__() -> list[str]:
    # The lazy names are there too, though not loaded yet: `dir()` and completion see them.
    return sorted(set(globals()) | set(__all__))
