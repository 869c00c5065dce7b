"""Workers: claim due runs (FOR UPDATE SKIP LOCKED), execute them concurrently, keep their
leases alive, and give them back on shutdown.

Wake-ups come from LISTEN (`tether_ready`) when a listener is given, with polling as the
fallback, so a lost notification costs at most one poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass, field

from tether.observability import metrics, tracing
from tether.runtime import observe
from tether.runtime.admission import NO_ADMISSION, Admission, queue_limits
from tether.runtime.executor import RunIO
from tether.runtime.ids import new_worker_id
from tether.runtime.registry import App
from tether.storage import admitting, repo
from tether.storage.checkpoints import CheckpointWriter, Refill
from tether.storage.driver import Database, Notifications
from tether.storage.errors import StorageError
from tether.storage.notify import READY_CHANNEL
from tether.storage.rows import ExecutionRow

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSettings:
    concurrency: int = 16
    lease_s: float = 30.0
    poll_s: float = 1.0
    shutdown_grace_s: float = 10.0
    update_timeout_s: float = 5.0
    # A run whose worker is lost this many times in a row while running it (it dies, or loses
    # the database, with no progress in between) ends failed instead of being claimed again.
    max_recovery_attempts: int = 10
    # Checkpoints of different runs written at once share a statement and a commit once this
    # many statements are in flight (storage/checkpoints.py); 0 turns the grouping off. At 1,
    # every write made while a statement is in flight goes in the next one (the fewest commits
    # and the least CPU per run: docs/benchmarks.md).
    checkpoint_statements: int = 1
    # A statement that settles runs also claims the runs that take their slots (storage/
    # checkpoints.py, Refill); off, or with queues configured, only the claim loop claims.
    refill_claims: bool = True
    # Queues (the worker admits queued runs before it claims), profiles and schedules; the
    # runtime's operations and scheduler use the same configuration (runtime/service.py).
    admission: Admission = NO_ADMISSION

    def __post_init__(self) -> None:
        if self.max_recovery_attempts < 1:
            raise ValueError("max_recovery_attempts must be at least 1")

    @property
    def abandon(self) -> repo.Abandon:
        """The claim's poison-run guard for these settings."""
        return repo.Abandon(
            after=self.max_recovery_attempts,
            message=(
                "run abandoned: its worker was lost %s times in a row while running it "
                f"(TETHER_MAX_RECOVERY_ATTEMPTS={self.max_recovery_attempts})"
            ),
        )


@dataclass
class _Active:
    task: asyncio.Task[str]
    io: RunIO


@dataclass
class WorkerStats:
    claimed: int = 0
    abandoned: int = 0
    finished: dict[str, int] = field(default_factory=dict)


