"""`serve`: subagents or a coordinator as an A2A agent, an ASGI app on the SDK's server.

The app is the SDK's own: its agent-card route at `/.well-known/agent-card.json` and its
JSON-RPC route at `/`, with its `DefaultRequestHandler` and task store; what a task does
is ours (`_server_run.Executor`). The card's skills are the subagents (or the
coordinator, as one skill). With a `token`, every request but the card's needs
`Authorization: Bearer <token>`, compared in constant time, and the card says so.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Final
from urllib.parse import urlsplit

from agentmesh._engine._serving import ASGIApp, BearerToken, Scope
from agentmesh._numbers import number
from agentmesh.a2a._server_run import Executor, Served, ServedCoordinator, ServedSubagents
from agentmesh.checkpoints import CheckpointStore, MemoryStore
from agentmesh.coordinator import Coordinator
from agentmesh.errors import UsageError
from agentmesh.policies import ToolPolicy
from agentmesh.retry import RetryBudget
from agentmesh.subagents import Subagent

try:
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskStore
    from a2a.types.a2a_pb2 import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
    )
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
    from starlette.applications import Starlette
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agentmesh.a2a needs the A2A SDK's server: pip install 'agentmesh-failwell[a2a]'"
    ) from exc

__all__ = ["DEFAULT_URL", "serve"]

DEFAULT_URL: Final = "http://127.0.0.1:9999"
"""Where `serve` says the agent is, unless told (what `python -m agentmesh.a2a serve` binds)."""
_SKILL_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_BEARER: Final = "bearer"


def serve(
    agents: Subagent | Iterable[Subagent] | Coordinator,
    *,
    name: str = "agentmesh",
    description: str | None = None,
    url: str = DEFAULT_URL,
    token: str | None = None,
    timeout: float | None = None,  # seconds per task, not a deadline
    retry_budget: RetryBudget | None = None,
    policies: Sequence[ToolPolicy] = (),
    store: CheckpointStore | None = None,
    task_store: TaskStore | None = None,
) -> ASGIApp:
    """An A2A agent (an ASGI app) whose skills are `agents`: subagents, or a coordinator.

    A message is one task, one run: of the subagent its metadata names (`skill`; the only
    one when there is one), or of the coordinator. Its `topic` and other metadata become
    the task's. How each end of a run becomes a task state is in the how-to (A2A).

    Args:
        agents: a subagent or several (one skill each, named after it), or a coordinator
            (one skill, `name`, whose artifact is the run's report).
        name: the agent's name on its card.
        description: the card's description (a sentence of the skills' by default).
        url: where clients reach the app, as the card says (mounted elsewhere, or behind
            a proxy, give that URL).
        token: when given, every request but the card's needs this bearer token.
        timeout: seconds for one subagent task, waits included (subagents only: a
            coordinator has its own).
        retry_budget: shared by every task served (subagents only); a fresh one per task
            by default.
        policies: applied to every task's tool calls, before each subagent's own
            (subagents only: a coordinator's are its own).
        store: where pending approvals wait for an answer, and completed non-idempotent
            calls are recorded (subagents only: a coordinator's is its `store=`); in
            memory by default.
        task_store: the SDK's store of A2A tasks; in memory by default.
    """
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"serve(name=) takes a non-empty str, got {name!r}")
    _check_url(url)
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise UsageError("serve(token=) takes a str of at least 16 characters (a secret)")
    served = _served(agents, name, timeout, retry_budget, policies, store)
    card = _card(name, description, url, served, token is not None)
    app = _app(served, card, task_store if task_store is not None else InMemoryTaskStore())
    if token is None:
        return app
    # The card stays readable without the token: it is how a client learns it needs one.
    return BearerToken(
        app, token, message="this A2A agent needs a bearer token", open_path=_asks_for_card
    )


def _app(served: Served, card: AgentCard, task_store: TaskStore) -> ASGIApp:
    """The SDK's routes for `card` over its request handler, running our executor."""
    handler = DefaultRequestHandler(
        agent_executor=Executor(served), task_store=task_store, agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()  # no task of a stopped server runs on

    return Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")],
        lifespan=lifespan,
    )


def _served(
    agents: object,
    name: str,
    timeout: float | None,
    budget: RetryBudget | None,
    policies: Sequence[ToolPolicy],
    store: CheckpointStore | None,
) -> Served:
    if isinstance(agents, Coordinator):
        given = {"timeout": timeout, "retry_budget": budget, "store": store}
        mixed = sorted(key for key, value in given.items() if value is not None)
        if policies:
            mixed.append("policies")
        if mixed:
            raise UsageError(
                f"serve({', '.join(f'{key}=' for key in mixed)}) is for subagents: give it "
                "to the Coordinator"
            )
        if not _SKILL_ID.fullmatch(name):
            raise UsageError(f"serve(name=) names the coordinator's skill: {name!r} is not an id")
        # Without a store, nothing of a coordinator's run can wait for a person (its
        # constructor refused policies that ask), so a store of its own is never read.
        return ServedCoordinator(agents, name, agents.store or MemoryStore())
    if timeout is not None:
        timeout = number("serve(timeout=)", timeout, unit="seconds")
    if budget is not None and not isinstance(budget, RetryBudget):
        raise UsageError(f"serve(retry_budget=) takes a RetryBudget, got {budget!r}")
    for policy in policies:
        if not isinstance(policy, ToolPolicy):
            raise UsageError(f"serve(policies=): {policy!r} is not a policy")
    if store is not None and not isinstance(store, CheckpointStore):
        raise UsageError(f"serve(store=) takes a CheckpointStore, got {store!r}")
    return ServedSubagents(
        _subagents(agents), store or MemoryStore(), timeout, budget, tuple(policies)
    )


def _subagents(agents: object) -> tuple[Subagent, ...]:
    """The subagents to serve, checked: subagents only, distinct names fit for skill ids."""
    if isinstance(agents, Subagent):
        return (agents,)
    if isinstance(agents, str | bytes) or not isinstance(agents, Iterable):
        raise UsageError(f"serve() takes subagents or a Coordinator, got {agents!r}")
    found = tuple(agents)
    if not found:
        raise UsageError("serve() got no subagent: give at least one")
    seen: set[str] = set()
    for agent in found:
        if not isinstance(agent, Subagent):
            raise UsageError(f"serve(): {agent!r} is not a Subagent")
        if not _SKILL_ID.fullmatch(agent.name):
            raise UsageError(
                f"serve(): {agent.name!r} is not a skill id (1-128 of A-Z a-z 0-9 _ - .)"
            )
        if agent.name in seen:
            raise UsageError(f"serve(): two subagents are named {agent.name!r}")
        seen.add(agent.name)
    return found


def _check_url(url: object) -> None:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise UsageError(f"serve(url=) takes the http(s) URL clients reach, got {url!r}")


def _card(name: str, description: str | None, url: str, served: Served, guarded: bool) -> AgentCard:
    skills = [
        AgentSkill(id=skill, name=skill, description=said, tags=["agentmesh"])
        for skill, said in served.skills()
    ]
    card = AgentCard(
        name=name,
        description=description or f"agentmesh: {', '.join(s.id for s in skills)}",
        version=_version(),
        supported_interfaces=[
            AgentInterface(
                url=url.rstrip("/") + "/", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
    if guarded:
        card.security_schemes[_BEARER].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        requirement = SecurityRequirement()
        requirement.schemes[_BEARER].SetInParent()
        card.security_requirements.append(requirement)
    return card


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentmesh-failwell")
    except PackageNotFoundError:  # pragma: no cover - a source tree not installed
        return "0"


def _asks_for_card(scope: Scope) -> bool:
    """Whether `scope` asks for the agent card (mounted under a prefix, the path still
    holds it: `root_path` names it)."""
    path = str(scope["path"]).removeprefix(str(scope.get("root_path", "")))
    return scope.get("method") == "GET" and path == AGENT_CARD_WELL_KNOWN_PATH
