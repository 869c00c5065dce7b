"""MRTR before a task: input rounds finish synchronously, then the task is created
(CHECKLIST item 91; fixture `test_tool_with_task`)."""

from __future__ import annotations

import json
from typing import Any

from tether.conformance import spec
from tether.conformance.context import Context, answer_for
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe

CHECKS = ("mrtr:input-before-task",)
NAME = "Alice-Conformance"


async def run(ctx: Context) -> None:
    check = CHECKS[0]
    tool = await ctx.need("test_tool_with_task", CHECKS)
    if tool is None:
        return
    c = ctx.client
    first = await c.call("tools/call", {"name": tool, "arguments": {}})
    r1 = first.result or {}
    problems = []
    if r1.get("resultType") != "input_required":
        ctx.violated(check, f"round 1 is not input_required: {describe(first)}", first)
        return
    if "taskId" in r1:
        problems.append("round 1 carries a taskId")
    requests = r1.get("inputRequests") if isinstance(r1.get("inputRequests"), dict) else {}
    if not requests:
        ctx.violated(check, "round 1 has no inputRequests", first)
        return
    responses = {k: answer_for(v if isinstance(v, dict) else {}, NAME) for k, v in requests.items()}
    retry: dict[str, Any] = {"name": tool, "arguments": {}, "inputResponses": responses}
    if "requestState" in r1:
        retry["requestState"] = r1["requestState"]
    second = await c.call("tools/call", retry)
    r2 = second.result or {}
    task_id = r2.get("taskId")
    if r2.get("resultType") != "task" or not isinstance(task_id, str):
        problems.append(f"round 2 is not a task: {describe(second)}")
        ctx.violated(check, "; ".join(problems), first, second)
        return
    problems += [f"round 2 carries {k!r}" for k in ("requestState", "inputRequests") if k in r2]
    done = await ctx.poll(task_id, spec.TERMINAL)
    final = done.task or {}
    if final.get("status") != "completed":
        problems.append(f"the task ended {final.get('status')!r}, not completed")
    elif NAME not in json.dumps(final.get("result")):
        problems.append("the task result does not show the answer given in round 1")
    shown = [first, second] + ([done.last] if done.last else [])
    ctx.verdict(check, problems, "input_required, then a task that used the answer", *shown)


SCENARIO = FunctionScenario("mrtr", "MRTR before a task", CHECKS, run)
