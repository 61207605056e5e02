"""Who may change something through the console: a bearer token, or a session that a
one-time login link opened.

Reading needs nothing (the console binds 127.0.0.1 by default). Answering an approval
needs `Authorization: Bearer <token>` or the session cookie that `/login/<code>` sets
once per code: HttpOnly (no script reads it) and SameSite=Strict (no other site's page
can send it along with a form). Sessions live in this process's memory: a restarted
console prints a new link.
"""

from __future__ import annotations

import secrets
from typing import Final

from starlette.requests import Request

__all__ = ["COOKIE", "Access"]

COOKIE: Final = "agentmesh_console"


class Access:
    """The console's keys: one bearer token, one-time login codes, and open sessions.

    Args:
        token: the bearer token to accept; a random one is made when not given.
    """

    def __init__(self, token: str | None = None) -> None:
        if token is not None and (not isinstance(token, str) or len(token) < 16):
            raise ValueError("Access(token=) needs a string of at least 16 characters")
        self.token = token if token is not None else secrets.token_urlsafe(32)
        self._codes: set[str] = set()
        self._sessions: set[str] = set()

    def login_code(self) -> str:
        """A new code for `/login/<code>`, good for one login."""
        code = secrets.token_urlsafe(32)
        self._codes.add(code)
        return code

    def redeem(self, code: str) -> str | None:
        """Spend a login code: a new session id, or None for a code unknown or used."""
        if code not in self._codes:
            return None
        self._codes.discard(code)
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def allows(self, request: Request) -> bool:
        """Whether `request` carries the bearer token or an open session's cookie."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and secrets.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            return True
        return request.cookies.get(COOKIE, "") in self._sessions

    def __repr__(self) -> str:
        # Never the token itself: a repr ends up in logs.
        return f"<Access sessions={len(self._sessions)}>"
