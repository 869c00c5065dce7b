"""Reading runs: resolve a handle along its chain, list runs a page at a time, read a run's
history and step records (whole, or a bounded page at a time from the newest), and who started
runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tether.runtime import errors
from tether.runtime.admission import label_filter
from tether.runtime.chain import follow
from tether.runtime.ids import is_execution_id
from tether.runtime.operations.env import Env
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.statuses import STATUSES
from tether.storage import carryover, repo
from tether.storage.rows import BufferedSignal, ExecutionRow, HistoryEvent, StepRecord


@dataclass(frozen=True)
class RunView:
    """A handle resolved: `requested` is the row asked for, `current` the live end of its chain."""

    requested: ExecutionRow
    current: ExecutionRow
    chain: tuple[ExecutionRow, ...]


@dataclass(frozen=True)
class Page:
    items: list[ExecutionRow]
    next_cursor: str | None


def _cursor(row: ExecutionRow) -> str:
    return f"{row.created_at.isoformat()}|{row.id}"


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        at, _, rid = cursor.partition("|")
        return datetime.fromisoformat(at), rid
    except ValueError:
        raise errors.InvalidInput(f"invalid cursor {cursor!r}") from None


async def get(env: Env, execution_id: str, *, follow_chain: bool = True) -> RunView:
    """Resolve a handle; follows retry and continue-as-new links to the live run.

    One primary-key read when the run has no successor; the tenant check is a comparison on
    that row. A run outside the env's tenant scope raises exactly as a missing one, and a
    chain is followed only through runs in scope. Raises ExecutionNotFound.
    """
    if not is_execution_id(execution_id):
        raise errors.ExecutionNotFound("no run with that id")  # not even the shape of one
    with storage_errors():
        row = await env.reader.get(execution_id)
        if row is None or not (env.every_tenant or row.tenant == env.tenant):
            raise errors.ExecutionNotFound(f"no run {execution_id!r}")
        if not follow_chain or row.successor_id is None:
            return RunView(row, row, (row,))
        chain = [r for r in await repo.get_chain(env.pool, execution_id) if env.sees(r)]
    current = follow({r.id: r for r in chain}, execution_id)
    return RunView(row, current, tuple(chain))


async def list_runs(
    env: Env,
    *,
    workflow: str | None = None,
    statuses: Sequence[str] | None = None,
    business_id: str | None = None,
    root_id: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
    labels: Sequence[str] | None = None,
    started_by: str | None = None,
    text: str | None = None,
) -> Page:
    """Runs newest first, only those in the env's tenant scope; `labels` keeps runs carrying
    every `key=value` (exact) and every bare `key` (any value); `started_by` the runs that
    principal started; `text` the runs whose id starts with it or whose business id holds it.
    Raises InvalidInput for a bad cursor, limit, status or label."""
    if not 1 <= limit <= 1000:
        raise errors.InvalidInput("limit must be 1-1000")
    if statuses is not None:
        unknown = set(statuses) - set(STATUSES)
        if unknown:
            raise errors.InvalidInput(f"unknown statuses {sorted(unknown)}")
    after = _parse_cursor(cursor) if cursor else None
    pairs, keys = label_filter(labels or ())
    with storage_errors():
        rows = await repo.list_executions(
            env.pool,
            workflow=workflow,
            statuses=statuses,
            business_id=business_id,
            root_id=root_id,
            after=after,
            limit=limit + 1,
            labels=pairs,
            label_keys=keys,
            tenant=env.tenant,
            every_tenant=env.every_tenant,
            started_by=started_by or None,
            text=text or None,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, _cursor(rows[-1]) if more and rows else None)


async def history(env: Env, execution_id: str) -> list[HistoryEvent]:
    """The run's history events in order. Raises ExecutionNotFound."""
    await get(env, execution_id, follow_chain=False)
    with storage_errors():
        return await repo.get_history(env.pool, execution_id)


async def steps(env: Env, execution_id: str) -> list[StepRecord]:
    """The run's recorded steps in order. Raises ExecutionNotFound."""
    await get(env, execution_id, follow_chain=False)
    with storage_errors():
        return await repo.get_steps(env.pool, execution_id)


def _page_limit(limit: int) -> None:
    if not 1 <= limit <= 1000:
        raise errors.InvalidInput("limit must be 1-1000")


async def history_page(
    env: Env, execution_id: str, *, before: int | None = None, limit: int = 100
) -> list[HistoryEvent]:
    """At most `limit` of the run's events before event id `before` (None: from its newest),
    newest first: a reader pages through a long history without reading all of it. Raises
    ExecutionNotFound, InvalidInput (a limit outside 1-1000)."""
    _page_limit(limit)
    await get(env, execution_id, follow_chain=False)
    with storage_errors():
        return await repo.get_history_page(env.pool, execution_id, before, limit)


async def steps_page(
    env: Env, execution_id: str, *, before: int | None = None, limit: int = 100
) -> list[StepRecord]:
    """At most `limit` of the run's recorded calls before seq `before` (None: from its
    newest), newest first. Raises ExecutionNotFound, InvalidInput (a limit outside 1-1000)."""
    _page_limit(limit)
    await get(env, execution_id, follow_chain=False)
    with storage_errors():
        return await repo.get_steps_page(env.pool, execution_id, before, limit)


async def starters(env: Env, rows: Sequence[ExecutionRow]) -> dict[str, str | None]:
    """Who started each of `rows` (the principal its `created` event names; None where none
    was recorded), by run id; only runs in the env's tenant scope are looked up."""
    ids = [r.id for r in rows if env.sees(r)]
    if not ids:
        return {}
    with storage_errors():
        found = await repo.get_starters(env.pool, ids)
    return {i: found.get(i) for i in ids}


async def buffered_signals(env: Env, execution_id: str, name: str) -> list[BufferedSignal]:
    """The signals named `name` the run holds and has not consumed, oldest first. Raises
    ExecutionNotFound."""
    await get(env, execution_id, follow_chain=False)
    with storage_errors():
        return await carryover.get_buffered_signals(env.pool, execution_id, f"signal:{name}")


async def pending_answers(env: Env, execution_id: str, channel: str) -> list[BufferedSignal]:
    """The answers on wait channel `channel` the run holds and has not consumed (an answer to
    one of several open waits, or one the woken run has not replayed yet), oldest first.
    Raises ExecutionNotFound."""
    await get(env, execution_id, follow_chain=False)
    with storage_errors():
        return await carryover.get_buffered_signals(env.pool, execution_id, channel)
