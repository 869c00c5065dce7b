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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from tether.runtime import answer_rules, clock, probes, waits
from tether.runtime.changes import ChangeHub
from tether.runtime.operations import Operations
from tether.runtime.policy import seconds
from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.skipping import Outlook, SkippingClock
from tether.runtime.worker import WorkerSettings
from tether.testing import records
from tether.testing.crashes import Crash, CrashPoints, When
from tether.testing.databases import Databases, shared
from tether.testing.errors import (
    KitError,
    RunEnded,
    RunFailed,
    WaitTimedOut,
    translated,
)
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
    """Run an App's workflows in a test: `async with WorkflowEnvironment(app) as env:`.

    On entry it creates a database of its own (a copy of a migrated template on the test
    server: see `Databases`) and starts the runtime on it with one worker in this process; on
    exit it stops them and drops the database. Runs started with `start` (or through `ops`)
    are executed by that worker. A run id is a handle: `result`, `run`, `status`, the waits
    and the answers follow it through continue-as-new and retries to the live run.

    One environment with time skipping (or with crash points armed) runs at a time in a
    process: its clock and its probes are the process's.

    Args:
        app: the App whose workflows run.
        time_skipping: skip time while the test waits and nothing can run (see the guide,
            "Time skipping"); False: time passes as on a server.
        timeout: how long (wall-clock seconds) a wait of the environment waits before it
            raises WaitTimedOut, unless the call gives its own `timeout`.
        databases: where the database comes from (default: this process's shared
            `Databases`: `TETHER_DATABASE_URL`'s server, else an embedded one).
        worker_settings: the worker's settings (default: `DEFAULT_WORKER_SETTINGS`).
        dags_dir: DAG files to load, as `tether serve --dags`.
        protocols_dir: protocol workflows to load, as `tether serve --protocols`.
        by: who starts, answers and signals, in history and audit (a call's `by` wins).
        approver_roles: each approver role's members, as `TETHER_APPROVER_ROLES` sets them
            on a server (`{"finance": ["dan", "erin"]}`), for approvals whose approvers are
            a role.
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
        approver_roles: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.app = app
        """The App whose workflows run."""
        self.time_skipping = time_skipping
        """Whether time skips while the test waits and nothing can run."""
        self.timeout = timeout
        """Wall-clock seconds a wait waits unless the call gives its own."""
        self.by = by
        """Who starts, answers and signals unless a call says."""
        self._databases = databases
        self._db_source: Databases | None = None  # where this run's database came from
        self._worker_settings = worker_settings or DEFAULT_WORKER_SETTINGS
        self._dags_dir = dags_dir
        self._protocols_dir = protocols_dir
        self._roles = {role: frozenset(who) for role, who in (approver_roles or {}).items()}
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
            RuntimeError: another environment holds this process's clock, or the runtime
                stopped while starting.
            DatabaseUnavailable: the test server cannot be reached.
        """
        databases = self._db_source = self._databases or shared()
        self._dsn = await databases.create()
        try:
            if self.time_skipping:
                skipping = SkippingClock()
                with translated():
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
            approver_roles=self._roles,
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
        """The runtime's operations (update, cancel, terminate, retry, list, …), the API every
        surface calls, for what the environment has no method for. They raise the runtime's
        own errors, not the kit's. Outside `async with` reading it raises RuntimeError."""
        return self._runtime().ops

    @property
    def database_url(self) -> str:
        """The DSN of this environment's own database (RuntimeError outside `async with`)."""
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
        """The environment's time.

        Returns:
            The system clock's time plus whatever has been skipped (timezone-aware, UTC).
        """
        return self._clock() if self._clock is not None else clock.system()

    async def sleep(self, duration: float | timedelta, *, timeout: float | None = None) -> None:
        """Let `duration` pass. With time skipping the clock moves forward by it, stopping at
        each wake-up on the way, in order, until the runs woken there have settled; without,
        this sleeps.

        Args:
            duration: how long (seconds, or a timedelta).
            timeout: wall-clock seconds to wait for runs to settle (default: the
                environment's `timeout`).

        Raises:
            WaitTimedOut: the runs did not settle in time.
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
        """Start a run.

        Args:
            workflow: the workflow's name.
            input: its input: a model instance, or its JSON form.
            business_id: the caller-facing id (default: the run's id).
            idempotency_key: starting again with the same key returns the same run.
            by: who starts it (default: the environment's `by`).

        Returns:
            The run's id, which every other method takes.

        Raises:
            WorkflowNotFound: the App has no such workflow.
            InvalidInput: `input` does not fit the workflow's model.
            tether.client.StartConflict: `idempotency_key` is held by a run started with
                other input.
        """
        if isinstance(input, BaseModel):
            input = input.model_dump(mode="json")
        with translated():
            started = await self.ops.start(
                workflow,
                input,
                business_id=business_id,
                idempotency_key=idempotency_key,
                by=by or self.by,
            )
        return started.execution.id

    async def run(self, run: str) -> RunInfo:
        """Read a run as stored now.

        Args:
            run: the run's id (the live end of its chain is read).

        Returns:
            The run.

        Raises:
            RunNotFound: no such run.
        """
        with translated():
            return records.run_info((await self.ops.get(run)).current)

    async def status(self, run: str) -> str:
        """Read a run's status now.

        Args:
            run: the run's id.

        Returns:
            `pending`, `running`, `waiting`, `completed`, `failed`, `timed_out`, `cancelled`
            or `terminated`.

        Raises:
            RunNotFound: no such run.
        """
        return (await self.run(run)).status

    async def result(self, run: str, *, timeout: float | None = None) -> Any:
        """Wait (skipping time) for a run to end and return its result.

        Args:
            run: the run's id.
            timeout: wall-clock seconds to wait (default: the environment's `timeout`).

        Returns:
            The result, typed as the workflow's return annotation (round-tripped through
            JSON, as a replay returns it).

        Raises:
            RunFailed: it ended failed, timed out, cancelled or terminated.
            WaitTimedOut: it had not ended in time.
            RunNotFound: no such run.
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
        """Wait (skipping time) until a condition on a run holds.

        Args:
            run: the run's id.
            predicate: the condition, given the run as stored each time it changes.
            timeout: wall-clock seconds to wait (default: the environment's `timeout`).

        Returns:
            The run as it was when the condition held.

        Raises:
            WaitTimedOut: it did not hold in time.
            RunNotFound: no such run.
        """

        async def look() -> RunInfo | None:
            info = await self.run(run)
            return info if predicate(info) else None

        return await self._until(look, "the run's condition", run, timeout)

    async def wait_until_waiting(
        self, run: str, wait: str | None = None, *, timeout: float | None = None
    ) -> tuple[OpenWait, ...]:
        """Wait (skipping time) until a run asks for input: an open approval, human task,
        signal or agent step.

        Args:
            run: the run's id.
            wait: only a wait of this name (or with this key); None: any.
            timeout: wall-clock seconds to wait (default: the environment's `timeout`).

        Returns:
            The open waits that match, at least one.

        Raises:
            RunEnded: the run ended first.
            WaitTimedOut: no such wait opened in time.
            RunNotFound: no such run.
        """
        wanted = "a wait" if wait is None else f"wait {wait!r}"

        async def look() -> tuple[OpenWait, ...] | None:
            info = await self.run(run)
            found = tuple(
                w
                for w in info.waits
                if w.kind in answer_rules.ANSWERABLE_KINDS
                and (wait is None or wait in (w.name, w.key))
            )
            if found:
                return found
            if not info.live:
                message = f"run {info.id} ended {info.status} before {wanted} opened"
                raise RunEnded(message, run_id=info.id, status=info.status)
            return None

        return await self._until(look, f"{wanted} to open", run, timeout)

    async def history(self, run: str) -> list[Event]:
        """Read a run's history.

        Args:
            run: the run's id; its own history is read (a continue-as-new successor or a
                retry has its own: see `RunInfo.successor_id`).

        Returns:
            Its events, oldest first.

        Raises:
            RunNotFound: no such run.
        """
        with translated():
            return [records.event(e) for e in await self.ops.history(run)]

    async def steps(self, run: str) -> list[Step]:
        """Read a run's recorded durable calls.

        Args:
            run: the run's id; its own records are read.

        Returns:
            Its records, by position in the workflow body.

        Raises:
            RunNotFound: no such run.
        """
        with translated():
            return [records.step(s) for s in await self.ops.steps(run)]

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
        """Answer a run's open wait through the runtime's one answer path (as `tasks/update`,
        `answer_<wf>` and `tether runs answer` do).

        Given a name, it first waits (skipping time) for a wait of that name to open; a key is
        answered at once, so answering a key again gets the runtime's verdict: the same answer
        changes nothing, another raises AnswerConflict.

        Args:
            run: the run's id.
            wait: the wait's name, or its key.
            response: the answer, as the wait's schema asks for it.
            by: who answers (default: the environment's `by`).
            timeout: wall-clock seconds to wait for the wait (default: the environment's).

        Returns:
            The key of the wait answered.

        Raises:
            AnswerRejected: the answer does not fit the wait; nothing changed.
            AnswerConflict: the wait was answered differently before.
            WaitNotOpen: no open wait has that key, or several have that name.
            RunEnded: the run ended before the wait opened.
            WaitTimedOut: the wait did not open in time.
            RunNotFound: no such run.
        """
        if waits.parse_key(wait) is None:
            await self.wait_until_waiting(run, wait, timeout=timeout)
        with translated():
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
        """Approve an approval (`ctx.approval` returns `Approved(inputs)`), as `answer` does.

        Args:
            run: the run's id.
            name: the approval's name (or key).
            inputs: its named inputs.
            by: who approves (default: the environment's `by`).
            timeout: wall-clock seconds to wait for the approval (default: the
                environment's).

        Returns:
            The key of the wait answered.

        Raises:
            AnswerRejected: a required input is missing or empty; nothing changed.
            AnswerConflict: the approval was answered differently before.
            WaitNotOpen: no open approval has that key, or several waits have that name.
            RunEnded: the run ended before the approval opened.
            WaitTimedOut: the approval did not open in time.
        """
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
        """Reject an approval (`ctx.approval` raises `Rejected`; uncaught, the run fails), as
        `answer` does.

        Args:
            run: the run's id.
            name: the approval's name (or key).
            reason: why, recorded with the run's error.
            by: who rejects (default: the environment's `by`).
            timeout: wall-clock seconds to wait for the approval (default: the
                environment's).

        Returns:
            The key of the wait answered.

        Raises:
            AnswerConflict: the approval was answered differently before.
            WaitNotOpen: no open approval has that key, or several waits have that name.
            RunEnded: the run ended before the approval opened.
            WaitTimedOut: the approval did not open in time.
        """
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
        """Push an approval or a human task back (the workflow gets `PushedBack(feedback)`),
        as `answer` does.

        Args:
            run: the run's id.
            name: the wait's name (or key).
            feedback: what to tell the workflow (an approval's values are strings).
            by: who pushes back (default: the environment's `by`).
            timeout: wall-clock seconds to wait for the wait (default: the environment's).

        Returns:
            The key of the wait answered.

        Raises:
            AnswerRejected: the feedback does not fit the wait; nothing changed.
            AnswerConflict: the wait was answered differently before.
            WaitNotOpen: no open wait has that key, or several have that name.
            RunEnded: the run ended before the wait opened.
            WaitTimedOut: the wait did not open in time.
        """
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
        """Complete a human task (`ctx.human_task` returns `Completed(values)`), as `answer`
        does.

        Args:
            run: the run's id.
            name: the task's name (or key).
            values: the form's values: a model instance, or its fields.
            by: who completes it (default: the environment's `by`).
            timeout: wall-clock seconds to wait for the task (default: the environment's).

        Returns:
            The key of the wait answered.

        Raises:
            AnswerRejected: the values do not fit the form; nothing changed.
            AnswerConflict: the task was answered differently before.
            WaitNotOpen: no open task has that key, or several waits have that name.
            RunEnded: the run ended before the task opened.
            WaitTimedOut: the task did not open in time.
        """
        fields = values.model_dump(mode="json") if isinstance(values, BaseModel) else values
        return await self.answer(
            run, name, {"decision": "complete", **fields}, by=by, timeout=timeout
        )

    async def signal(
        self, run: str, name: str, payload: Any = None, *, by: str | None = None
    ) -> None:
        """Send a signal: it answers the run's open signal wait of that name through the one
        answer path, else the run keeps it for the wait to come.

        Args:
            run: the run's id.
            name: the signal's name.
            payload: what it carries (JSON).
            by: who sends it (default: the environment's `by`).

        Raises:
            RunEnded: the run has ended.
            AnswerRejected: `payload` does not fit the open wait's schema; nothing changed.
            RunNotFound: no such run.
        """
        with translated():
            await self.ops.signal(run, name, payload, by=by or self.by)

    # --- crashes -----------------------------------------------------------------------------

    def crash_at(
        self, step: str, *, when: When = "before", workflow: str | None = None, times: int = 1
    ) -> Crash:
        """Arm a crash: the next time a run reaches a step, the worker running it dies. The
        run's lease then expires (at once with time skipping) and a worker resumes the run
        from its history: the steps recorded before the crash are not run again.

        Args:
            step: the step's name as recorded (`name=`, else the function's qualified name).
            when: `before` its function runs, or `after` it returned but before its result
                was recorded (the step then runs again on replay).
            workflow: only runs of this workflow (None: any).
            times: how many times it fires.

        Returns:
            The crash point, which counts where it fired.

        Raises:
            KitError: `times` is less than 1.
            RuntimeError: outside `async with`, or another environment's crashes are armed.
        """
        if times < 1:
            raise KitError("a crash fires at least once: times must be 1 or more")
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
                    with translated():
                        idle = await self._idle(skipping) if skipping is not None else None
                    found = await look()
                    if found is not None:
                        return found
                    if skipping is not None and idle is not None and idle.next_wake is not None:
                        with translated():
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
