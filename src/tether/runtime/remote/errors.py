"""What a remote call (a tool of an MCP server, or an A2A agent) raises in workflow code,
and how each ending is recorded.

    RemoteError               the call did not return the tool's result (the agent's reply)
     ├── RemoteToolError      the tool ran and reported an error (`isError`); `.result`
     ├── RemoteProtocolError  a JSON-RPC error, a refused request (HTTP 4xx), or a `failed`
     │    │                   task; `.code`, `.data`
     │    └── RemoteRejected  the agent rejected the task (A2A `rejected`)
     ├── RemoteTaskLost       the remote no longer knows the task (expired, purged, lost)
     ├── RemoteCancelled      the remote's task ended `cancelled` (cancelled on its side)
     ├── RemoteTimeout        the call's `timeout` passed (also a `TimeoutError`)
     ├── RemoteUnavailable    the remote stayed unreachable (transport errors, HTTP 5xx)
     │                        through the call's retries
     └── UnknownRemote        no remote of that name (and kind) is configured

Each is recorded as the call's result (`as_record`) and raised again the same way on every
replay (`from_record`). `Transient` is internal: a failure worth retrying, which the call's
driver turns into a durable backoff and, once the retries are spent, `RemoteUnavailable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final


class RemoteError(Exception):
    """A remote call ended without the tool's result (or the agent's reply).

    Raised by [`Context.call_tool`][tether.Context.call_tool] and
    [`Context.ask_agent`][tether.Context.ask_agent] (its subclasses say why), the same way on
    the first run and on every replay. Uncaught, it fails the run.

    Args:
        message: What happened, in words.
        remote: The remote's name, as the app configures it.
        tool: The tool that was called (empty for an agent).

    Attributes:
        remote: The remote's name, as the app configures it.
        tool: The tool that was called (empty for an agent).
    """

    def __init__(self, message: str, *, remote: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.remote = remote
        self.tool = tool

    def extra(self) -> dict[str, Any]:
        """The fields a subclass records beside the message."""
        return {}


class RemoteToolError(RemoteError):
    """The remote tool ran and reported an error: its result had `isError: true`.

    A business failure of the tool, not a fault of the remote: retrying the same call is
    unlikely to help.

    Args:
        message: The tool's error text.
        remote: The remote's name.
        tool: The tool that was called.
        result: The tool's whole result (`content`, `structuredContent`, `isError`).

    Attributes:
        remote: The remote's name.
        tool: The tool that was called.
        result: The tool's whole result (`content`, `structuredContent`, `isError`).
    """

    def __init__(
        self, message: str, *, remote: str = "", tool: str = "", result: Any = None
    ) -> None:
        super().__init__(message, remote=remote, tool=tool)
        self.result = result

    def extra(self) -> dict[str, Any]:
        return {"result": self.result}


class RemoteProtocolError(RemoteError):
    """The remote answered with a JSON-RPC error, refused the request, or its task `failed`.

    Args:
        message: The error's message.
        remote: The remote's name.
        tool: The tool that was called.
        code: The JSON-RPC error code (None when the remote refused the request without one:
            an HTTP 4xx, or a body that is not a JSON-RPC response).
        data: The error's `data`, if any.

    Attributes:
        remote: The remote's name.
        tool: The tool that was called.
        code: The JSON-RPC error code, or None.
        data: The error's `data`, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        remote: str = "",
        tool: str = "",
        code: int | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message, remote=remote, tool=tool)
        self.code = code
        self.data = data

    def extra(self) -> dict[str, Any]:
        return {"code": self.code, "data": self.data}


class RemoteRejected(RemoteProtocolError):
    """The agent rejected the task (A2A's `rejected` state): it will not do what it was
    asked. A refusal, so a `RemoteProtocolError` too; asking again the same way is unlikely
    to help.

    Args:
        message: The agent's words, if it gave any.
        remote: The remote's name.
        tool: Empty (an agent has no tools to name).
        code: Always None (no JSON-RPC error is involved).
        data: The agent's status message, in A2A's JSON form (`{"message": …}`), if any.

    Attributes:
        remote: The remote's name.
        tool: Empty.
        code: Always None.
        data: The agent's status message, if any.
    """


class RemoteTaskLost(RemoteError):
    """The remote no longer knows the call's task: it expired, was purged, or the remote
    lost it (a restart of a remote that keeps tasks in memory).

    Args:
        message: What happened, in words.
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.

    Attributes:
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.
    """


class RemoteCancelled(RemoteError):
    """The remote's task ended `cancelled`: cancelled on the remote's side, not by this run.

    Args:
        message: What happened, in words.
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.

    Attributes:
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.
    """


class RemoteTimeout(RemoteError, TimeoutError):
    """The call's `timeout` passed before the remote's task ended; the task was cancelled.

    Args:
        message: What happened, in words.
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.

    Attributes:
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.
    """


class RemoteUnavailable(RemoteError):
    """The remote could not be reached (transport errors, HTTP 5xx or 429) through every
    retry the call allows.

    Args:
        message: What happened, in words.
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.

    Attributes:
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.
    """


class UnknownRemote(RemoteError):
    """No remote of that name is configured (`App.remote`, or `TETHER_REMOTES`), or not of
    the kind the call needs: an A2A agent for `ask_agent`, an MCP server for `call_tool`.

    Args:
        message: What happened, in words.
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.

    Attributes:
        remote: The remote's name, as the app configures it.
        tool: The tool that was called.
    """


class Transient(Exception):
    """A failure worth retrying: the request may not have arrived, or the remote could not
    serve it now (a transport error, HTTP 5xx or 429). Internal to the remote layer."""


_BY_TYPE: Final[Mapping[str, type[RemoteError]]] = MappingProxyType(
    {
        cls.__name__: cls
        for cls in (
            RemoteError,
            RemoteToolError,
            RemoteProtocolError,
            RemoteRejected,
            RemoteTaskLost,
            RemoteCancelled,
            RemoteTimeout,
            RemoteUnavailable,
            UnknownRemote,
        )
    }
)


def as_record(exc: RemoteError) -> dict[str, Any]:
    """The error as the call's record keeps it (JSON)."""
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "remote": exc.remote,
        "tool": exc.tool,
        **exc.extra(),
    }


def from_record(record: Mapping[str, Any]) -> RemoteError:
    """The error a recorded ending raises again (an unknown type reads as `RemoteError`)."""
    cls = _BY_TYPE.get(str(record.get("type")), RemoteError)
    fields = {"remote": str(record.get("remote", "")), "tool": str(record.get("tool", ""))}
    message = str(record.get("message", ""))
    if cls is RemoteToolError:
        return RemoteToolError(message, result=record.get("result"), **fields)
    if issubclass(cls, RemoteProtocolError):
        code = record.get("code")
        return cls(
            message, code=code if isinstance(code, int) else None, data=record.get("data"), **fields
        )
    return cls(message, **fields)
