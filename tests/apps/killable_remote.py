"""A workflow that calls a remote tool, for the process-level durability tests of remote calls
(tests/e2e/test_remote_kill.py). Worker subprocesses load this file with the remote `peer` in
TETHER_REMOTES; `KILL_AT=<step point>:<edge>` makes the worker SIGKILL itself at that point of
the call (a step probe: `remote:peer/hold:after` once the create answered, before the task id
is recorded; `remote:peer/hold:poll:after` once the first poll answered)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tests.apps import kill_probe
from tether.runtime.context import Context
from tether.runtime.registry import App

app = App("killable-remote")


class Hold(BaseModel):
    text: str


@app.workflow
async def relay_hold(ctx: Context, inp: Hold) -> Any:
    """Holds the remote's `hold` tool until the test releases it."""
    return await ctx.call_tool("peer", "hold", {"text": inp.text})


kill_probe.install()
