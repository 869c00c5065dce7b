"""Finding DAG runs by Dagu's identity (DAG name + dagRunId) through the operations API.

A dagRunId is the run's business id; a retry is a new execution under the same id, so the run
it names is the newest execution of that DAG with that id, followed along its chain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from tether.runtime import errors
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.dagu.detail import RunRead, read_run
from tether.tools.dagu.uris import parse_run_uri

CHECKPOINT_CHANNELS: Final = ("approval:", "human_task:")


async def find_run(ops: Operations, name: str, dag_run_id: str) -> ExecutionRow | None:
    """The current execution of run `dag_run_id` of DAG `name`; None when there is none."""
    page = await ops.list_runs(workflow=name, business_id=dag_run_id, limit=1)
    if not page.items:
        return None
    try:
        view = await ops.get(page.items[0].id)
    except errors.ExecutionNotFound:
        return None
    return view.current


async def load(ops: Operations, row: ExecutionRow) -> RunRead:
    steps = await ops.steps(row.id)
    pending = await _pending(ops, row, steps)
    if row.live:
        # A run replaying may consume an answer between the two reads (it was in neither):
        # its steps read again after the answers show it, as consumed with its wait's end.
        steps = await ops.steps(row.id)
    read = read_run(row, steps, pending)
    entry = ops.app.dags.get(row.workflow)
    if read.spec is None and entry is not None:
        # A run stopped before its first write recorded no spec: its steps are the DAG's.
        read = dataclasses.replace(read, spec=entry.spec)
    return read


async def _pending(
    ops: Operations, row: ExecutionRow, steps: Sequence[StepRecord]
) -> dict[str, dict[str, Any]]:
    """The answers a live run holds for its open gates and tasks but has not replayed yet:
    an answer to one of several waits opened together, until the last is answered, or one
    the woken run has not consumed. Dagu shows such a step decided at once."""
    if not row.live:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for rec in steps:
        if rec.kind != "wait" or rec.done or not rec.name.startswith(CHECKPOINT_CHANNELS):
            continue
        given = await ops.pending_answers(row.id, rec.name)
        if given:
            out[rec.name] = {"payload": given[0].payload, "by": given[0].by}
    return out


async def read(ops: Operations, name: str, dag_run_id: str) -> RunRead | None:
    row = await find_run(ops, name, dag_run_id)
    return None if row is None else await load(ops, row)


async def resolve_run_uri(ops: Operations, uri: str) -> str | None:
    """The execution id a `dagu://runs/{name}/{dagRunId}` URI names (for the subscription
    hook); None when the URI is not a run URI or names no run."""
    ref = parse_run_uri(uri)
    if ref is None:
        return None
    row = await find_run(ops, ref.name, ref.dag_run_id)
    return None if row is None else row.id
