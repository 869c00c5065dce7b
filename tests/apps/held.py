"""A workflow whose one step holds until the test lets it go, for the tests of stopping a
server while a step runs (tests/cli/test_process.py). Its input names a directory: the step
appends its process id to `started` there when it begins, and returns once a file `release`
exists there (a server may be stopped meanwhile; the next one runs the step again)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tether.runtime.context import Context
from tether.runtime.registry import App

app = App("held")
POLL_S = 0.02  # the step looks for `release` this often: another process creates it


def hold(directory: str) -> int:
    where = Path(directory)
    with (where / "started").open("a", encoding="utf-8") as log:
        log.write(f"{os.getpid()}\n")
    while not (where / "release").exists():
        time.sleep(POLL_S)
    return os.getpid()


@app.workflow
async def held(ctx: Context, directory: str) -> int:
    """Run `hold` once, durably."""
    result: int = await ctx.step(hold, directory)
    return result
