"""A workflow that asks an A2A agent, for the process-level durability tests of agent calls
(tests/e2e/test_remote_kill.py). Worker subprocesses load this file with the remote `agent`
(`protocol: a2a`) in TETHER_REMOTES; `KILL_AT=<step point>:<edge>` makes the worker SIGKILL
itself at that point of the call (`remote:agent:after` once the agent answered the message,
before the task id is recorded; `remote:agent:poll:after` once the first poll answered)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tests.apps import kill_probe
from tether.runtime.context import Context
from tether.runtime.registry import App

app = App("killable-agent")


class Hold(BaseModel):
    text: str


@app.workflow
async def ask_hold(ctx: Context, inp: Hold) -> Any:
    """The agent holds its task until the test releases it."""
    reply = await ctx.ask_agent("agent", f"hold {inp.text}")
    return reply["text"]


kill_probe.install()
