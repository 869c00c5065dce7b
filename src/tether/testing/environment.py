"""WorkflowEnvironment: an App's workflows run for real in a test, on a database of their own,
with a worker in the test's process, time that skips, answers given from code, simulated
crashes, and the run's history to assert on.

Time skipping. The environment's clock (runtime/skipping.py) is the system clock plus an
offset, in Python and in the test's database at once. While a test waits on the environment
(`result`, `wait_until…`, an answer waiting for its wait to open, `sleep`) and nothing can run
(no run is due, none is held by a live worker), the clock jumps to the next wake-up of any run:
a durable sleep's end, a wait's deadline, a retry's backoff, a dead worker's lease expiry. The
runs due then are woken and run; once nothing can run again it jumps to the next one, so
timers fire one after another in order. Time never skips while the test itself is doing
something else, nor while a step's code runs (a step's `timeout` is wall-clock time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from tether.runtime import clock, probes, waits
from tether.runtime.changes import ChangeHub
from tether.runtime.operations import Operations
from tether.runtime.policy import seconds
from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.skipping import Outlook, SkippingClock
from tether.runtime.worker import WorkerSettings
from tether.testing.crashes import Crash, CrashPoints, When
from tether.testing.databases import Databases, shared
from tether.testing.errors import RunEnded, RunFailed, WaitTimedOut
from tether.testing.records import Event, OpenWait, RunInfo, Step

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The environment's worker: production defaults but a short poll fallback, a short drain at
#: the end of a test, and a lease short enough that a crash without time skipping recovers in
#: seconds.
DEFAULT_WORKER_SETTINGS = WorkerSettings(
    concurrency=16, lease_s=10.0, poll_s=0.1, shutdown_grace_s=1.0
)
#: How often a wait looks again when no change notification woke it (wall-clock seconds).
_TICK_S = 0.02


class WorkflowEnvironment:
    """Run `app`'s workflows in a test: `async with WorkflowEnvironment(app) as env:`.

    On entry it creates a database of its own (a copy of a migrated template on the test
    server: see `Databases`) and starts the runtime on it with one worker in this process; on
    exit it stops them and drops the database. Runs started with `start` (or through `ops`,
    the operations every surface calls) are executed by that worker.

    Args:
        app: the App whose workflows run.
        time_skipping: skip time while the test waits and nothing can run (the module
            docstring says when exactly). False: time passes as on a server.
        timeout: how long (wall-clock seconds) a wait of the environment waits before it
            raises WaitTimedOut; each wait also takes its own `timeout`.
        databases: where the database comes from (default: this process's shared
            `Databases`: TETHER_DATABASE_URL's server, else an embedded one).
        worker_settings: the worker's settings (default DEFAULT_WORKER_SETTINGS).
        dags_dir: DAG files to load, as `tether serve --dags`.
        protocols_dir: protocol workflows to load, as `tether serve --protocols`.
        by: who answers, signals and starts, in history and audit (`by` of each call wins).

    One environment with time skipping (or with crash points armed) runs at a time in a
    process: its clock is the process's clock.
    """

    def __init__(
        self,
        app: App,
        *,
        time_skipping: bool = True,
        timeout: float = 10.0,
        databases: Databases | None = None,
        worker_settings: WorkerSettings | None = None,
        dags_dir: str | Path | None = None,
        protocols_dir: str | Path | None = None,
        by: str = "test",
    ) -> None:
        self.app = app
        self.time_skipping = time_skipping
        self.timeout = timeout
        self.by = by
        self._databases = databases
        self._db_source: Databases | None = None  # where this run's database came from
        self._worker_settings = worker_settings or DEFAULT_WORKER_SETTINGS
        self._dags_dir = dags_dir
        self._protocols_dir = protocols_dir
        self._dsn: str | None = None
        self._clock: SkippingClock | None = None
        self._crashes = CrashPoints()
        self._installed = contextlib.ExitStack()
        self._probing = False
        self._host: asyncio.Task[None] | None = None
        self._rt: Runtime | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> WorkflowEnvironment:
        """Create the database, install the clock, start the runtime.

        Raises:
            RuntimeError: another environment holds this process's clock.
            tether.runtime.errors.Unavailable: the test server cannot be reached.
        """
        databases = self._db_source = self._databases or shared()
        self._dsn = await databases.create()
        try:
            if self.time_skipping:
                skipping = SkippingClock()
                await skipping.install(self._dsn)
                self._installed.enter_context(clock.installed(skipping))
                self._clock = skipping
            self._host = asyncio.create_task(self._serve(self._dsn), name="tether-testing-env")
            ready = asyncio.create_task(self._ready.wait())
            await asyncio.wait({self._host, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
            if self._host.done():
                self._host.result()  # raises what stopped the runtime
                raise RuntimeError("the runtime stopped while starting")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the runtime (runs still in flight are cut off after the worker's grace
        period), give the clock back, drop the database."""
        await self._close()

    async def _serve(self, dsn: str) -> None:
        async with running(
            dsn,
            self.app,
            worker_settings=self._worker_settings,
            janitor_interval_s=None,
            run_migrations=False,
            dags_dir=self._dags_dir,
            protocols_dir=self._protocols_dir,
        ) as rt:
            hub = ChangeHub(rt.listener)
            hub.watch_every(lambda _id: self._changed.set())
            self._rt = rt
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                hub.close()

    async def _close(self) -> None:
        self._stop.set()
        failure: BaseException | None = None
        if self._host is not None:
            try:
                await self._host
            except Exception as exc:  # noqa: BLE001 — reported below, after the cleanup
                failure = exc
        self._rt = None
        self._installed.close()
        self._clock = None
        if self._dsn is not None and self._db_source is not None:
            dsn, self._dsn = self._dsn, None
            await self._db_source.drop(dsn)
        if failure is not None:
            raise RuntimeError("the environment's runtime failed") from failure

    @property
    def ops(self) -> Operations:
        """The runtime's operations (start, answer, signal, cancel, update, get, …): the
        API every surface calls, for what the environment has no helper for.

        Raises:
            RuntimeError: outside `async with`, or after the runtime failed.
        """
        return self._runtime().ops

    @property
    def database_url(self) -> str:
        """The DSN of this environment's own database."""
        if self._dsn is None:
            raise RuntimeError("the environment is not running: use it inside `async with`")
        return self._dsn

    def _runtime(self) -> Runtime:
        host = self._host
        if host is not None and host.done() and not self._stop.is_set():
            cause = None if host.cancelled() else host.exception()
            raise RuntimeError("the environment's runtime stopped") from cause
        if self._rt is None:
            raise RuntimeError("the environment is not running: use it inside `async with`")
        return self._rt

    # --- time --------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The environment's time: the system clock plus whatever has been skipped."""
        return self._clock() if self._clock is not None else clock.system()

    async def sleep(self, duration: float | timedelta, *, timeout: float | None = None) -> None:
        """Let `duration` pass: with time skipping, move the clock forward by it, stopping at
        each wake-up on the way (in order) until the runs it woke have settled; else sleep.

        Raises:
            WaitTimedOut: the runs did not settle within `timeout` wall-clock seconds.
        """
        span = timedelta(seconds=seconds(duration) or 0.0)
        skipping = self._clock
        if skipping is None:
            await asyncio.sleep(span.total_seconds())
            return
        target = skipping() + span
        rt = self._runtime()

        async def look() -> bool | None:
            out = await skipping.outlook(rt.pool, sorted(self._crashes.lost))
            if out.busy:
                return None
            if out.next_wake is not None and out.next_wake <= target:
                await skipping.skip(rt.pool, out.next_wake - out.now)
                return None
            await skipping.skip(rt.pool, target - out.now)
            return True

        await self._until(look, f"{span} to pass", None, timeout, skip=False)

    # --- runs --------------------------------------------------------------------------------

    async def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        business_id: str | None = None,
        idempotency_key: str | None = None,
        by: str | None = None,
    ) -> str:
        """Start a run of `workflow` with `input` (a model instance or its JSON form); its id,
        which every other method takes (it follows continue-as-new and retries to the live run).

        Raises:
            tether.runtime.errors.WorkflowNotFound: no such workflow in the App.
            tether.runtime.errors.InvalidInput: `input` does not fit the workflow's model.
        """
        if isinstance(input, BaseModel):
            input = input.model_dump(mode="json")
        started = await self.ops.start(
            workflow,
            input,
            business_id=business_id,
            idempotency_key=idempotency_key,
            by=by or self.by,
        )
        return started.execution.id

    async def run(self, run: str) -> RunInfo:
        """The run as stored now (the live end of its chain).

        Raises:
            tether.runtime.errors.ExecutionNotFound: no such run.
        """
        return RunInfo.from_row((await self.ops.get(run)).current)

    async def status(self, run: str) -> str:
        """The run's status now: pending, running, waiting, completed, failed, timed_out,
        cancelled or terminated (see `run`)."""
        return (await self.run(run)).status

    async def result(self, run: str, *, timeout: float | None = None) -> Any:
        """Wait for the run to end (skipping time) and return its result, typed as the
        workflow's return annotation (round-tripped through JSON, as a replay returns it).

        Raises:
            RunFailed: it ended failed, timed out, cancelled or terminated.
            WaitTimedOut: it had not ended after `timeout` wall-clock seconds.
        """

        async def look() -> RunInfo | None:
            info = await self.run(run)
            return None if info.live else info

        info = await self._until(look, "the run to end", run, timeout)
        if info.status != "completed":
            raise RunFailed(info.id, info.status, info.error)
        wf = self.app.workflows.get(info.workflow)
        return wf.output_adapter.validate_python(info.output) if wf is not None else info.output

    async def wait_until(
        self, run: str, predicate: Callable[[RunInfo], bool], *, timeout: float | None = None
    ) -> RunInfo:
        """Wait (skipping time) until `predicate(run)` holds; the run as it was then.

        Raises:
            WaitTimedOut: it did not hold within `timeout` wall-clock seconds.
        """

        async def look() -> RunInfo | None:
            info = await self.run(run)
            return info if predicate(info) else None

        return await self._until(look, "the run's condition", run, timeout)

    async def wait_until_waiting(
        self, run: str, wait: str | None = None, *, timeout: float | None = None
    ) -> tuple[OpenWait, ...]:
        """Wait (skipping time) until the run asks for input: it has an open wait that can be
        answered (approval, human task, signal, agent step), named `wait` (or with that key)
        when given. The open waits that match.

        Raises:
            RunEnded: the run ended first.
            WaitTimedOut: no such wait opened within `timeout` wall-clock seconds.
        """
        wanted = "a wait" if wait is None else f"wait {wait!r}"

        async def look() -> tuple[OpenWait, ...] | None:
            info = await self.run(run)
            found = tuple(
                w
                for w in info.waits
                if w.kind in waits.ANSWERABLE_KINDS and (wait is None or wait in (w.name, w.key))
            )
            if found:
                return found
            if not info.live:
                raise RunEnded(info.id, info.status, f"{wanted} opened")
            return None

        return await self._until(look, f"{wanted} to open", run, timeout)

    async def history(self, run: str) -> list[Event]:
        """The history of run `run` itself, oldest first (a continue-as-new successor or a
        retry has its own: `run(run).successor_id`).

        Raises:
            tether.runtime.errors.ExecutionNotFound: no such run.
        """
        return [Event.from_row(e) for e in await self.ops.history(run)]

    async def steps(self, run: str) -> list[Step]:
        """The recorded durable calls of run `run` itself, by position.

        Raises:
            tether.runtime.errors.ExecutionNotFound: no such run.
        """
        return [Step.from_record(s) for s in await self.ops.steps(run)]

    # --- answers -----------------------------------------------------------------------------

    async def answer(
        self,
        run: str,
        wait: str,
        response: Any,
        *,
        by: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Answer the run's open wait `wait` (its name, or its key) with `response`, through
        the runtime's one answer path (as `tasks/update`, `answer_<wf>` and `tether runs
        answer` do); the key answered. Given a name, it first waits (skipping time) for a wait
        of that name to open; a key is answered at once, so answering a key again reports
        what the runtime decides (the same answer: nothing happens; another: AnswerConflict).

        Raises:
            tether.runtime.errors.AnswerRejected: `response` does not fit the wait.
            tether.runtime.errors.AnswerConflict: it was answered differently before.
            tether.runtime.errors.WaitAmbiguous: several open waits have that name.
            tether.runtime.errors.WaitNotOpen: the key given is not open.
            RunEnded: the run ended before the wait opened.
            WaitTimedOut: the wait did not open within `timeout` wall-clock seconds.
        """
        if waits.parse_key(wait) is None:
            await self.wait_until_waiting(run, wait, timeout=timeout)
        answered = await self.ops.answer_wait(run, wait, response, by=by or self.by)
        return answered.key

    async def approve(
        self,
        run: str,
        name: str,
        inputs: Mapping[str, str] | None = None,
        *,
        by: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Approve the approval `name` with its named `inputs` (see `answer`)."""
        return await self.answer(
            run, name, {"decision": "approve", **(inputs or {})}, by=by, timeout=timeout
        )

    async def reject(
        self,
        run: str,
        name: str,
        reason: str | None = None,
        *,
        by: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Reject the approval `name` (`ctx.approval` then raises Rejected in the workflow;
        see `answer`)."""
        response: dict[str, Any] = {"decision": "reject"}
        if reason is not None:
            response["reason"] = reason
        return await self.answer(run, name, response, by=by, timeout=timeout)

    async def push_back(
        self,
        run: str,
        name: str,
        feedback: Mapping[str, Any] | None = None,
        *,
        by: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Push the approval or human task `name` back with `feedback` (the workflow gets
        PushedBack; see `answer`)."""
        return await self.answer(
            run, name, {"decision": "push_back", **(feedback or {})}, by=by, timeout=timeout
        )

    async def complete_human_task(
        self,
        run: str,
        name: str,
        values: BaseModel | Mapping[str, Any],
        *,
        by: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Complete the human task `name` with its form's `values` (a model instance or its
        JSON form; the workflow gets Completed; see `answer`)."""
        fields = values.model_dump(mode="json") if isinstance(values, BaseModel) else values
        return await self.answer(
            run, name, {"decision": "complete", **fields}, by=by, timeout=timeout
        )

    async def signal(
        self, run: str, name: str, payload: Any = None, *, by: str | None = None
    ) -> None:
        """Send signal `name` with `payload` to the run: it answers an open signal wait of
        that name through the one answer path, else the run keeps it for the wait to come.

        Raises:
            tether.runtime.errors.RunEnded: the run has ended.
            tether.runtime.errors.AnswerRejected: `payload` does not fit the open wait.
        """
        await self.ops.signal(run, name, payload, by=by or self.by)

    # --- crashes -----------------------------------------------------------------------------

    def crash_at(
        self, step: str, *, when: When = "before", workflow: str | None = None, times: int = 1
    ) -> Crash:
        """Arm a crash: the next time a run reaches step `step` (`before` its function runs,
        or `after` it returned but before its result is recorded), the worker running it dies.
        The run's lease then expires (at once with time skipping) and a worker resumes it from
        its history: steps recorded before the crash are not run again. The Crash returned
        counts where it fired.

        Raises:
            RuntimeError: outside `async with`, or another environment's crashes are armed.
        """
        self._runtime()
        if not self._probing:
            self._installed.enter_context(probes.installed(self._crashes.probe))
            self._probing = True
        crash = Crash(step, when, workflow, times)
        self._crashes.armed.append(crash)
        return crash

    # --- waiting -----------------------------------------------------------------------------

    async def _until(
        self,
        look: Callable[[], Awaitable[T | None]],
        what: str,
        run: str | None,
        timeout: float | None,
        *,
        skip: bool = True,
    ) -> T:
        """Call `look` until it returns something, skipping time while nothing can run;
        woken by change notifications, polling as a fallback."""
        limit = self.timeout if timeout is None else timeout
        skipping = self._clock if skip else None
        try:
            async with asyncio.timeout(limit):
                while True:
                    self._changed.clear()
                    # Idle first, then look: a state found idle cannot change before `look`
                    # reads it, so a skip never jumps past what the test waits for (a wait
                    # opened with a deadline is seen before its deadline is skipped to).
                    idle = await self._idle(skipping) if skipping is not None else None
                    found = await look()
                    if found is not None:
                        return found
                    if skipping is not None and idle is not None and idle.next_wake is not None:
                        await skipping.skip(self._runtime().pool, idle.next_wake - idle.now)
                        continue
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), _TICK_S)
        except TimeoutError:
            where = await self._where(run)
            raise WaitTimedOut(f"waited {limit}s of wall time for {what}; {where}") from None

    async def _idle(self, skipping: SkippingClock) -> Outlook | None:
        """The outlook when nothing can run (None: something can)."""
        out = await skipping.outlook(self._runtime().pool, sorted(self._crashes.lost))
        return None if out.busy else out

    async def _where(self, run: str | None) -> str:
        """Where `run` stands, for a timeout's message."""
        if run is None:
            return "runs were still busy"
        try:
            info = await self.run(run)
        except Exception as exc:  # noqa: BLE001 — only a message is at stake
            return f"the run could not be read ({exc})"
        if info.waits:
            asks = ", ".join(f"{w.kind} {w.name!r} (key {w.key})" for w in info.waits)
            return f"run {info.id} is {info.status}, open waits: {asks}"
        wake = f", wakes at {info.wake_at.isoformat()}" if info.wake_at is not None else ""
        return f"run {info.id} is {info.status}{wake}"
