"""Finding DAG runs by Dagu's identity (DAG name + dagRunId) through the operations API.

A dagRunId is the run's business id; a retry is a new execution under the same id, so the run
it names is the newest execution of that DAG with that id, followed along its chain.
"""

from __future__ import annotations

from tether.runtime import errors
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.tools.dagu.detail import RunRead, read_run
from tether.tools.dagu.uris import parse_run_uri


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
    return read_run(row, await ops.steps(row.id))


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
