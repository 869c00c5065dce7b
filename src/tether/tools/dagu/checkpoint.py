"""Where a `dagu_execute` wait stops: the run's terminal state, or a waiting checkpoint in the run
or in a sub-DAG run it is parked on.

A parent whose `call:` step waits for its child is itself only "waiting on a child" (no wait an
operator answers), but while that child stands at an approval gate or human task the parent
makes no progress without an operator either: Dagu shows the parent step waiting while its
child waits (specs/018). So the wait returns there, as for a gate in the parent; the decision
goes to the child through `subDAGRunId`. Reads only; the descent is bounded.
"""

from __future__ import annotations

from typing import Final

from tether.runtime import errors
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.tools.dagu.uris import notifies

MAX_DEPTH: Final = 8  # sub-DAG nesting followed (as decide.py searches for subDAGRunId)


def _children(row: ExecutionRow) -> list[str]:
    """The child runs the run is parked on (its open `child` waits name their ids)."""
    if row.status != "waiting":
        return []
    return [str(w["name"]) for w in row.waits if w.get("kind") == "child" and w.get("name")]


async def sub_checkpoint(ops: Operations, row: ExecutionRow, depth: int = 0) -> bool:
    """Whether a live sub-DAG run the run waits on (at any depth) stands at a checkpoint."""
    if depth >= MAX_DEPTH:
        return False
    for child_id in _children(row):
        try:
            child = (await ops.get(child_id)).current
        except errors.ExecutionNotFound:
            continue
        if not child.live:
            continue  # its end resumes the parent: not a checkpoint
        if notifies(child) or await sub_checkpoint(ops, child, depth + 1):
            return True
    return False


class StopsAtCheckpoint:
    """The wait's predicate: terminal, a checkpoint in the run, or one in a sub-DAG run.
    `in_sub_run` says whether the run it last judged stopped because of a sub-DAG run."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.in_sub_run = False

    async def __call__(self, row: ExecutionRow) -> bool:
        self.in_sub_run = False
        if notifies(row):
            return True
        self.in_sub_run = await sub_checkpoint(self.ops, row)
        return self.in_sub_run
