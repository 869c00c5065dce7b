"""Workflows for the client tests (tests/client/): `review` (an approval with a required
input and a typed outcome), `shaped` (a signal whose answer is not a flat object), `boom` (a
workflow error), `echo` (a string output), and `internal` (not served over MCP)."""

from __future__ import annotations

from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.errors import Rejected
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.runtime.waits import Approved

app = App("client-tests")


class Request(BaseModel):
    title: str


class Outcome(BaseModel):
    title: str
    decision: str
    ticket: str | None = None


class NoArgs(BaseModel):
    pass


class Point(BaseModel):
    x: int
    y: int


class Shape(BaseModel):
    corners: list[Point]


class Text(BaseModel):
    text: str


@app.workflow(expose=Exposure(tool_set=True))
async def review(ctx: Context, request: Request) -> Outcome:
    await ctx.set_details(f"reviewing {request.title}")
    try:
        decision = await ctx.approval(
            "publish", prompt=f"Publish {request.title}?", inputs=["ticket"], required=["ticket"]
        )
    except Rejected as exc:
        return Outcome(title=request.title, decision=f"rejected: {exc.reason}")
    if isinstance(decision, Approved):
        ticket = decision.inputs.get("ticket")
        return Outcome(title=request.title, decision="approved", ticket=ticket)
    return Outcome(title=request.title, decision=f"pushed back: {decision.feedback}")


@app.workflow(expose=Exposure(tool_set=True))
async def shaped(ctx: Context, args: NoArgs) -> dict[str, object]:
    shape = await ctx.wait_for_signal("shape", schema=Shape)
    return {"corners": len(shape.corners), "first": shape.corners[0].model_dump()}


@app.workflow(expose=Exposure(tool_set=True))
async def boom(ctx: Context, args: NoArgs) -> str:
    raise ValueError("it broke")


@app.workflow(expose=Exposure(tool_set=True))
async def echo(ctx: Context, args: Text) -> str:
    return args.text


@app.workflow()
async def internal(ctx: Context, args: NoArgs) -> str:
    return "done"
