"""A2A (the Agent2Agent protocol) with the official SDK (the `a2a` extra,
`pip install 'agentmesh-failwell[a2a]'`): a remote agent as a subagent whose every end is
an outcome a coordinator can route.

    from agentmesh.a2a import A2AAgent

    research = A2AAgent("http://127.0.0.1:9999", name="research", timeout=60)
    outcome = await research.run("fresh papers on retry budgets")

`import agentmesh` does not import this package nor the SDK.
"""

from agentmesh.a2a._agent import A2AAgent

__all__ = ["A2AAgent"]
