"""A `fastmcp[tasks]==4.1.4` server with the official fixture tools, for interop runs of our
harness (tests/conformance/test_harness_fastmcp.py, docs/interop.md).

Task tools use FastMCP's guard pattern for input (return an `InputRequiredResult`, read
`ctx.input_responses` on the next leg); the task backend is Docket's in-memory broker.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError
from pydantic import Field


def _form(message: str, props: dict[str, Any]) -> mcp_types.ElicitRequest:
    schema = {"type": "object", "properties": props, "required": list(props)}
    params = mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)
    return mcp_types.ElicitRequest(params=params)


def _accepted(ctx: Context, key: str) -> dict[str, Any] | None:
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, mcp_types.ElicitResult) and answer.action == "accept":
        return dict(answer.content or {})
    return None


def build(name: str = "fastmcp-fixtures") -> FastMCP:
    """A fresh server (each test gets its own Docket name)."""
    mcp = FastMCP(name)
    mcp.add_extension(TasksExtension(url="memory://", name=name))

    @mcp.tool
    def greet(name: str = "world") -> str:
        """Say hello (always synchronous)."""
        return f"Hello, {name}!"

    @mcp.tool(task=True)
    async def slow_compute(seconds: float = 1.0, label: str = "job") -> str:
        """Sleep for `seconds`, then report."""
        await asyncio.sleep(seconds)
        return f"{label} finished after {seconds:g}s"

    @mcp.tool(task=TaskConfig(mode="required"))
    async def failing_job(reason: str = "the job failed on purpose") -> str:
        """A task that ends as a tool error."""
        raise ToolError(reason)

    @mcp.tool(task=TaskConfig(mode="required"))
    async def protocol_error_job(reason: str = "boom") -> str:
        """A task that ends with a JSON-RPC error."""
        raise MCPError(code=-32603, message=f"Internal error: {reason}")

    @mcp.tool(task=True)
    async def confirm_delete(
        ctx: Context, filename: str = "important.txt"
    ) -> str | mcp_types.InputRequiredResult:
        """Ask for confirmation, then delete (or not)."""
        content = _accepted(ctx, "confirm")
        if content is None:
            ask = _form(f"Delete {filename}?", {"confirm": {"type": "boolean"}})
            return mcp_types.InputRequiredResult(input_requests={"confirm": ask})
        return f"Deleted {filename}" if content.get("confirm") else f"Kept {filename}"

    @mcp.tool(task=True)
    async def multi_input(ctx: Context) -> str | mcp_types.InputRequiredResult:
        """Two input requests at once."""
        first, second = _accepted(ctx, "first"), _accepted(ctx, "second")
        if first is None or second is None:
            asks = {
                k: _form(f"{k} value?", {"name": {"type": "string"}})
                for k, got in (("first", first), ("second", second))
                if got is None
            }
            return mcp_types.InputRequiredResult(input_requests=asks)
        return f"first={first.get('name')}, second={second.get('name')}"

    @mcp.tool
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress twice."""
        await ctx.report_progress(1, 2)
        await ctx.report_progress(2, 2)
        return "Progress test completed"

    @mcp.tool
    def test_headers(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})] = "none",
    ) -> str:
        """Echoes a region routed by the Mcp-Param-Region header."""
        return f"region={region}"

    @mcp.prompt
    def test_simple_prompt() -> str:
        """A simple prompt without arguments."""
        return "This is a simple prompt for testing."

    @mcp.resource("test://static-text")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    return mcp