class Worker:
    """One claim loop with up to `concurrency` runs in flight."""

    def __init__(
        self,
        pool: Database,
        app: App,
        settings: WorkerSettings | None = None,
        *,
        listener: Notifications | None = None,
        owner: str | None = None,
    ) -> None:
        self.pool = pool
        self.app = app
        self.settings = settings or WorkerSettings()
        self.owner = owner or new_worker_id()
        self.stats = WorkerStats()
        self._listener = listener
        self._active: dict[str, _Active] = {}
        self._reserved = 0  # slots held for runs a start hands over (`reserve`)
        self._handed = asyncio.Event()  # set while no slot is reserved
        self._handed.set()
        self._closed = False  # drained: a run handed over now is left to its lease's expiry
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._abandon = self.settings.abandon
        self._queues = queue_limits(
            self.settings.admission, {n: w.rules.max_active_runs for n, w in app.workflows.items()}
        )
        self.running = asyncio.Event()
        statements = self.settings.checkpoint_statements
        refill = Refill(self.owner, self.settings.lease_s, self._abandon, self._room, self._take)
        self._writer = (
            CheckpointWriter(
                pool,
                max_statements=statements,
                refill=refill if self.settings.refill_claims else None,
                echo=listener.echo if listener is not None else None,
            )
            if statements
            else None
        )

    @property
    def in_flight(self) -> int:
        """Runs this worker is executing now: what stopping waits for (up to its grace)."""
        return len(self._active)

    def stop(self) -> None:
        """Stop claiming; run() then drains (bounded by shutdown_grace_s) and returns."""
        self._stopping.set()
        self._wake.set()

    def _room(self, settling: int) -> int:
        """How many runs a checkpoint statement settling `settling` runs claims with them:
        as many, unless the worker stops or admits queued runs first (its claim loop does), or
        while tracing: only the claim loop reads a run's stored traceparent along."""
        if self._stopping.is_set() or self._queues or tracing.enabled():
            return 0
        return settling

    def _take(self, rows: list[ExecutionRow]) -> None:
        for row in rows:
            self._start(row)

    def reserve(self) -> repo.Lease | None:
        """Hold a free slot for a run a start of this process inserts already claimed by this
        worker (operations/starting.py); None while it stops, admits queued runs first, traces
        (as `_room`), or has no free slot. `adopt` or `unreserve` frees the slot."""
        busy = len(self._active) + self._reserved
        if not self.running.is_set() or busy >= self.settings.concurrency or self._room(1) == 0:
            return None
        self._reserved += 1
        self._handed.clear()
        return repo.Lease(self.owner, self.settings.lease_s)

    def unreserve(self) -> None:
        self._release_reservation()
        self._wake.set()  # the slot is free again for the claim loop

    def adopt(self, row: ExecutionRow) -> None:
        """Run a run a start inserted claimed by this worker (its reserved slot; the claim
        loop is not woken: the run takes the slot)."""
        self._release_reservation()
        if self._closed:  # drained meanwhile: its lease expires and any worker claims it
            logger.warning("a run was handed over after the worker stopped; it is recovered")
            return
        self._start(row)

    def _release_reservation(self) -> None:
        self._reserved -= 1
        if self._reserved == 0:
            self._handed.set()

    def _poke(self, _channel: str = "", _payload: str = "") -> None:
        self._wake.set()

    async def run(self) -> None:
        unsubscribe = (
            self._listener.subscribe(READY_CHANNEL, self._poke) if self._listener else None
        )
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="tether-heartbeat")
        self.running.set()
        try:
            await self._claim_loop()
        finally:
            self.running.clear()
            if unsubscribe:
                unsubscribe()
            await self._drain()
            if self._writer is not None:
                await self._writer.close()
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _claim_loop(self) -> None:
        backoff = self.settings.poll_s
        while not self._stopping.is_set():
            self._wake.clear()
            free = self.settings.concurrency - len(self._active) - self._reserved
            claimed: list[ExecutionRow] = []
            if free > 0:
                try:
                    if self._queues:
                        await self._admit()
                    claimed = await repo.claim(
                        self.pool,
                        self.owner,
                        self.settings.lease_s,
                        free,
                        self._abandon,
                        traced=tracing.enabled(),
                    )
                    backoff = self.settings.poll_s
                except StorageError:
                    logger.warning("claim failed; retrying in %.1fs", backoff)
                    await self._sleep(backoff)
                    backoff = min(backoff * 2, 30.0)
                    continue
            for row in claimed:
                self._start(row)
            if claimed and len(claimed) == free:
                continue  # there may be more due work; claim again when a slot frees
            # Fewer than asked: every run due by the claim is taken. One made due since has
            # woken us (its notification), as has a run of ours that ended; else poll.
            await self._sleep(self.settings.poll_s)

    async def _admit(self) -> None:
        """Move queued runs into their queues' free slots (oldest first); they are then due
        for the claim like any other run. Raises StorageError."""
        for queue in await admitting.queues_with_backlog(self.pool, list(self._queues)):
            await admitting.admit(self.pool, queue, self._queues[queue])

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def _start(self, row: ExecutionRow) -> None:
        self.stats.claimed += 1
        stale = self._active.get(row.id)
        if stale is not None:  # our own lease expired and we claimed the run again
            stale.task.cancel()
        if row.status != "running":  # the claim abandoned it (poison-run guard): never run it
            self.stats.abandoned += 1
            metrics.run_abandoned(row.workflow)
            logger.warning(
                "abandoned a run of %r: its worker was lost %d times in a row while running it",
                row.workflow,
                row.lost_leases,
            )
            return
        metrics.run_claimed(row.workflow, row.attempt, row.lost_leases)
        io = RunIO(
            self.pool, row.id, self.owner, row.attempt, row.last_event_id, writer=self._writer
        )
        task = asyncio.create_task(
            observe.run_attempt(
                self.pool,
                self.app,
                row,
                self.owner,
                io=io,
                update_timeout=self.settings.update_timeout_s,
            ),
            name=f"tether-run-{row.id[:8]}",
        )
        self._active[row.id] = _Active(task, io)
        task.add_done_callback(functools.partial(self._done, row.id))

    def _done(self, execution_id: str, task: asyncio.Task[str]) -> None:
        active = self._active.get(execution_id)
        if active is not None and active.task is task:
            del self._active[execution_id]
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:
                logger.error("run task crashed", exc_info=exc)
            else:
                status = task.result()
                self.stats.finished[status] = self.stats.finished.get(status, 0) + 1
        self._wake.set()

    async def _heartbeat_loop(self) -> None:
        interval = max(self.settings.lease_s / 3.0, 0.05)
        while True:
            await asyncio.sleep(interval)
            leases = [(rid, a.io.attempt) for rid, a in self._active.items()]
            if not leases:
                continue
            try:
                held = await repo.heartbeat(self.pool, self.owner, leases, self.settings.lease_s)
            except StorageError:
                logger.warning("heartbeat failed; leases may expire")
                continue
            for rid, _attempt in leases:
                active = self._active.get(rid)
                if active is None:
                    continue
                if rid not in held and not active.task.done():
                    # The run was terminated or re-claimed: stop without writing.
                    active.task.cancel()

    async def _drain(self) -> None:
        """Let in-flight runs finish for a grace period, then give their leases back. Runs
        that a settling statement already in flight claims meanwhile (a refill) are drained
        alike; no statement claims once the worker stops."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.shutdown_grace_s
        with contextlib.suppress(TimeoutError):  # runs being handed over join the drain
            async with asyncio.timeout_at(deadline):
                await self._handed.wait()
        while self._active:
            tasks = [a.task for a in self._active.values()]
            _, pending = await asyncio.wait(tasks, timeout=max(deadline - loop.time(), 0.0))
            for active in list(self._active.values()):
                if active.task in pending:
                    active.io.release_on_cancel = True
                    active.task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        self._closed = True
