"""Key rotation: re-seal every stored payload under the ring's current key, in batches.

Each table is read a page at a time in key order; every payload that is plaintext (written
before encryption was on) or sealed under an older key is opened and sealed again under the
current key, and the page is written back in one statement. A payload written meanwhile by a
worker or a caller wins: the write-back only replaces a value that still holds what was read
(it counts as `changed`, and the next rotation picks it up if it still needs it). Nothing here
holds a lock across pages, so runs go on while it works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether.storage import sealing
from tether.storage.driver import Queryable
from tether.storage.errors import translated
from tether.storage.queries import Q

DEFAULT_BATCH = 500


@dataclass
class RotationReport:
    """What a rotation did, per table: payloads re-sealed, and payloads left because their
    row changed between the read and the write (counted by row: a row is written whole)."""

    resealed: dict[str, int] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.resealed.values())


Progress = Callable[[str, int], None]  # (table, payloads re-sealed so far in it)


async def rotate(
    conn: Queryable,
    ring: sealing.KeyRing,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Progress | None = None,
) -> RotationReport:
    """Re-seal every payload not sealed under `ring.current`.

    Raises PayloadUnreadable (a payload sealed under a key the ring lacks, or one that fails
    authentication: the rotation stops there, having written the pages before it), StorageError.
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    report = RotationReport()
    for table, step in _TABLES.items():
        report.resealed[table] = 0
        report.changed[table] = 0
        cursor: tuple[Any, ...] = _START[table]
        while True:
            with translated():
                recs = await conn.fetch(Q[f"rotate_page_{table}"], *cursor, batch)
            if not recs:
                break
            writes = [w for w in (step(ring, dict(r)) for r in recs) if w is not None]
            if writes:
                with translated():
                    done = {tuple(r) for r in await conn.fetch(Q[f"reseal_{table}"], writes)}
                for write in writes:
                    counter = report.resealed if _key(table, write) in done else report.changed
                    counter[table] += sum(1 for k in write if k.startswith("old"))
                if progress is not None:
                    progress(table, report.resealed[table])
            last = recs[-1]
            cursor = (last["execution_id"], last["seq"]) if table == "steps" else (last["id"],)
    return report


def _key(table: str, write: dict[str, Any]) -> tuple[Any, ...]:
    return (write["execution_id"], write["seq"]) if table == "steps" else (write["id"],)


Step = Callable[[sealing.KeyRing, dict[str, Any]], dict[str, Any] | None]


def _reseal(ring: sealing.KeyRing, value: Any, context: str) -> Any:
    return sealing.seal(ring, sealing.unseal(ring, value, context), context)


def _columns(
    ring: sealing.KeyRing, rec: dict[str, Any], key: dict[str, Any], columns: dict[str, str]
) -> dict[str, Any] | None:
    """The write for the columns (name → context) of one row that need it; None if none do."""
    write = dict(key)
    for column, context in columns.items():
        value = rec[column]
        if sealing.needs_sealing(ring, value):
            write[column] = _reseal(ring, value, context)
            write[f"old_{column}"] = value
    return write if len(write) > len(key) else None


def _execution(ring: sealing.KeyRing, rec: dict[str, Any]) -> dict[str, Any] | None:
    eid = rec["id"]
    columns = {
        "input": sealing.execution_input(eid),
        "output": sealing.execution_output(eid),
    }
    return _columns(ring, rec, {"id": eid}, columns)


def _step(ring: sealing.KeyRing, rec: dict[str, Any]) -> dict[str, Any] | None:
    value = rec["result"]
    if not sealing.needs_sealing(ring, value):
        return None
    context = sealing.step_result(rec["execution_id"], rec["seq"])
    return {
        "execution_id": rec["execution_id"],
        "seq": rec["seq"],
        "result": _reseal(ring, value, context),
        "old": value,
    }


def _signal(ring: sealing.KeyRing, rec: dict[str, Any]) -> dict[str, Any] | None:
    value = rec["payload"]
    if not sealing.needs_sealing(ring, value):
        return None
    context = sealing.signal_payload(rec["execution_id"], rec["channel"], rec["key"])
    return {"id": rec["id"], "payload": _reseal(ring, value, context), "old": value}


def _update(ring: sealing.KeyRing, rec: dict[str, Any]) -> dict[str, Any] | None:
    eid, uid = rec["execution_id"], rec["id"]
    columns = {
        "input": sealing.update_input(eid, uid),
        "output": sealing.update_output(eid, uid),
    }
    return _columns(ring, rec, {"id": uid}, columns)


_TABLES: dict[str, Step] = {
    "executions": _execution,
    "steps": _step,
    "signals": _signal,
    "updates": _update,
}
_START: dict[str, tuple[Any, ...]] = {
    "executions": ("",),
    "steps": ("", -1),
    "signals": (0,),
    "updates": ("",),
}
