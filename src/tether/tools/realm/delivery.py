"""Delivering an answer to an agent step while other agents answer the same run.

Agent steps that are ready together are open together (the interpreter's `wait_any`), and
the first answer lets the run go on: its open waits close until it stops again, when the
steps still unanswered are open again under new keys. An answer that meets that moment
(WaitNotOpen) is not refused: it waits for the run to stop and is delivered to the step's new
wait, so every answer of concurrent agents is recorded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from tether.runtime import errors as rt
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.tools.realm import runs

#: How many times an answer follows its step to a new wait before it is refused: each time
#: another answer moved the run, so a bound is only a guard against a run that never stops.
FOLLOW: Final = 16
Deliver = Callable[[dict[str, Any]], Awaitable[object]]


async def deliver_to_step(
    ops: Operations, row: ExecutionRow, step: str, wait: dict[str, Any], deliver: Deliver
) -> tuple[ExecutionRow, dict[str, Any]] | None:
    """`deliver(wait)` to agent step `step`'s open `wait`, following the step to its new wait
    when another answer moved the run first. Returns the run as it was just before the
    delivery and the wait it went to; None when the step is not open any more (answered,
    or held by an open gate). Raises what `deliver` raises but WaitNotOpen."""
    for _ in range(FOLLOW):
        try:
            await deliver(wait)
        except rt.WaitNotOpen:
            row = (await ops.wait_until(row.id, runs.settled, timeout=runs.SETTLE_S)).current
            found = runs.open_step(row, step)
            if found is None:
                return None
            wait = found
            continue
        return row, wait
    return None
