"""What operations read and write beside a worker's checkpoints: the step records a resumed
run carries over from the run it follows, and a run's buffered (unconsumed) signals. Every
asyncpg error leaves as a StorageError."""

from __future__ import annotations

from collections.abc import Sequence

from tether.storage import sealing
from tether.storage.driver import Queryable
from tether.storage.errors import translated
from tether.storage.queries import Q
from tether.storage.rows import BufferedSignal, StepRecord


async def insert_steps(conn: Queryable, execution_id: str, records: Sequence[StepRecord]) -> None:
    """Record `records` as run `execution_id`'s (results sealed for their new place)."""
    ring, where = sealing.ring(), sealing.step_result
    rows = [
        {**vars(r), "result": sealing.seal(ring, r.result, where(execution_id, r.seq))}
        if ring is not None
        else vars(r)
        for r in records
    ]
    with translated():
        await conn.execute(Q["insert_steps"], execution_id, rows)


async def get_buffered_signals(conn: Queryable, run_id: str, channel: str) -> list[BufferedSignal]:
    """The unconsumed signals on `channel`, oldest first (payloads opened)."""
    with translated():
        recs = await conn.fetch(Q["get_buffered_signals"], run_id, channel)
    return [BufferedSignal.from_mapping(r, run_id) for r in recs]
