"""The per-run context: every durable call a workflow makes goes through it.

Replay by re-execution (docs/architecture.md): each durable call takes the next sequence number;
a recorded result is returned at once (after checking the call is the same one), otherwise the
call runs and its result is recorded before the workflow goes on. Workflow code must be
deterministic between durable calls: same inputs and recorded results, same calls in the same
order. Use ctx.now() and ctx.uuid() instead of the clock and random ids.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import uuid as uuid_mod
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn

from pydantic import TypeAdapter

from tether.observability import instrument
from tether.runtime import answer_rules, clock, probes, votes, waits
from tether.runtime.errors import NonDeterminism, StepFailed, WaitTimeout
from tether.runtime.policy import NO_RETRY, RetryPolicy, TotalTimeout, seconds
from tether.runtime.remote import call as remote_call
from tether.runtime.remote.config import RemoteCatalog
from tether.runtime.run_io import RunIO
from tether.runtime.signals import CancelledRun, ContinueAsNew, LeaseGone, Park
from tether.runtime.typed_waits import TypedWaits
from tether.storage.errors import StorageError, connection_guard
from tether.storage.repo import Checkpoint
from tether.storage.rows import BufferedSignal, ExecutionRow, RunState, StepRecord


@functools.cache
def _return_adapter(fn: Callable[..., Any]) -> TypeAdapter[Any]:
    try:
        hint = inspect.get_annotations(fn, eval_str=True).get("return", Any)
    except (NameError, TypeError):
        hint = Any
    return TypeAdapter(hint)


def _utcnow() -> datetime:
    return clock.now()


class Context(TypedWaits):
    """The durable calls a workflow makes: its first argument, one per run.

    A worker runs the workflow function from the top each time it picks the run up. Each
    durable call takes the next position in the run's history: a call recorded there
    returns the recorded result at once; otherwise it does its work and records the result.
    So a workflow must make the same durable calls in the same order on every replay, and
    reads the clock and random ids through [`now`][tether.Context.now] and
    [`uuid`][tether.Context.uuid]. A call that has to wait (a sleep, an open approval, a
    retry's backoff) parks the run: the coroutine is unwound and no process waits for it.

    Parking, a requested cancel (at the next durable call that is not a replay) and
    [`continue_as_new`][tether.Context.continue_as_new] unwind the workflow with exceptions
    derived from `BaseException`: an `except Exception` does not catch them, and code that
    catches `BaseException` must raise them again.

    Attributes:
        execution_id: The run's id.
        workflow: The name of the workflow being run.
        business_id: The id the run was started under (its successors keep it).
        run_attempt: Which run-level attempt this is (1 for the first; a run-level retry
            adds one).
    """

    def __init__(
        self,
        row: ExecutionRow,
        state: RunState,
        io: RunIO,
        remotes: RemoteCatalog | None = None,
    ) -> None:
        self.execution_id = row.id
        self.workflow = row.workflow
        self.business_id = row.business_id
        self.run_attempt = row.run_attempt
        self._records: dict[int, StepRecord] = {r.seq: r for r in state.steps}
        # Calls up to here were recorded by earlier attempts: running through them is a replay.
        self._replay_to = max(self._records, default=0)
        self._signals: list[BufferedSignal] = list(state.signals)
        self._io = io
        self._seq = 0
        self._buf = Checkpoint()
        self._cancel_requested = row.cancel_requested
        self.first_failure_seq: int | None = None
        self._attempt = row.attempt
        self._probe = probes.current()  # None but in a test kit's simulated crashes
        self._remotes = remotes

    # --- plumbing ----------------------------------------------------------------------------

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def note_cancel(self, requested: bool) -> None:
        self._cancel_requested = self._cancel_requested or requested

    def _next(self, kind: str, name: str, *, cancel: bool = True) -> tuple[int, StepRecord | None]:
        """The next position and its record. `cancel=False`: a requested cancel is left to
        the caller (a remote call cancels its remote task first)."""
        self._seq += 1
        rec = self._records.get(self._seq)
        if rec is not None and (rec.kind != kind or rec.name != name):
            raise NonDeterminism(
                f"replay of {self.execution_id} found {kind} {name!r} at position {self._seq}, "
                f"but history recorded {rec.kind} {rec.name!r}: workflow code changed or is "
                "not deterministic"
            )
        # The live edge (nothing recorded here yet) is where a requested cancel takes effect.
        if cancel and (rec is None or not rec.done) and self._cancel_requested:
            raise CancelledRun()
        return self._seq, rec

    def _record(self, seq: int, kind: str, name: str, result: Any, *, done: bool = True) -> None:
        self._buf.records = [r for r in self._buf.records if r["seq"] != seq]
        self._buf.records.append(
            {"seq": seq, "kind": kind, "name": name, "result": result, "done": done}
        )
        self._records[seq] = StepRecord(seq, kind, name, result, done)

    def take_buffer(self, **settle: Any) -> Checkpoint:
        """Everything buffered since the last write, plus the executor's settle fields."""
        cp, self._buf = self._buf, Checkpoint()
        for key, value in settle.items():
            setattr(cp, key, value)
        return cp

    async def _flush(self, *, flush: bool = True, behind: bool = False) -> None:
        """Write what is buffered (`behind`: start the write, its commit waited for later)."""
        cp = self.take_buffer()
        cp.flush = flush
        if behind:
            await self._io.write_behind(cp)
            return
        result = await self._io.write(cp)
        self.note_cancel(result.cancel_requested)

    def earlier_writes_committed(self) -> Callable[[], Awaitable[None]]:
        """For a `gated` step's `fn`: returns once every earlier write of the run has
        committed; if one failed (the lease or the database gone), raises LeaseGone, which
        stops the run without writing and is never taken for the step's own failure."""

        async def landed() -> None:
            try:
                await self._landed()
            except StorageError as exc:
                raise LeaseGone() from exc

        return landed

    async def _landed(self) -> None:
        """Every earlier write has committed (raises CancelledRun if one heard a cancel)."""
        result = await self._io.drain()
        if result is not None and result.cancel_requested:
            self.note_cancel(True)
            raise CancelledRun()

    def park_event_id(self) -> int:
        """The run's last event id once the buffered events are written (the wait key's n)."""
        return self._io.seen_event_id + len(self._buf.events)

    # --- activities --------------------------------------------------------------------------

    async def step(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
        lazy: bool = False,
        flush: bool = True,
        behind: bool = False,
        gated: bool = False,
        retry_if: Callable[[Exception], bool] | None = None,
        total_timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` and record its result; a replay returns the record.

        The guarantee is at least once: a recorded result is never computed again, but a
        worker that dies while `fn` runs (before its result is recorded) leaves it to run
        again on the next worker, so `fn` must be idempotent. A sync `fn` runs in a thread,
        an `async` one on the event loop. The result is stored as JSON and read back through
        `fn`'s return annotation, so the first run and a replay see equal values.

        A failure is retried per `retry` while `retry_if` allows: between tries the run parks
        until the backoff has passed (a durable timer; a restart does not reset the count).
        `fn` cannot take keyword arguments named like the options below.

        Args:
            fn: The function to run (sync or `async`).
            *args: Its positional arguments.
            name: The step's name in the run's history (default: `fn`'s qualified name). A
                replay checks it, so renaming a step breaks runs parked after it.
            retry: How often to try and how long to wait between tries (default: once).
            timeout: Bounds one try (seconds or a `timedelta`); a try that runs over fails
                with `TimeoutError`.
            lazy: Record the result with the run's next write instead of on its own: for a
                cheap read with no effects, which runs again if the worker dies first.
            flush: `False` commits the record without waiting for the disk flush (Tether's
                DAG interpreter uses it; a workflow leaves the default).
            behind: Start the record's write without waiting for it; the next durable call
                waits for it (Tether's DAG interpreter uses it).
            gated: `fn` itself waits for the run's earlier writes before its side effects
                (Tether's DAG interpreter uses it; a workflow leaves the default).
            retry_if: Called with a failure's exception: `False` stops retrying it.
            total_timeout: Seconds for all tries together, the waits between them included,
                from the first try's start: each try is cut to the time left, and no retry
                starts past it.
            **kwargs: Its keyword arguments.

        Returns:
            `fn`'s result, as its return annotation reads the recorded JSON.

        Raises:
            StepFailed: `fn` failed on its last allowed try (or was not retried); raised the
                same way on every replay. Uncaught, it fails the run.
            NonDeterminism: Replay found a different call recorded at this position.
        """
        step_name = name or str(getattr(fn, "__qualname__", repr(fn)))
        seq, rec = self._next("step", step_name)
        adapter = _return_adapter(fn)
        if rec is not None and rec.done:
            return self._replay_step(step_name, rec.result, adapter)
        if not gated:
            await self._landed()  # `fn` runs once every earlier write has committed
        failures = int(rec.result.get("failures", 0)) if rec is not None else 0
        policy = retry or NO_RETRY
        budget = TotalTimeout.since(rec.result.get("first_at") if rec else None, total_timeout)
        if self._probe is not None:
            await self._probe_at(step_name, "before")
        try:
            async with asyncio.timeout(budget.clip(seconds(timeout))):
                with instrument.step(self.workflow, step_name):
                    if inspect.iscoroutinefunction(fn):
                        value = await fn(*args, **kwargs)
                    else:
                        value = await asyncio.to_thread(fn, *args, **kwargs)
            encoded = adapter.dump_python(value, mode="json")
        except Exception as exc:  # noqa: BLE001 — user code: its error is the step's failure
            await self._step_failed(seq, step_name, exc, failures + 1, policy, retry_if, budget)
        if self._probe is not None:
            await self._probe_at(step_name, "after")
        # A step that succeeded after failed tries keeps their count (replay reads `value`).
        done = {"value": encoded, "failures": failures} if failures else {"value": encoded}
        self._record(seq, "step", step_name, done)
        if behind or not lazy:
            await self._flush(flush=flush, behind=behind)
        return adapter.validate_python(encoded)

    async def _probe_at(self, step_name: str, edge: probes.Edge) -> None:
        assert self._probe is not None  # noqa: S101 — called only when one is installed
        point = probes.StepPoint(self.execution_id, self.workflow, self._attempt, step_name, edge)
        await self._probe(point)

    async def _step_failed(
        self,
        seq: int,
        step_name: str,
        exc: Exception,
        failures: int,
        policy: RetryPolicy,
        retry_if: Callable[[Exception], bool] | None,
        budget: TotalTimeout,
    ) -> NoReturn:
        """Park for the step's next try, or record its failure and raise StepFailed."""
        error = {"type": type(exc).__name__, "message": str(exc)}
        wake = _utcnow() + timedelta(seconds=policy.delay(failures))
        if policy.allows_another(failures) and (retry_if is None or retry_if(exc)):
            if not budget.passed_by(wake):
                kept = {"failures": failures, "error": error, "first_at": budget.first_at}
                self._record(seq, "step", step_name, kept, done=False)
                raise Park([], wake, status="pending") from exc
            error["message"] += budget.stopped(failures)
        self._record(seq, "step", step_name, {"error": error, "failures": failures})
        self._mark_failure(seq)
        await self._flush()
        raise StepFailed(step_name, error["type"], error["message"]) from exc

    def _replay_step(self, step_name: str, result: Any, adapter: TypeAdapter[Any]) -> Any:
        if "error" in result:
            self._mark_failure(self._seq)
            raise StepFailed(step_name, result["error"]["type"], result["error"]["message"])
        return adapter.validate_python(result["value"])

    def _mark_failure(self, seq: int) -> None:
        if self.first_failure_seq is None:
            self.first_failure_seq = seq

    async def transaction(
        self,
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        name: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `await fn(conn, *args, **kwargs)` in a transaction that also records its result.

        The effect and the record commit together or not at all, so a transaction step
        happens exactly once even if the worker dies at any point. Its writes go to Tether's
        own database, on an asyncpg connection. A connection that breaks under `fn` reads as
        losing the database: the run stops here, and another worker resumes it later.

        Args:
            fn: An `async` function taking the connection first; its result is stored as JSON
                and read back through its return annotation.
            *args: Its further positional arguments.
            name: The step's name in the run's history (default: `fn`'s qualified name).
            **kwargs: Its keyword arguments.

        Returns:
            `fn`'s result, as its return annotation reads the recorded JSON.

        Raises:
            Exception: Whatever `fn` raises, unchanged, after its effect was rolled back.
                Uncaught, it fails the run (or retries it per the workflow's `retry`).
            NonDeterminism: Replay found a different call recorded at this position.
        """
        step_name = name or str(getattr(fn, "__qualname__", repr(fn)))
        seq, rec = self._next("transaction", step_name)
        adapter = _return_adapter(fn)
        if rec is not None and rec.done:
            return self._replay_step(step_name, rec.result, adapter)
        await self._landed()  # `fn` runs once every earlier write has committed
        async with self._io.acquire() as conn, connection_guard(conn), conn.transaction():
            value = await fn(conn, *args, **kwargs)
            encoded = adapter.dump_python(value, mode="json")
            self._record(seq, "transaction", step_name, {"value": encoded})
            result = await self._io.write_in(conn, self.take_buffer())
        self.note_cancel(result.cancel_requested)
        return adapter.validate_python(encoded)

    # --- remote tools ----------------------------------------------------------------------------

    async def call_tool(
        self,
        remote: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | timedelta | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Call a tool of a remote MCP server and wait for its result, durably.

        With a remote that serves MCP Tasks (`protocol="mcp-tasks"`, the default) the call is
        a task on the remote: it is created exactly once (its id is recorded before the first
        poll; a create repeated after a crash carries the same `Idempotency-Key`), polled on
        durable timers while the run is parked (no worker holds it), and survives a restart
        of either side. A question the remote asks becomes a wait of this run (kind
        `remote_input`), answered like any other (`tasks/update`, the answer tool, the CLI,
        the console) and forwarded to the remote once. Cancelling this run cancels the
        remote task. With a plain MCP remote (`protocol="mcp"`) the call waits for the
        result, within `timeout`, like a step. See the remote tasks guide.

        Args:
            remote: The remote's name ([`App.remote`][tether.App.remote] or
                `TETHER_REMOTES`).
            tool: The remote tool's name.
            arguments: The tool's arguments (JSON).
            timeout: Seconds (or a `timedelta`) for the whole call; when it passes, the
                remote task is cancelled and `RemoteTimeout` is raised. Unset: no limit.
            retry: How transport failures (connection errors, HTTP 5xx or 429) are retried
                (default: the remote's, 10 tries over about five minutes).

        Returns:
            The tool's result: its `structuredContent` when it has one, else its text.

        Raises:
            RemoteToolError: The tool reported an error (`isError`).
            RemoteProtocolError: The remote answered with a JSON-RPC error, refused the
                request, or its task failed.
            RemoteTaskLost: The remote no longer knows the task.
            RemoteCancelled: The remote's task was cancelled on its side.
            RemoteTimeout: `timeout` passed.
            RemoteUnavailable: The remote stayed unreachable through the retries.
            UnknownRemote: No remote of that name is configured.
            NonDeterminism: Replay found a different call recorded at this position.
        """
        return await remote_call.call_tool(
            self, remote, tool, arguments, timeout=timeout, retry=retry
        )

    async def ask_agent(
        self,
        remote: str,
        message: str,
        *,
        data: dict[str, Any] | None = None,
        timeout: float | timedelta | None = None,
        retry: RetryPolicy | None = None,
    ) -> dict[str, Any]:
        """Send an A2A agent a message and wait for the task it starts, durably.

        The agent's task is created exactly once where the agent recognises a repeated
        `messageId` (the message's id and context id are derived from this run, its attempt
        and the call's position; an agent that does not is sent the message again after a
        crash, and may start a second task), its id is recorded before the first poll, and it
        is polled on durable timers while the run is parked (no worker holds it). When the
        agent asks for input (`input-required`), the question becomes a wait of this run
        (kind `remote_input`, a form with one text field, `reply`), answered like any other
        and sent to the agent as a reply message once. Cancelling this run cancels the
        agent's task. The remote must be configured with `protocol="a2a"` (the `a2a` extra).
        See the remote tasks guide.

        Args:
            remote: The agent's name ([`App.remote`][tether.App.remote] or
                `TETHER_REMOTES`, with `protocol="a2a"`).
            message: The message's text.
            data: JSON sent beside the text, as a data part.
            timeout: Seconds (or a `timedelta`) for the whole call; when it passes, the
                agent's task is cancelled and `RemoteTimeout` is raised. Unset: no limit.
            retry: How transport failures (connection errors, HTTP 5xx or 429) are retried
                (default: the remote's, 10 tries over about five minutes).

        Returns:
            The agent's reply: `text` (the text parts of the task's artifacts, or of the
            agent's message when there are none, joined by newlines), `data` (their data
            parts' values), `artifacts` and `message` (the task's artifacts and final status
            message, or the message the agent answered with, in A2A's JSON form).

        Raises:
            RemoteProtocolError: The agent refused a request, or its task failed.
            RemoteRejected: The agent rejected the task.
            RemoteTaskLost: The agent no longer knows the task.
            RemoteCancelled: The agent's task was cancelled on its side.
            RemoteTimeout: `timeout` passed.
            RemoteUnavailable: The agent stayed unreachable through the retries.
            UnknownRemote: No A2A agent of that name is configured.
            TypeError: `message` is not text, or `data` is not JSON (nothing is sent).
            ValueError: `message` is blank (nothing is sent).
            NonDeterminism: Replay found a different call recorded at this position.
        """
        reply: dict[str, Any] = await remote_call.ask_agent(
            self, remote, message, data=data, timeout=timeout, retry=retry
        )
        return reply

    # --- deterministic values ----------------------------------------------------------------

    async def now(self) -> datetime:
        """The current time, recorded: a replay returns the same instant.

        Returns:
            The time (UTC) when this call first ran.

        Raises:
            NonDeterminism: Replay found a different call recorded at this position.
        """
        seq, rec = self._next("now", "now")
        if rec is not None and rec.done:
            return datetime.fromisoformat(rec.result)
        value = _utcnow()
        self._record(seq, "now", "now", value.isoformat())
        return value

    async def uuid(self) -> uuid_mod.UUID:
        """A random UUID, recorded: a replay returns the same one.

        Returns:
            A version 4 UUID, the same on every replay.

        Raises:
            NonDeterminism: Replay found a different call recorded at this position.
        """
        seq, rec = self._next("uuid", "uuid")
        if rec is not None and rec.done:
            return uuid_mod.UUID(rec.result)
        value = uuid_mod.uuid4()
        self._record(seq, "uuid", "uuid", str(value))
        return value

    async def set_details(self, text: str | None) -> None:
        """Set the run's details: a progress line every surface shows.

        MCP `tasks/get` shows it as the `statusMessage`, `<wf>_watch` streams it as progress
        notifications, and `tether runs show` prints it. It is written at once and is not a
        position in the history: a replay sets it again, but only the last line set before
        the run goes on past its recorded calls is written (with the run's next write), so
        readers never see the lines of earlier rounds come back while it replays.

        Args:
            text: The line to show, or `None` to clear it.
        """
        self._buf.set_details = True
        self._buf.details = text
        if self._seq < self._replay_to:
            return  # replaying: the next write carries the last line set
        await self._flush()

    # --- timers --------------------------------------------------------------------------------

    async def sleep(self, duration: float | timedelta) -> None:
        """Sleep durably: the run parks, and any worker resumes it when the time has come.

        No process waits meanwhile; the wake-up time is in the run's row, so the sleep
        survives restarts of every process.

        Args:
            duration: How long to sleep: seconds or a `timedelta`.

        Raises:
            NonDeterminism: Replay found a different call recorded at this position.
        """
        seq, rec = self._next("sleep", "sleep")
        if rec is not None and rec.done:
            return
        if rec is None:
            until = _utcnow() + timedelta(seconds=seconds(duration) or 0.0)
            self._record(seq, "sleep", "sleep", {"until": until.isoformat()}, done=False)
        else:
            until = datetime.fromisoformat(rec.result["until"])
        if _utcnow() >= until:
            self._record(seq, "sleep", "sleep", {"until": until.isoformat()})
            return
        raise Park([], until, status="waiting")

    # --- waits ---------------------------------------------------------------------------------

    async def wait_all(
        self, *specs: waits.WaitSpec, timeout: float | timedelta | None = None
    ) -> list[Any]:
        """Open several waits at once; return their answers once all are answered.

        Answers that arrive one by one are kept as they come, and the run stays parked on
        the rest. Each open wait is listed on the run with its key; an answer names the key.
        When anything new happens to the parked run, its waits get new keys.

        Args:
            *specs: The waits: [`Signal`][tether.Signal], [`Approval`][tether.Approval],
                [`HumanTask`][tether.HumanTask], [`AgentStep`][tether.AgentStep] or
                [`Update`][tether.Update], each with a different kind and name.
            timeout: Seconds or a `timedelta` from when the waits opened; unset, they wait
                for ever.

        Returns:
            The answers, in the order of `specs`, each parsed as its spec's single-wait
            call returns it (an [`Approved`][tether.Approved], a model instance, ...).

        Raises:
            ValueError: No spec was given, or two have the same kind and name; or an
                answer recorded earlier no longer fits its model (the code changed).
            WaitTimeout: `timeout` passed before every wait was answered.
            Rejected: An [`Approval`][tether.Approval] among them was rejected.
            NonDeterminism: Replay found a different call recorded at this position.
        """
        seq, rec, label = self._open_waits("wait_all", specs)
        if rec is not None and rec.done:
            return self._wait_result(seq, specs, rec.result)
        state: dict[str, Any]
        if rec is None:
            opened = _utcnow()
            secs = seconds(timeout)
            deadline = (opened + timedelta(seconds=secs)).isoformat() if secs is not None else None
            state = {"opened_at": opened.isoformat(), "deadline": deadline, "answers": {}}
        else:
            state = {**rec.result, "answers": dict(rec.result.get("answers", {}))}
        keep = all(s.keeps_keys for s in specs)  # see WaitSpec.keeps_keys
        n = state.get("n") if keep else None
        self._take_answers(seq, specs, state, n)
        if all(s.channel in state["answers"] for s in specs):
            self._record(seq, "wait", label, state)
            await self._flush()
            return self._wait_result(seq, specs, state)
        deadline_dt = datetime.fromisoformat(state["deadline"]) if state["deadline"] else None
        if deadline_dt is not None and _utcnow() >= deadline_dt:
            self._record(seq, "wait", label, {**state, "timed_out": True})
            channels = [s.channel for s in specs]
            self._buf.events.append({"type": "wait_timed_out", "data": {"waits": channels}})
            await self._flush()
            return self._wait_result(seq, specs, {**state, "timed_out": True})
        n = self.park_event_id() if n is None else n
        if keep:
            state["n"] = n
        self._record(seq, "wait", label, state, done=False)
        unanswered = [s for s in specs if s.channel not in state["answers"]]
        parked = self._with_votes(waits.descriptors(self.execution_id, unanswered, state, n))
        raise Park(parked, deadline_dt, status="waiting")

    async def wait_any(self, *specs: waits.WaitSpec) -> dict[str, Any]:
        """Open several waits at once; return `{channel: answer}` as soon as one or more are
        answered. Any answer wakes the run (`answer_rules.WAKES_RUN`): the others are closed,
        and the workflow may offer them again, under new keys, with its next call."""
        seq, rec, label = self._open_waits("wait_any", specs)
        if rec is not None and rec.done:
            return waits.parse_answers(specs, rec.result["answers"])
        state: dict[str, Any] = {"opened_at": _utcnow().isoformat(), "deadline": None}
        state = {**(rec.result if rec is not None else state), "answers": {}}
        self._take_answers(seq, specs, state, None)
        if state["answers"]:
            self._record(seq, "wait", label, state)
            await self._flush()
            return waits.parse_answers(specs, state["answers"])
        self._record(seq, "wait", label, state, done=False)
        opened = waits.descriptors(self.execution_id, specs, state, self.park_event_id())
        opened = self._with_votes(opened)
        raise Park([{**d, answer_rules.WAKES_RUN: True} for d in opened], None, status="waiting")

    def _open_waits(
        self, call: str, specs: tuple[waits.WaitSpec, ...]
    ) -> tuple[int, StepRecord | None, str]:
        """The position of a call that opens `specs`, its record, and its name."""
        if not specs:
            raise ValueError(f"{call} needs at least one wait")
        channels = [s.channel for s in specs]
        if len(set(channels)) != len(channels):
            raise ValueError(f"two waits with the same kind and name: {channels}")
        label = ",".join(channels)
        seq, rec = self._next("wait", label)
        return seq, rec, label

    def _take_answers(
        self, seq: int, specs: tuple[waits.WaitSpec, ...], state: dict[str, Any], n: int | None
    ) -> None:
        """Move the buffered answers of the waits still unanswered into `state`."""
        for spec in specs:
            if spec.channel in state["answers"]:
                continue
            sig = self._take_signal(spec, n)
            if sig is not None:
                state["answers"][spec.channel] = {"payload": sig.payload, "by": sig.by}
                self._buf.consumed.append({"id": sig.id, "seq": seq})
                # The round's votes go with its decided answer: a later round starts afresh.
                ballots = votes.channel(spec.kind, spec.name)
                for vote in [v for v in self._signals if v.channel == ballots]:
                    self._signals.remove(vote)
                    self._buf.consumed.append({"id": vote.id, "seq": seq})

    def _with_votes(self, descriptors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The descriptors of waits decided by votes with the votes cast so far this round
        (kept on the wait's vote channel until its answer is taken), so a wait parked again
        still shows them."""
        out = []
        for d in descriptors:
            if votes.POLICY in d:
                ballots = votes.channel(d["kind"], d["name"])
                cast = [
                    votes.cast(str(v.by), v.payload["response"], v.payload["at"])
                    for v in self._signals
                    if v.channel == ballots and isinstance(v.payload, dict)
                ]
                d = {**d, votes.VOTES: cast}
            out.append(d)
        return out

    def _take_signal(self, spec: waits.WaitSpec, n: int | None) -> BufferedSignal | None:
        for i, sig in enumerate(self._signals):
            if sig.channel == spec.channel and waits.takes(spec, self.execution_id, n, sig.key):
                return self._signals.pop(i)
        return None

    def _wait_result(self, seq: int, specs: tuple[waits.WaitSpec, ...], state: Any) -> list[Any]:
        if state.get("timed_out"):
            self._mark_failure(seq)
            raise WaitTimeout(f"timed out waiting for {[s.channel for s in specs]}")
        return [
            waits.parse_checked(
                s, state["answers"][s.channel]["payload"], state["answers"][s.channel]["by"]
            )
            for s in specs
        ]

    # --- chains ----------------------------------------------------------------------------------

    def continue_as_new(self, input: Any, *, workflow: str | None = None) -> NoReturn:
        """End this run and start its successor with `input`; this call does not return.

        The run ends `continued_as_new`, and a new run with the same business id starts
        with a fresh history; handles on the first run (an MCP task id, `tether runs show`)
        report the live successor. Use it for a run that would otherwise loop for ever.

        Args:
            input: The successor's input (a model instance or plain JSON), validated as
                its workflow's input: an input it refuses fails this run instead.
            workflow: The successor's workflow (default: this one); one not registered
                fails this run instead.
        """
        raise ContinueAsNew(input, workflow)
