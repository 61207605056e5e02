"""AG-UI: a coordinator's runs for the front ends that speak the Agent-User Interaction
protocol (CopilotKit and others), with a person in the loop.

    from agentmesh.agui import create_app

    app = create_app(coordinator, token=os.environ["AGUI_TOKEN"])  # any ASGI server

A client POSTs a `RunAgentInput` and reads the run as server-sent events, built with the
`ag-ui-protocol` package's own event types: RUN_STARTED; a step per task; tool-call
events for the subagents' tool calls; the coverage grid as a state snapshot and JSON
Patch deltas; the run's envelopes and other events as custom events; the synthesis as a
text message; RUN_FINISHED (or RUN_ERROR). A run whose calls wait for a person's approval
finishes with the protocol's interrupt outcome, one interrupt per pending approval; the
client answers with a new input whose `resume` entries carry the answers
(`{"approved": true}`, `{"approved": false, "reason": ...}`, `{"approved": true,
"editedArgs": {...}}`). The answers are claimed in the coordinator's store, atomically,
as the run console and `Coordinator.resume` claim them (of two answers at once exactly
one wins; the other gets RUN_ERROR "already_answered"), and the run goes on in the same
response. The events come from `Coordinator.stream` / `resume_stream` alone:
`RunTranslator` turns them into AG-UI events, for a server of your own.

Needs the `agui` extra (`pip install 'agentmesh-failwell[agui]'`); `import agentmesh`
imports none of it.
"""

from agentmesh.agui._app import TasksFrom, create_app, last_user_message
from agentmesh.agui._translate import PROTOCOL_VERSION, RunTranslator

__all__ = ["PROTOCOL_VERSION", "RunTranslator", "TasksFrom", "create_app", "last_user_message"]
