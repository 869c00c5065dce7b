"""Start, answer, cancel, watch and read runs from application code (a web app that starts a
workflow and shows its status), over the database or over HTTP, with one interface:

    async with tether.client.connect("http://127.0.0.1:8000/mcp", token=TOKEN) as client:
        run = await client.start("document_review", {"title": "Q3", "body": "…"})
        snapshot = await run.wait()            # needs an answer, or ended
        await run.answer("publish", {"decision": "approve", "ticket": "CHG-42"})
        outcome = await run.result()

The layer is an application's library, beside the server's surfaces: over the database it
calls the runtime's operations (as every surface does) and renders runs with the task view
the MCP surface uses; over HTTP it speaks MCP to a running server. It imports no server
surface (app, mcp, tools, console, cli, security), no test kit and no harness, and reaches
storage only through the runtime (import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

from tether.client.clients import Client, Connecting, connect
from tether.client.errors import (
    AnswerRefused,
    ClientError,
    InvalidInput,
    NotAuthorized,
    RunCancelled,
    RunFailed,
    RunNotFound,
    StartConflict,
    TransportError,
    UnexpectedResult,
    WaitTimedOut,
    WorkflowNotFound,
)
from tether.client.handles import RunHandle
from tether.client.snapshots import Answered, OpenWait, RunError, RunSnapshot, RunStatus

__all__ = [
    "AnswerRefused",
    "Answered",
    "Client",
    "ClientError",
    "Connecting",
    "InvalidInput",
    "NotAuthorized",
    "OpenWait",
    "RunCancelled",
    "RunError",
    "RunFailed",
    "RunHandle",
    "RunNotFound",
    "RunSnapshot",
    "RunStatus",
    "StartConflict",
    "TransportError",
    "UnexpectedResult",
    "WaitTimedOut",
    "WorkflowNotFound",
    "connect",
]
