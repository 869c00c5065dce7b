"""The Tether App of bench/spec_limits.py: a parked run to poll with ``tasks/get``, the
action the inline specs' steps run, and a stored DAG (so the Dagu tools are served).

Fault injection for the benchmark's own test: with ``BENCH_SPEC_PARSE_ON_LOOP=1`` in the
server's environment, documents are parsed on the event loop again (``tether.tools.offload``
runs its functions in place), as before they were moved off it; the benchmark's verdict must
then turn OVER (tests/tools/test_spec_limits_bench.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from tether import App, Context, Exposure
from tether.tools import offload

PARKED = "parked"
SIGNAL = "go"
ACTION = "act"
STORED = "name: stored\nsteps:\n  - name: s\n    run: act\n"
PARSE_ON_LOOP = "BENCH_SPEC_PARSE_ON_LOOP"

T = TypeVar("T")

app = App("spec_limits_bench")


class ParkInput(BaseModel):
    label: str = "bench"


@app.workflow(name=PARKED, expose=Exposure(tool=True), retention=timedelta(days=1))
async def parked(ctx: Context, job: ParkInput) -> dict[str, str]:
    """Wait for signal 'go', then echo it."""
    answer = await ctx.wait_for_signal(SIGNAL, prompt=f"release {job.label}")
    return {"label": job.label, "answer": str(answer)}


@app.function(ACTION)
async def act() -> str:
    return "done"


app.dag(STORED)


async def _in_place(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


async def _in_place_pieces(
    parts: Callable[[T], object], fn: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    return fn(*args, **kwargs)


if os.environ.get(PARSE_ON_LOOP) == "1":  # the injected fault
    offload.run = _in_place  # type: ignore[assignment]
    offload.run_in_pieces = _in_place_pieces  # type: ignore[assignment]
