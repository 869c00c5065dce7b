"""Many runs inserted in one statement (batched starts: `runtime/operations/batching.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.storage import repo, sealing
from tether.storage.driver import Queryable
from tether.storage.errors import translated
from tether.storage.notify import READY_CHANNEL
from tether.storage.pool import json_text
from tether.storage.queries import Q
from tether.storage.rows import ExecutionRow, NewExecution

_COLUMNS = 15


def _values(new: NewExecution) -> tuple[Any, ...]:
    """The run's values in the order of `insert_executions`' arrays (as insert_execution)."""
    return (
        new.id,
        new.workflow,
        new.business_id,
        json_text(sealing.stored(new.input, sealing.execution_input, new.id)),
        new.idempotency_key,
        new.predecessor_id,
        new.root_id or new.id,
        new.retention_s,
        new.deadline_at,
        json_text(new.created_data),
        new.queue,
        json_text(dict(new.labels)),
        new.profile,
        json_text(dict(new.profile_env) if new.profile_env is not None else None),
        new.tenant,
    )


async def insert_executions(conn: Queryable, news: Sequence[NewExecution]) -> list[ExecutionRow]:
    """Insert pending runs in one statement and commit, then wake the workers (`conn`: a pool
    or a connection outside a transaction); the rows inserted, in no particular order. A run
    whose (workflow, tenant, idempotency_key) is already taken, or taken by an earlier run of
    the same batch, is left out: the caller resolves its key."""
    if not news:
        return []
    columns: list[list[Any]] = [[] for _ in range(_COLUMNS)]
    for new in news:
        for column, value in zip(columns, _values(new), strict=True):
            column.append(value)
    with translated():
        recs = await conn.fetch(Q["insert_executions"], *columns)
    if recs:
        await repo.wake(conn, [(READY_CHANNEL, "")])  # one wake-up for the batch, once committed
    return [ExecutionRow.from_record(rec) for rec in recs]
