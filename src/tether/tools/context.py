"""What a plain tool sees: its arguments' request, progress and log notifications, MRTR input
(ask, then read the answers on the retry), and the ability to hand back a durable task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tether.jsonrpc.headers import Route


class InputRequired(Exception):
    """Raised by a tool to answer with an InputRequiredResult (MRTR)."""

    def __init__(self, requests: dict[str, Any], state: Any = None) -> None:
        super().__init__("input required")
        self.requests = requests
        self.state = state


class ToolError(Exception):
    """Raised by a tool for a tool-level failure (a result with isError: true)."""

    def __init__(self, message: str, structured: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.structured = structured


@dataclass
class ToolContext:
    name: str
    route: Route
    principal: Any
    input_responses: dict[str, Any]
    request_state: Any
    progress_token: str | int | None
    log_level: str | None
    _notify: Callable[[str, dict[str, Any]], Awaitable[None]]
    _start_task: Callable[[str, Any], Awaitable[dict[str, Any]]]
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def declares_tasks(self) -> bool:
        return self.route.declares_tasks()

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.route.capabilities

    def ask(self, requests: dict[str, Any], state: Any = None) -> NoReturn:
        """Answer this call with an InputRequiredResult; the client retries with the answers
        (`input_responses`) and the state echoed back (verified, in `request_state`)."""
        raise InputRequired(requests, state)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._notify("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """notifications/message, only when the request set a log level (2026-07-28)."""
        if self.log_level is None:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._notify("notifications/message", params)

    async def start_task(self, workflow: str, input: Any = None) -> dict[str, Any]:
        """Start `workflow` and return its CreateTaskResult (the request must declare the
        Tasks extension; otherwise -32021)."""
        return await self._start_task(workflow, input)
