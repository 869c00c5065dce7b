"""The seam between the client's handles and the two ways of reaching runs: the database
(`database.py`, through the runtime's operations) and a Tether server over MCP (`http.py`).
Each implementation raises only `tether.client.errors`."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Literal, Protocol

from tether.client.snapshots import Answered, RunSnapshot

Kind = Literal["database", "http"]


class Transport(Protocol):
    """Start, read, answer, cancel and follow runs by id."""

    kind: Kind

    async def start(self, workflow: str, input: Any, *, idempotency_key: str | None) -> str:
        """Start a run of `workflow`, committed before this returns; its id."""
        ...

    async def get(self, run_id: str) -> RunSnapshot:
        """The run as it is now."""
        ...

    async def answer(self, run_id: str, wait: str, values: Any) -> Answered:
        """Answer the open wait with key or name `wait`."""
        ...

    async def cancel(self, run_id: str) -> None:
        """Ask the run to cancel (cooperative; an ended run is left as it is)."""
        ...

    def changes(self, run_id: str) -> AsyncGenerator[RunSnapshot, None]:
        """The run now, then each change a caller would see, ending after an ended one."""
        ...

    async def aclose(self) -> None:
        """Release the connections."""
        ...
