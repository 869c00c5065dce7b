"""The remote side of the remote-task tests: a Tether app whose workflows are tools served as
MCP tasks (`Exposure(tool=True)`), one per behaviour a requester must tell apart. A second
Tether server serves it on a database of its own (tests/e2e/remotes.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tether.runtime.context import Context
from tether.runtime.errors import ProtocolError
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.tools.context import ToolContext

app = App("remote-tools")

#: The JSON-RPC code `refuse` fails its task with (outside the range the spec reserves).
REFUSAL_CODE = 4009
#: What `confirm_echo` asks before it starts its task.
GO_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}


class Text(BaseModel):
    text: str


class Question(BaseModel):
    question: str
    times: int = 1


class Routed(BaseModel):
    """`region` is mirrored in the `Mcp-Param-Region` header (the server refuses a call
    without it, or with another value)."""

    region: str = Field(json_schema_extra={"x-mcp-header": "Region"})
    text: str


class Reply(BaseModel):
    """What `ask` asks a person for: a flat form."""

    name: str


@app.workflow(expose=Exposure(tool=True))
async def echo(ctx: Context, args: Text) -> dict[str, Any]:
    """Completes at once with its argument."""
    return {"echo": args.text}


@app.workflow(expose=Exposure(tool=True))
async def ask(ctx: Context, args: Question) -> dict[str, Any]:
    """Asks `times` questions in turn (each a wait answered through tasks/update)."""
    names = []
    for _ in range(args.times):
        reply = await ctx.wait_for_signal("reply", schema=Reply, prompt=args.question)
        names.append(reply.name)
    return {"greeting": "hello " + " and ".join(names)}


@app.workflow(expose=Exposure(tool=True))
async def fail(ctx: Context, args: Text) -> None:
    """Fails as a workflow: its task completes with `isError: true`."""
    raise RuntimeError(args.text)


@app.workflow(expose=Exposure(tool=True))
async def refuse(ctx: Context, args: Text) -> None:
    """Ends with a protocol error: its task is `failed`."""
    raise ProtocolError(REFUSAL_CODE, args.text, {"why": "refused"})


@app.workflow(expose=Exposure(tool=True))
async def hold(ctx: Context, args: Text) -> dict[str, Any]:
    """Waits for the signal `release` (cancel and restart tests act meanwhile)."""
    await ctx.wait_for_signal("release")
    return {"released": args.text}


@app.workflow(expose=Exposure(tool=True))
async def route(ctx: Context, args: Routed) -> dict[str, Any]:
    """Completes with its region (a header-mirrored argument) and its text."""
    return {"region": args.region, "text": args.text}


@app.tool(description="Asks whether to go ahead (before any task), then runs `echo` as a task.")
async def confirm_echo(ctx: ToolContext, args: Text) -> dict[str, Any]:
    """Asks first; the call that answers starts `echo` with the text its state holds."""
    answer = ctx.input_responses.get("go")
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        request = {"mode": "form", "message": f"Echo {args.text!r}?", "requestedSchema": GO_FORM}
        ctx.ask({"go": {"method": "elicitation/create", "params": request}}, state=args.text)
    # The text echoed is the one in the state handed back (sealed, so verified).
    echoed = f"{ctx.request_state}:{answer['content']['ok']}"
    return await ctx.start_task("echo", {"text": echoed})
