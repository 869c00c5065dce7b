"""Cron schedules: `@app.workflow(schedule="*/5 * * * *")` starts one run per tick (UTC, or
the zone of a `CRON_TZ=<zone> ` prefix),
across any number of processes, with no catch-up storm after downtime.

Each (workflow, cron) has a `schedules` row holding the last tick a run was started for. A
tick locks the row (SKIP LOCKED: another process is already on it), inserts the runs of the due
ticks and moves the row, in one transaction; each run also carries the idempotency key
`schedule:<workflow>:<tick>`, so a tick can never start two runs. Which ticks are due is the
pure `due_ticks`: after downtime only the latest missed tick (`catchup="none"`), or every
missed tick up to a cap, the most recent ones (`"all"`). A schedule new to the database starts
from the moment it is first seen (no runs for the past).

`Scheduler.run` sleeps until the next tick of any schedule (no polling), then calls `tick`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from tether.runtime import clock as runtime_clock
from tether.runtime import errors
from tether.runtime.admission import cron_sim
from tether.runtime.operations.env import Env
from tether.runtime.operations.starting import prepare
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.registry import WorkflowDef
from tether.storage import admitting, repo
from tether.storage.rows import ExecutionRow

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_EPSILON = timedelta(microseconds=1)


def due_ticks(
    cron: str, last: datetime, now: datetime, catchup: str = "none", cap: int = 10
) -> list[datetime]:
    """The ticks of `cron` in (last, now] to start runs for, oldest first: the latest one
    (`catchup="none"`), or the most recent `cap` of them (`"all"`). Pure."""
    limit = 1 if catchup == "none" else cap
    ticks: list[datetime] = []
    for tick in cron_sim(cron, now + _EPSILON, reverse=True):
        if tick <= last or len(ticks) >= limit:
            break
        ticks.append(tick)
    return ticks[::-1]


def next_tick(cron: str, after: datetime) -> datetime:
    """The first tick of `cron` strictly after `after`."""
    return next(cron_sim(cron, after))


def schedules(workflows: Mapping[str, WorkflowDef]) -> list[tuple[WorkflowDef, str]]:
    """Every (workflow, cron) pair of an App's workflows."""
    return [(wf, cron) for wf in workflows.values() for cron in wf.rules.schedules]


def tick_key(workflow: str, tick: datetime) -> str:
    """The idempotency key of a tick's run."""
    return f"schedule:{workflow}:{tick.astimezone(UTC).isoformat()}"


async def tick(env: Env, now: datetime) -> list[ExecutionRow]:
    """Start the runs due at `now` for every schedule this process knows; the runs started
    (by this call; another process may have started the others). Raises Unavailable."""
    started: list[ExecutionRow] = []
    for wf, cron in schedules(env.app.workflows):
        with storage_errors():
            started.extend(await _tick_one(env, wf, cron, now))
    return started


async def _tick_one(env: Env, wf: WorkflowDef, cron: str, now: datetime) -> list[ExecutionRow]:
    adm = env.admission
    started: list[ExecutionRow] = []
    async with env.pool.acquire() as conn, conn.transaction():
        await admitting.ensure_schedule(conn, wf.name, cron, now)
        last = await admitting.lock_schedule(conn, wf.name, cron)
        if last is None:
            return []  # another scheduler holds this schedule right now
        due = due_ticks(cron, last, now, adm.catchup, adm.catchup_cap)
        for at in due:
            key = tick_key(wf.name, at)
            try:
                new = prepare(
                    env,
                    wf.name,
                    {} if wf.takes_input else None,
                    idempotency_key=key,
                    created={"by": "schedule", "schedule": cron, "tick": at.isoformat()},
                )
            except errors.TetherError as exc:
                logger.error("schedule %r of %r cannot start a run: %s", cron, wf.name, exc)
                continue
            row = await repo.insert_execution(conn, new)
            if row is not None:
                started.append(row)
        if due:
            await admitting.set_schedule_tick(conn, wf.name, cron, due[-1])
    return started


class Scheduler:
    """The loop of one process: tick, then sleep until the next tick of any schedule."""

    def __init__(self, env: Env, *, clock: Clock | None = None, retry_s: float = 5.0) -> None:
        self.env = env
        self.clock = clock or runtime_clock.now
        self.retry_s = retry_s
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    def next_wake(self, now: datetime) -> datetime | None:
        """The earliest next tick of any schedule after `now`; None without schedules."""
        ticks = [next_tick(cron, now) for _, cron in schedules(self.env.app.workflows)]
        return min(ticks, default=None)

    async def run(self) -> None:
        while not self._stop.is_set():
            now = self.clock()
            try:
                await tick(self.env, now)
            except errors.Unavailable:
                logger.warning("scheduler tick failed; retrying in %.0fs", self.retry_s)
                await self._sleep(self.retry_s)
                continue
            wake = self.next_wake(now)
            if wake is None:
                return
            await self._sleep((wake - self.clock()).total_seconds() + 0.01)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), max(seconds, 0.0))
