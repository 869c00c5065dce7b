"""A workflow per kind of wait, served with its tool set (Exposure(tool_set=True)), for the
answer tool tests (tests/e2e/test_answer_tool.py, test_answer_parity.py): `gate` (an approval
with a required input), `form` (a human task with one field of each scalar type), `sig` (a
typed signal), `agent` (an agent step), `both` (a signal and an approval sharing the name
`x`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tether import Approved, Completed, Signal
from tether.runtime.context import Context
from tether.runtime.errors import Rejected
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.runtime.waits import Approval


class NoArgs(BaseModel):
    pass


class Fields(BaseModel):
    title: str
    count: int
    ratio: float
    ok: bool


class Go(BaseModel):
    n: int


class Summary(BaseModel):
    summary: str


app = App("answer-tool")


@app.workflow(expose=Exposure(tool_set=True))
async def gate(ctx: Context, args: NoArgs) -> dict[str, Any]:
    try:
        decision = await ctx.approval(
            "publish", prompt="Publish?", inputs=["ticket", "comment"], required=["ticket"]
        )
    except Rejected as exc:
        return {"decision": "rejected", "reason": exc.reason}
    if isinstance(decision, Approved):
        return {"decision": "approved", "inputs": decision.inputs}
    return {"decision": "pushed_back", "feedback": decision.feedback}


@app.workflow(expose=Exposure(tool_set=True))
async def form(ctx: Context, args: NoArgs) -> dict[str, Any]:
    done = await ctx.human_task("fill", form=Fields, prompt="Fill it in")
    if isinstance(done, Completed):
        return {"values": done.values.model_dump()}
    return {"pushed_back": done.feedback}


@app.workflow(expose=Exposure(tool_set=True))
async def sig(ctx: Context, args: NoArgs) -> dict[str, Any]:
    go = await ctx.wait_for_signal("go", schema=Go)
    return {"n": go.n}


@app.workflow(expose=Exposure(tool_set=True))
async def agent(ctx: Context, args: NoArgs) -> dict[str, Any]:
    out = await ctx.agent_step("summarise", schema=Summary, prompt="Summarise it")
    return {"summary": out.summary}


@app.workflow(expose=Exposure(tool_set=True))
async def both(ctx: Context, args: NoArgs) -> list[Any]:
    answers = await ctx.wait_all(Signal("x"), Approval("x"))
    return [answers[0], type(answers[1]).__name__]
