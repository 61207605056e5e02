"""Type-checked, never run: a coordinator as an AG-UI endpoint, and the translation alone."""

from __future__ import annotations

from ag_ui.core import RunAgentInput
from ag_ui.core.events import BaseEvent
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette

from agentmesh import Coordinator, Task, subagent
from agentmesh.agui import PROTOCOL_VERSION, RunTranslator, TasksFrom, create_app, last_user_message
from agentmesh.checkpoints import MemoryStore
from agentmesh.context import Context
from agentmesh.events import ToolCalled


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    return [task.query]


def one_task(given: RunAgentInput) -> Task:
    return Task(query=last_user_message(given), topic="question")


coordinator = Coordinator([docs], store=MemoryStore())
reads: TasksFrom = one_task
app: Starlette = create_app(
    coordinator, token="a-token-of-sixteen-chars", tasks=reads, path="/agui"
)
assert PROTOCOL_VERSION == "1.0"


async def serve_yourself(given: RunAgentInput) -> list[str]:
    encoder = EventEncoder()
    translator = RunTranslator(given.thread_id, given.run_id, given.state)
    lines = [encoder.encode(event) for event in translator.started(given)]
    async with coordinator.stream(one_task(given)) as events:
        async for event in events:
            if isinstance(event, ToolCalled):
                assert event.envelope is None or event.result is None
            translated: list[BaseEvent] = translator.translate(event)
            lines += [encoder.encode(item) for item in translated]
    return lines
