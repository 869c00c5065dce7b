"""A FastMCP tasks server (fastmcp[tasks], its in-memory backend) as a remote for the remote-task
tests: its task tools complete, fail as tools, fail as protocol errors, ask for input (the
guard pattern: the tool returns an InputRequiredResult and reads the answers when it runs
again) and run long. Its tasks live in memory, so a restart loses them."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError

#: The JSON-RPC code `refuse` fails its task with.
REFUSAL_CODE = 4010


def server() -> FastMCP:
    """A new server (a restart is a new one: what the old one held is gone)."""
    mcp = FastMCP("fastmcp-remote")
    mcp.add_extension(TasksExtension())

    @mcp.tool(task=True)
    async def add(a: int, b: int) -> int:
        return a + b

    @mcp.tool(task=True)
    async def boom(reason: str) -> str:
        raise ValueError(reason)

    @mcp.tool(task=True)
    async def refuse(reason: str) -> str:
        raise MCPError(REFUSAL_CODE, reason)

    @mcp.tool(task=True)
    async def nap(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "rested"

    @mcp.tool(task=True)
    async def ask(ctx: Context, question: str) -> Any:
        answers = ctx.input_responses or {}
        if "name" in answers:
            content = getattr(answers["name"], "content", None) or {}
            return f"hello {content.get('name')}"
        form = mcp_types.ElicitRequestFormParams(
            message=question,
            requested_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        )
        return mcp_types.InputRequiredResult(
            input_requests={"name": mcp_types.ElicitRequest(params=form)}
        )

    @mcp.tool()
    def shout(text: str) -> str:
        """A plain tool (no task): for `protocol="mcp"` remotes."""
        return text.upper()

    return mcp


def asgi() -> Any:
    return server().http_app(path="/mcp")


if __name__ == "__main__":  # `python tests/apps/fastmcp_remote.py PORT`: one server process
    import sys

    import uvicorn

    uvicorn.run(asgi(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
