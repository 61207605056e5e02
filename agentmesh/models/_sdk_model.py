"""What the provider models share: the SDK client a model may own, and how it ends."""

from __future__ import annotations

from types import TracebackType
from typing import Generic, Self, TypeVar

from agentmesh.errors import TransientError

__all__ = ["SdkModel"]

ClientT = TypeVar("ClientT")

# An unparseable answer's details keep its start: a whole body can be megabytes.
_MAX_DETAIL = 500


class SdkModel(Generic[ClientT]):
    """A model that calls a provider through its SDK's client.

    The client is built on first use when none is passed in; a model closes only a client
    it built (one passed in belongs to whoever made it).
    """

    name: str
    _client: ClientT | None
    _owns_client: bool

    async def _close_client(self, client: ClientT) -> None:
        raise NotImplementedError  # each SDK closes its client its own way

    async def aclose(self) -> None:
        """Close the client this model built (a client passed in belongs to its owner)."""
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await self._close_client(client)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _unparseable(self, detail: str) -> TransientError:
        # The server's answer, not our input, is malformed: worth another try.
        return TransientError(
            f"unparseable response from {self.name}",
            error_type="invalid_response",
            details=detail[:_MAX_DETAIL],
        )
