"""DAG steps that call a remote tool (`action: mcp.call`) or ask a remote agent (`action:
a2a.ask`), Tether's own actions: run as a durable remote call, read back as a step result
(config.py checks them when the DAG loads).

The call's record is named `node:<step>` (kind `remote`); `work_result` turns its ending into
the step's result, for the interpreter and for `replay.fold` alike: the value's text is the
step's `output` (an agent's reply: its `text`), a remote error fails the step (its
`retryPolicy` and `continueOn` apply).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tether.runtime.remote.call import ask_agent, call_tool
from tether.runtime.remote.errors import RemoteError, as_record
from tether.specs.dag import RemoteCall, Step
from tether.specs.dag.model import A2A_ASK

if TYPE_CHECKING:
    from tether.runtime.context import Context


def record_name(step: Step) -> str:
    return f"node:{step.name}"


def work_result(step: Step, ending: Mapping[str, Any], retries: int) -> dict[str, Any]:
    """The step's result from its call's recorded ending (`{value}` or `{error}`)."""
    if "error" in ending:
        error = ending["error"]
        out: dict[str, Any] = {
            "status": "failed",
            "error": f"{error.get('type')}: {error.get('message')}",
            "remote_error": dict(error),
        }
        policy = step.retry_policy
        if policy is not None and retries < policy.limit:
            out["retry"] = True
        return out
    value = ending.get("value")
    out = {"status": "succeeded", "value": value}
    if step.output:
        if isinstance(step.work, RemoteCall) and step.work.action == A2A_ASK:
            value = value.get("text", "") if isinstance(value, dict) else value
        text = value if isinstance(value, str) else json.dumps(value)
        out["outputs"] = {step.output: text}
    return out


async def run_step(
    ctx: Context, step: Step, expand: Callable[[Any], Any], retries: int
) -> dict[str, Any]:
    """Run the step's remote call (its arguments expanded by `expand`); its step result."""
    work = step.work
    assert isinstance(work, RemoteCall)  # noqa: S101 — the interpreter routes only these here
    arguments = expand(dict(work.arguments))
    timeout = float(step.timeout_sec) if step.timeout_sec else None
    try:
        if work.action == A2A_ASK:
            value = await ask_agent(
                ctx,
                work.remote,
                str(expand(work.message)),
                data=arguments or None,
                timeout=timeout,
                name=record_name(step),
            )
        else:
            value = await call_tool(
                ctx, work.remote, work.tool, arguments, timeout=timeout, name=record_name(step)
            )
    except RemoteError as exc:
        return work_result(step, {"error": as_record(exc)}, retries)
    return work_result(step, {"value": value}, retries)
