"""One MCP workflow with every generated tool kind, for the tenant matrix
(tests/e2e/test_tenant_matrix.py): `gate` parks on an approval named `go`, is served as its own
tool (`gate_run`) and has an MCP update `note`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App


class NoArgs(BaseModel):
    pass


class Note(BaseModel):
    text: str


app = App("tenancy")


@app.workflow(expose=Exposure(tool_set=True, tool="gate_run"))
async def gate(ctx: Context, args: NoArgs) -> dict[str, Any]:
    decision = await ctx.approval("go", prompt="Go?")
    return {"decision": type(decision).__name__}


@app.update("gate", mcp=True)
async def note(ctx: object, n: Note) -> str:
    return n.text
