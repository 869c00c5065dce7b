"""A workflow for the trace-across-kill -9 test (tests/e2e/test_observability_kill_trace.py).

`held` runs step `first`, then step `hold`: with `HOLD_FILE` set (the server process the test
SIGKILLs) `hold` writes that file and sleeps until the process dies; without it (the server
that recovers the run) `hold` returns at once and the run completes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App

app = App("traced_kill")


def double(value: int) -> int:
    return value * 2


def hold(value: int) -> int:
    marker = os.environ.get("HOLD_FILE")
    if marker:
        Path(marker).write_text(str(os.getpid()))
        time.sleep(3600)  # until SIGKILL (a sync step runs in a thread)
    return value + 1


@app.workflow(expose=Exposure(tool_set=True))
async def held(ctx: Context) -> int:
    first = int(await ctx.step(double, 1, name="first"))
    return int(await ctx.step(hold, first, name="hold"))
