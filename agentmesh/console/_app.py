"""The console as an ASGI application (Starlette): the pages, the downloads, the answers.

Reading is open to whoever reaches the address (127.0.0.1 by default); answering needs
the bearer token or a login session (`Access`), and is refused altogether read-only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentmesh._logging import get_logger
from agentmesh.checkpoints import CheckpointStore
from agentmesh.console._access import COOKIE, Access
from agentmesh.console._answer import answer_approval, answer_from_form
from agentmesh.console._html import approval_html, e, page, run_url, runs_html
from agentmesh.console._live import recent_events, stream_events
from agentmesh.console._resumer import Resumer
from agentmesh.console._run_page import report_html, run_html
from agentmesh.console._runs import STALE_AFTER, list_runs, load_run, run_stamps
from agentmesh.errors import UsageError

if TYPE_CHECKING:
    from agentmesh.coordinator import Coordinator

__all__ = ["create_app"]

_KINDS: Final = {
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
    "html": "text/html; charset=utf-8",
}
# How many runs the approvals page looks through for open questions, newest first.
APPROVALS_SCAN: Final = 200


def create_app(
    store: CheckpointStore,
    *,
    access: Access | None = None,
    read_only: bool = False,
    stale_after: float = STALE_AFTER,
    coordinator: Coordinator | None = None,
) -> Starlette:
    """The console for `store`; it closes the store when the application shuts down.

    `access` holds the bearer token and the login links (a new `Access()` by default);
    `read_only` refuses every answer; `stale_after`: seconds without a save after which
    an unfinished run is shown as stopped. With the application's `coordinator` (its
    store the same data as `store`), the console resumes a run itself once a person's
    answer leaves nothing of it unanswered.
    """
    resumer = None if coordinator is None else Resumer(coordinator, store)
    keys = access if access is not None else Access()
    console = _Console(store, keys, read_only, stale_after, resumer)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if resumer is not None:
                await resumer.wait()
            await store.close()

    routes = [
        Route("/", console.runs),
        Route("/approvals", console.approvals),
        Route("/login/{code}", console.login),
        # A run id may hold "/": the longer routes are tried first.
        Route("/runs/{run_id:path}/report.{kind}", console.report),
        Route("/runs/{run_id:path}/approvals/{approval_id}", console.answer, methods=["POST"]),
        Route("/runs/{run_id:path}/events", console.events),
        Route("/runs/{run_id:path}", console.run),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


@dataclass(frozen=True, slots=True)
class _Console:
    """The pages' handlers over one store."""

    store: CheckpointStore
    keys: Access
    read_only: bool
    stale_after: float
    resumer: Resumer | None

    def answering(self, request: Request) -> bool:
        return not self.read_only and self.keys.allows(request)

    async def runs(self, request: Request) -> Response:
        number = _page_number(request)
        found, more = await list_runs(self.store, page=number, stale_after=self.stale_after)
        return HTMLResponse(page("Runs", runs_html(found, number, more)))

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        view = await load_run(self.store, run_id, stale_after=self.stale_after)
        if view is None:
            return _missing(run_id)
        live = await recent_events(self.store, view)
        return HTMLResponse(run_html(view, can_answer=self.answering(request), live=live))

    async def events(self, request: Request) -> Response:
        return await stream_events(self.store, request.path_params["run_id"], request)

    async def report(self, request: Request) -> Response:
        run_id, kind = request.path_params["run_id"], request.path_params["kind"]
        view = await load_run(self.store, run_id, stale_after=self.stale_after)
        if view is None or kind not in _KINDS:
            return _missing(run_id)
        if kind == "md":
            body = view.report.to_markdown()
        else:
            body = view.report.to_json() if kind == "json" else report_html(view)
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
        headers = {"content-disposition": f'attachment; filename="report-{name}.{kind}"'}
        return Response(body, media_type=_KINDS[kind], headers=headers)

    async def approvals(self, request: Request) -> Response:
        found = []
        for stamp in await run_stamps(self.store, limit=APPROVALS_SCAN):
            view = await load_run(self.store, stamp.run_id, stale_after=self.stale_after)
            if view is not None:
                found += [
                    approval_html(stamp.run_id, state, can_answer=self.answering(request))
                    for state in view.approvals
                    if state.answer is None
                ]
        body = found or ["<p>Nothing waits for a person.</p>"]
        return HTMLResponse(page("Approvals", body))

    async def login(self, request: Request) -> Response:
        session = self.keys.redeem(request.path_params["code"])
        if session is None:
            body = ["<p>This login link is unknown or was used already.</p>"]
            return HTMLResponse(page("Login", body), status_code=403)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/")
        return response

    async def answer(self, request: Request) -> Response:
        return await _answer(request, self)


async def _answer(request: Request, console: _Console) -> Response:
    """Claim the answer a form gives; 303 to the run page when it stands, 409 when another
    answer stood first (with whose and when), 400 for an answer that does not fit."""
    run_id, approval_id = request.path_params["run_id"], request.path_params["approval_id"]
    store, stale_after = console.store, console.stale_after
    if not console.answering(request):
        why = "the console is read-only" if console.read_only else "log in or send the bearer token"
        return HTMLResponse(page("Not allowed", [f"<p>{why}.</p>"]), status_code=403)
    view = await load_run(store, run_id, stale_after=stale_after)
    state = (
        None
        if view is None
        else next((s for s in view.approvals if s.pending.id == approval_id), None)
    )
    if view is None or state is None:
        return _missing(f"{run_id} / approval {approval_id}")
    form = await request.form()
    try:
        given = answer_from_form(state.pending, form)
        taken = await answer_approval(store, run_id, approval_id, given, by=str(form.get("by", "")))
    except UsageError as exc:
        return HTMLResponse(run_html(view, can_answer=True, notice=str(exc)), status_code=400)
    if taken is None:
        get_logger(component="console").info(
            "approval_answered", run_id=run_id, approval=approval_id
        )
        if console.resumer is not None:
            console.resumer.soon(run_id)
        return RedirectResponse(run_url(run_id) + f"#approval-{approval_id}", status_code=303)
    notice = (
        f"Approval {approval_id} was already answered: {taken.answer}"
        f"{'' if taken.by is None else ' by ' + taken.by}"
        f"{'' if taken.at is None else f' at {taken.at:%Y-%m-%d %H:%M:%S} UTC'}. "
        "Your answer was not recorded."
    )
    fresh = await load_run(store, run_id, stale_after=stale_after) or view
    return HTMLResponse(run_html(fresh, can_answer=True, notice=notice), status_code=409)


def _page_number(request: Request) -> int:
    try:
        return max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        return 1


def _missing(what: str) -> Response:
    return HTMLResponse(
        page("Not found", [f"<p>The store holds no run {e(what)}.</p>"]), status_code=404
    )
