"""Batched starts: many runs started in one statement, with a result or an error per item.

Each item is validated and prepared exactly as `starting.start` would (workflow, input,
profile, queue, labels, idempotency key), then every item without `singleton` is inserted by
one `INSERT … SELECT FROM unnest(…)` (one round trip, one commit, one wake-up of the
workers). An item whose idempotency key was already taken, by a stored run or by an earlier
item of the same batch, is then resolved as a single start would resolve it: the holder
(`deduped=True`), IdempotencyMismatch, or RunAlreadyActive under `on_live_match="fail"`.
Singleton items need the workflow's start lock, so they go through the single-start path,
one by one, after the batch.

Every run of the batch is committed before `start_many` returns, so a read after it sees
them (the same read-your-writes as `start`). Queued items (a queue, or a workflow's
max_active_runs) are inserted queued and admitted by the workers as usual; the runs belong
to the operations' tenant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from tether.runtime import errors
from tether.runtime.operations import starting
from tether.runtime.operations.env import Env
from tether.runtime.operations.starting import Singleton, Started
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import batches, repo

#: The most items one call takes; a longer list is refused whole (InvalidInput).
MAX_BATCH = 1000


@dataclass(frozen=True)
class StartRequest:
    """One start of a batch: the arguments of `Operations.start`, without `by`."""

    workflow: str
    input: Any = None
    idempotency_key: str | None = None
    business_id: str | None = None
    retention: float | timedelta | None = None
    on_live_match: Literal["return", "fail"] = "return"
    queue: str | None = None
    singleton: Singleton | None = None
    profile: str | None = None
    labels: Sequence[str] | Mapping[str, str] | None = None


#: A batch item's outcome: the run (started, or the holder of its key), or why it was refused.
StartOutcome = Started | errors.TetherError


def _prepare(env: Env, req: StartRequest, by: str | None) -> repo.NewExecution:
    if req.singleton not in (None, "running", "active"):
        raise errors.InvalidInput(f"singleton must be 'running' or 'active', not {req.singleton!r}")
    if req.on_live_match not in ("return", "fail"):
        raise errors.InvalidInput(
            f"on_live_match must be 'return' or 'fail', not {req.on_live_match!r}"
        )
    return starting.prepare(
        env,
        req.workflow,
        req.input,
        idempotency_key=req.idempotency_key,
        business_id=req.business_id,
        retention=req.retention,
        created={"by": by} if by else None,
        queue=req.queue,
        profile=req.profile,
        labels=req.labels,
    )


async def start_many(
    env: Env, requests: Sequence[StartRequest], *, by: str | None = None
) -> list[StartOutcome]:
    """Start every request; one outcome per request, in order. An item refused by validation
    or by its idempotency key or singleton gets its TetherError and changes nothing; the
    others start. Raises InvalidInput (more than MAX_BATCH items: nothing started) and
    Unavailable (the database failed: nothing of the batch's one statement was stored)."""
    if len(requests) > MAX_BATCH:
        raise errors.InvalidInput(f"at most {MAX_BATCH} starts per batch, got {len(requests)}")
    outcomes: list[StartOutcome | None] = [None] * len(requests)
    prepared: dict[int, repo.NewExecution] = {}
    for i, req in enumerate(requests):
        try:
            prepared[i] = _prepare(env, req, by)
        except errors.TetherError as exc:
            outcomes[i] = exc
    plain = [i for i in prepared if requests[i].singleton is None]
    with storage_errors():
        rows = await batches.insert_executions(env.pool, [prepared[i] for i in plain])
    inserted = {row.id: row for row in rows}
    for i in plain:
        row = inserted.get(prepared[i].id)
        if row is not None:
            outcomes[i] = Started(row, deduped=False)
        else:
            outcomes[i] = await _resolve(env, prepared[i], requests[i].on_live_match)
    for i in prepared:
        if requests[i].singleton is not None:
            outcomes[i] = await _single(env, requests[i], by)
    return [outcome for outcome in outcomes if outcome is not None]


async def _resolve(
    env: Env, new: repo.NewExecution, on_live_match: Literal["return", "fail"]
) -> StartOutcome:
    """The outcome of an item whose key the batch found taken."""
    try:
        with storage_errors():
            return await starting.insert_or_resolve(
                env.pool, new, on_live_match, key_taken=True, echo=env.echo
            )
    except errors.TetherError as exc:
        return exc


async def _single(env: Env, req: StartRequest, by: str | None) -> StartOutcome:
    try:
        return await starting.start(
            env,
            req.workflow,
            req.input,
            idempotency_key=req.idempotency_key,
            business_id=req.business_id,
            retention=req.retention,
            on_live_match=req.on_live_match,
            by=by,
            queue=req.queue,
            singleton=req.singleton,
            profile=req.profile,
            labels=req.labels,
        )
    except errors.TetherError as exc:
        return exc
