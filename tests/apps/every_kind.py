"""An app with every tool kind, for the security matrix (tests/e2e/test_security_matrix.py):
a read-only and a mutating plain tool, a workflow served as its own tool (`gate_run`), an MCP
workflow's generated set (start_gate, gate_status, gate_watch, signal_gate, answer_gate,
gate_update_note), a DAG served as MCP tools (start_served, served_status, served_watch), the
`dagu_execute`/`dagu_read` pair that any app with a DAG serves, and a prompt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.tools.context import ToolContext


class NoArgs(BaseModel):
    pass


class Text(BaseModel):
    text: str


app = App("every-kind")


@app.tool(description="Echo the text (read-only).", annotations={"readOnlyHint": True})
async def lookup(ctx: ToolContext, args: Text) -> dict[str, Any]:
    return {"echo": args.text}


@app.tool(description="Echo the text (not annotated read-only: a mutation).")
async def poke(ctx: ToolContext, args: Text) -> dict[str, Any]:
    return {"poked": args.text}


@app.workflow(expose=Exposure(tool_set=True, tool="gate_run"))
async def gate(ctx: Context, args: NoArgs) -> dict[str, Any]:
    decision = await ctx.approval("go", prompt="Go?")
    return {"decision": type(decision).__name__}


@app.update("gate", mcp=True)
async def note(ctx: object, n: Text) -> str:
    return n.text


@app.prompt("greeting", description="Greet someone", arguments=[{"name": "who"}])
async def greeting(ctx: Any, arguments: dict[str, str]) -> dict[str, Any]:
    who = arguments.get("who", "world")
    return {"messages": [{"role": "user", "content": {"type": "text", "text": f"Hi {who}"}}]}


app.dag(
    """
name: served
mcp: true
steps:
  - name: work
    command: "true"
    approval: {prompt: "Go?"}
"""
)
