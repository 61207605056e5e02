"""A coordinator whose second source is another team's agent, reached over A2A.

Save it as `a2a_remote.py` and run `python a2a_remote.py` (in a clone of the repository:
`python -m examples.howto.a2a_remote`; it needs `pip install 'agentmesh-failwell[a2a]'`).
Offline: the other team's agent is served by this same program on loopback, with
`agentmesh.a2a.serve` under uvicorn in a thread, as that team would serve it with
`python -m agentmesh.a2a serve their.module:papers`.

The remote agent finds papers for one topic, finds none for another (an empty success:
searched, nothing found), and refuses the third (a business failure, which crosses A2A as
a `rejected` task carrying its envelope whole). The coordinator routes each as it would
an in-process subagent's outcome: covered, empty, and escalated with the remote reason.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import uvicorn

from agentmesh import BusinessError, Context, Coordinator, ErrorEnvelope, Task, subagent
from agentmesh.a2a import A2AAgent, serve

# -- the other team's agent (on their machine, in real life) --------------------------------

PAPERS = {"retry budgets": [{"title": "Retry budgets in practice", "year": 2024}]}


@subagent(name="papers")
async def papers(task: Task, ctx: Context) -> list[dict[str, object]]:
    """Finds papers on a topic."""
    if task.query == "unpublished drafts":
        raise BusinessError("drafts are not shared outside the lab", error_type="not_shared")
    return PAPERS.get(task.query, [])


def serve_the_remote_team() -> str:
    """Serve `papers` over A2A on a free loopback port; the URL to reach it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(serve(papers, url=url), host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return url


# -- our side: a local source, and the remote agent as the second one -----------------------


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    """Our own notes, found for every topic."""
    return [f"notes on {task.query}"]


async def main() -> None:
    remote = A2AAgent(serve_the_remote_team(), name="papers", timeout=30)
    coordinator = Coordinator([docs, remote])
    topics = ["retry budgets", "quantum retries", "unpublished drafts"]
    report = await coordinator.run([Task(query=topic, topic=topic) for topic in topics])
    for entry in report.coverage:
        line = f"{entry.topic:20} {entry.source:7} {entry.status.value:9} {entry.reason or ''}"
        print(line.rstrip())
    found = [finding.content for finding in report.findings if finding.source == "papers"]
    print(f"found by the remote agent: {found}")
    # The remote envelope arrived whole: its category, type and source, as in-process.
    refused = await remote.run("unpublished drafts")
    assert isinstance(refused, ErrorEnvelope)
    print(f"over A2A: {refused.error_category.value}/{refused.error_type} from {refused.source}")


if __name__ == "__main__":
    asyncio.run(main())
