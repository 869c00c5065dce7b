"""The console's test app (tests/console): an approval with a required input (`gate`), a
human task with a field of each scalar type (`form`), and a DAG with an approval between two
shell steps (`gated`), a typed signal (`sig`), a signal with a free payload (`free`), and two
successive approvals of one name (`twice`), an approval behind a progress line
(`progress`), a step that fails once before it succeeds (`flaky`), and an approval two of
three named people decide (`vote`)."""

from __future__ import annotations

from typing import Any

from tests.apps.answering import Fields, Go, NoArgs
from tether import Approved, Completed
from tether.runtime.context import Context
from tether.runtime.errors import Rejected
from tether.runtime.exposure import Exposure
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App

app = App("console-tests")

GATED = """
name: gated
steps:
  - name: build
    command: "echo built"
  - name: publish
    command: "echo publishing $TICKET"
    depends: build
    approval:
      prompt: Publish the build?
      input: [TICKET, NOTE]
      required: [TICKET]
  - name: after
    command: "echo done"
    depends: publish
"""
app.dag(GATED)


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
async def free(ctx: Context, args: NoArgs) -> dict[str, Any]:
    return {"got": await ctx.wait_for_signal("anything")}


@app.workflow(expose=Exposure(tool_set=True))
async def twice(ctx: Context, args: NoArgs) -> list[str]:
    """Two approvals of the same name, one after the other: a form for the first is stale
    once it is answered, though a wait of that name is open again."""
    seen = []
    for _ in range(2):
        decision = await ctx.approval("review", inputs=["note"])
        seen.append(decision.inputs.get("note", "") if isinstance(decision, Approved) else "-")
    return seen


@app.workflow(expose=Exposure(tool_set=True))
async def progress(ctx: Context, args: NoArgs) -> str:
    """A progress line while it waits; once answered it ends, the line left as it was."""
    await ctx.set_details("waiting for the go-ahead")
    await ctx.approval("go")
    return "done"


TRIES: dict[str, int] = {}


def _once_then_ok(key: str) -> str:
    TRIES[key] = TRIES.get(key, 0) + 1
    if TRIES[key] == 1:
        raise ConnectionError("first try fails")
    return "ok"


@app.workflow(expose=Exposure(tool_set=True))
async def flaky(ctx: Context, args: NoArgs) -> str:
    """One step that fails on its first try and succeeds on its second."""
    retry = RetryPolicy(max_attempts=3, initial_interval=0.05)
    return str(await ctx.step(_once_then_ok, ctx.execution_id, name="call", retry=retry))


@app.workflow(expose=Exposure(tool_set=True))
async def vote(ctx: Context, args: NoArgs) -> dict[str, Any]:
    """Two of alice, bob and carol approve it; one rejection ends it."""
    try:
        got = await ctx.approval(
            "deploy", prompt="Deploy?", approvers=["alice", "bob", "carol"], quorum=2
        )
    except Rejected as exc:
        return {"decision": "rejected", "by": exc.by}
    if isinstance(got, Approved):
        return {"decision": "approved", "approvers": list(got.approvers)}
    return {"decision": "pushed_back", "by": got.by}
