"""Answering open waits and sending signals: the one path every surface answers through.

First answer wins; an identical repeat is a no-op; a different answer to an answered key is a
conflict; a key that is not open is reported, never guessed at.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tether.runtime import errors, waits
from tether.runtime.operations.env import Env
from tether.runtime.operations.queries import get
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import repo
from tether.storage.rows import ExecutionRow

AnswerOutcome = Literal["accepted", "duplicate", "conflict", "not_open"]


@dataclass(frozen=True)
class AnswerResult:
    status: Literal["accepted", "duplicate"]
    execution_id: str
    key: str


@dataclass(frozen=True)
class SignalResult:
    status: Literal["accepted", "duplicate"]
    execution_id: str
    key: str | None


#: One answer to deliver: the wait's key, the open wait, the response.
_Delivery = tuple[str, dict[str, Any], Any]


async def answer(
    env: Env, execution_id: str, key: str, response: Any, *, by: str | None = None
) -> AnswerResult:
    """Answer the open wait `key` — the one path every surface answers through.

    First answer wins; an identical repeat is a no-op (`duplicate`); a different answer to
    an answered key raises AnswerConflict; a key that is not open raises WaitNotOpen; an
    answer that does not fit raises AnswerRejected. Raises ExecutionNotFound, Unavailable.
    """
    (outcome,) = await answer_many(env, execution_id, [(key, response)], by=by)
    if outcome == "conflict":
        raise errors.AnswerConflict(f"wait {key!r} was already answered differently")
    if outcome == "not_open":
        raise errors.WaitNotOpen(f"wait {key!r} is not open")
    return AnswerResult(outcome, execution_id, key)


async def answer_many(
    env: Env, execution_id: str, answers: Sequence[tuple[str, Any]], *, by: str | None = None
) -> list[AnswerOutcome]:
    """Answer several open waits of one run at once, atomically: every answer for an open
    key is checked before any is delivered, so an AnswerRejected changes nothing. Returns
    per answer `accepted`, `duplicate` (the same answer was given before), `conflict`
    (answered differently before) or `not_open`. Raises ExecutionNotFound, Unavailable."""
    for _, response in answers:
        env.check_payload(response, errors.AnswerRejected)
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        row = await repo.get_execution(conn, execution_id, lock=True)
        if row is None:
            raise errors.ExecutionNotFound(f"no run {execution_id!r}")
        open_waits = {d["key"]: d for d in row.waits if d.get("kind") in waits.ANSWERABLE_KINDS}
        outcomes: list[AnswerOutcome] = []
        deliver: list[_Delivery] = []
        for key, response in answers:
            outcome = await _judge(conn, row.id, open_waits, key, response, deliver)
            if outcome == "accepted":
                deliver.append((key, open_waits[key], response))
            outcomes.append(outcome)
        await _deliver(conn, row, deliver, by)
    return outcomes


async def _judge(
    conn: Any,
    execution_id: str,
    open_waits: dict[str, dict[str, Any]],
    key: str,
    response: Any,
    deliver: list[_Delivery],
) -> AnswerOutcome:
    """What one answer would do, given the answers already accepted in this call.
    Raises AnswerRejected when the answer does not fit its open wait."""
    parts = waits.parse_key(key)
    if parts is None or parts.execution_id != execution_id:
        return "not_open"
    prior = await repo.get_signal_by_key(conn, execution_id, key)
    if prior is not None:
        return "duplicate" if prior.payload == response else "conflict"
    wait = open_waits.get(key)
    if wait is None or any(k == key for k, _, _ in deliver):
        return "not_open"
    problems = waits.validate_answer(wait, response)
    if problems:
        raise errors.AnswerRejected(f"{key}: " + "; ".join(problems), errors=problems)
    return "accepted"


async def _deliver(conn: Any, row: ExecutionRow, deliver: list[_Delivery], by: str | None) -> None:
    rest = list(row.waits)
    for i, (key, wait, response) in enumerate(deliver):
        channel = f"{wait['kind']}:{wait['name']}"
        await repo.insert_signal(conn, row.id, channel, key, response, by)
        event = {"key": key, "by": by}
        rest = [d for d in rest if d.get("key") != key]
        last = i == len(deliver) - 1
        if not last or any(d.get("kind") in waits.ANSWERABLE_KINDS for d in rest):
            # Waits opened together are answered one by one: the others keep their keys.
            await repo.answer_keep_parked(conn, row.id, rest, "answer", event)
        else:
            await repo.append_event(conn, row.id, "answer", event)


async def signal(
    env: Env,
    execution_id: str,
    name: str,
    payload: Any = None,
    *,
    idempotency_key: str | None = None,
    by: str | None = None,
) -> SignalResult:
    """Send signal `name` to the live run of this handle's chain.

    When that run is parked on a signal wait of that name, this answers it (through
    `answer`); otherwise the signal is buffered for the wait to come. Raises RunEnded,
    AnswerRejected (schema or size), ExecutionNotFound, Unavailable.
    """
    waits.check_name(name)
    env.check_payload(payload, errors.AnswerRejected)
    run = (await get(env, execution_id)).current
    if not run.live:
        raise errors.RunEnded(f"run {run.id!r} has ended ({run.status})")
    wait = next((d for d in run.waits if d.get("kind") == "signal" and d.get("name") == name), None)
    if wait is not None and idempotency_key is None:
        with contextlib.suppress(errors.WaitNotOpen):
            res = await answer(env, run.id, wait["key"], payload, by=by)
            return SignalResult(res.status, run.id, res.key)
    key = f"sig:{idempotency_key}" if idempotency_key is not None else None
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        locked = await repo.get_execution(conn, run.id, lock=True)
        if locked is None or not locked.live:
            raise errors.RunEnded(f"run {run.id!r} has ended")
        if key is not None and await repo.get_signal_by_key(conn, run.id, key) is not None:
            return SignalResult("duplicate", run.id, key)
        await repo.insert_signal(conn, run.id, f"signal:{name}", key, payload, by)
        await repo.append_event(conn, run.id, "signal", {"name": name, "by": by})
    return SignalResult("accepted", run.id, key)
