"""What a plain tool sees: its arguments' request, progress and log notifications, MRTR input
(ask, then read the answers on the retry), and the ability to hand back a durable task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tether.jsonrpc.headers import Route
from tether.principal import Principal


class InputRequired(Exception):
    """Raised by a tool to answer with an InputRequiredResult (MRTR)."""

    def __init__(self, requests: dict[str, Any], state: Any = None) -> None:
        super().__init__("input required")
        self.requests = requests
        self.state = state


class ToolError(Exception):
    """Raised by a plain tool for a tool-level failure (a result with `isError: true`).

    The client gets a tool result whose text is `message`, rather than a JSON-RPC error.

    Args:
        message: What went wrong, for the client (and the model reading the result).
        structured: Further fields of the result's structured content.

    Attributes:
        message: What went wrong, for the client.
        structured: Further fields of the result's structured content.
    """

    def __init__(self, message: str, structured: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.structured = structured


@dataclass
class ToolContext:
    """What a plain tool ([`App.tool`][tether.App.tool]) gets as its first argument: the call.

    Attributes:
        name: The tool's name.
        principal: Who calls: the principal the security layer resolved for the request
            (name, role, tenant); None when no security layer runs.
        input_responses: The client's answers to what an earlier try of this call asked
            with [`ask`][tether.ToolContext.ask], by request key (empty on the first try).
        request_state: The `state` that try passed to `ask`, handed back verified.
        progress_token: The call's progress token, when the client sent one.
        log_level: The log level the request set, if any (see [`log`][tether.ToolContext.log]).
    """

    name: str
    route: Route
    principal: Principal | None
    input_responses: dict[str, Any]
    request_state: Any
    progress_token: str | int | None
    log_level: str | None
    _notify: Callable[[str, dict[str, Any]], Awaitable[None]]
    _start_task: Callable[[str, Any], Awaitable[dict[str, Any]]]
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def declares_tasks(self) -> bool:
        """Whether the calling client declared the Tasks extension."""
        return self.route.declares_tasks()

    @property
    def capabilities(self) -> dict[str, Any]:
        """The client capabilities the request declared."""
        return self.route.capabilities

    def ask(self, requests: dict[str, Any], state: Any = None) -> NoReturn:
        """Answer this call with an `InputRequiredResult` asking the client for input.

        The client retries the call with its answers, which the retry reads in
        `input_responses`, and `state` echoed back (sealed, so verified) in
        `request_state`. A client older than 2026-07-28 cannot answer: it gets a tool error.

        Args:
            requests: What to ask, by key: elicitation or sampling requests, as MCP
                defines them.
            state: Any JSON the retry needs back.

        Raises:
            InputRequired: Always; let it propagate, the server answers the call with it.
        """
        raise InputRequired(requests, state)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send a progress notification, when the client asked for them (a progress token).

        Args:
            progress: How far the call has got; it should grow with each notification.
            total: The value `progress` will reach, if known.
            message: A line describing the progress.
        """
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._notify("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message (`notifications/message`), when the request set a log level.

        Args:
            level: The message's level (`debug`, `info`, `warning`, `error`, ...).
            data: The message: any JSON.
            logger: The name of the logger it comes from.
        """
        if self.log_level is None:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._notify("notifications/message", params)

    async def start_task(self, workflow: str, input: Any = None) -> dict[str, Any]:
        """Start a run of `workflow` and answer the call with it as an MCP task.

        Return the result from the tool: the client then follows the run as a task. A call
        from a client without the Tasks extension is refused with error -32021 instead.

        Args:
            workflow: A workflow whose runs are served as tasks: registered with
                `expose=Exposure(tasks=True)` (or with `tool_set` or `tool`).
            input: The run's input.

        Returns:
            The `CreateTaskResult` to return from the tool.

        Raises:
            ValueError: The workflow is not served as MCP tasks.
        """
        return await self._start_task(workflow, input)
