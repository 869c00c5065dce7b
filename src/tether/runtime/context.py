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
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from pydantic import TypeAdapter

from tether.observability import instrument
from tether.runtime import waits
from tether.runtime.errors import NonDeterminism, StepFailed, WaitTimeout
from tether.runtime.policy import NO_RETRY, RetryPolicy, TotalTimeout, seconds
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
    return datetime.now(UTC)


class Context(TypedWaits):
    """Durable calls for one run. Created by the executor for every (re-)execution."""

    def __init__(self, row: ExecutionRow, state: RunState, io: RunIO) -> None:
        self.execution_id = row.id
        self.workflow = row.workflow
        self.business_id = row.business_id
        self.run_attempt = row.run_attempt
        self._records: dict[int, StepRecord] = {r.seq: r for r in state.steps}
        self._signals: list[BufferedSignal] = list(state.signals)
        self._io = io
        self._seq = 0
        self._buf = Checkpoint()
        self._cancel_requested = row.cancel_requested
        self.first_failure_seq: int | None = None

    # --- plumbing ----------------------------------------------------------------------------

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def note_cancel(self, requested: bool) -> None:
        self._cancel_requested = self._cancel_requested or requested

    def _next(self, kind: str, name: str) -> tuple[int, StepRecord | None]:
        self._seq += 1
        rec = self._records.get(self._seq)
        if rec is not None and (rec.kind != kind or rec.name != name):
            raise NonDeterminism(
                f"replay of {self.execution_id} found {kind} {name!r} at position {self._seq}, "
                f"but history recorded {rec.kind} {rec.name!r}: workflow code changed or is "
                "not deterministic"
            )
        # The live edge (nothing recorded here yet) is where a requested cancel takes effect.
        if (rec is None or not rec.done) and self._cancel_requested:
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

    def landing(self) -> Callable[[], Awaitable[None]]:
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
        """Run `fn(*args, **kwargs)` once and checkpoint its result; replay returns the record.
        `lazy`: written with the run's next write (a cheap read: lost in a crash, it reruns).
        `flush=False`: its commit does not wait for the disk (`Checkpoint.flush`). `behind`:
        its write is started, not waited for (`RunIO.write_behind`): the next durable call or
        user code waits first. `gated`: `fn` waits itself (`landing`) before its side effects.
        Sync functions run in a thread. A failure is retried per `retry` (durable backoff: the
        run parks until the next try) when `retry_if(error)` holds, within `total_timeout`
        (policy.TotalTimeout); after the last try it raises StepFailed, the same way on every
        replay. The result round-trips through JSON (typed by `fn`'s return annotation)."""
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
        self._record(seq, "step", step_name, {"value": encoded})
        if behind or not lazy:
            await self._flush(flush=flush, behind=behind)
        return adapter.validate_python(encoded)

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
        """Run `await fn(conn, *args)` in a database transaction that also records its result.

        The effect and the checkpoint commit together or not at all, so a transaction step
        happens exactly once even if the worker dies at any point. An error `fn` raises rolls
        the effect back and reaches the workflow unchanged (uncaught, it fails the run, or
        retries it per the workflow's policy); only a connection that broke under `fn` reads
        as losing the database (the lease then expires and another worker resumes the run).
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

    # --- deterministic values ----------------------------------------------------------------

    async def now(self) -> datetime:
        """The current time, recorded: replay returns the same instant."""
        seq, rec = self._next("now", "now")
        if rec is not None and rec.done:
            return datetime.fromisoformat(rec.result)
        value = _utcnow()
        self._record(seq, "now", "now", value.isoformat())
        return value

    async def uuid(self) -> uuid_mod.UUID:
        """A random UUID, recorded: replay returns the same one."""
        seq, rec = self._next("uuid", "uuid")
        if rec is not None and rec.done:
            return uuid_mod.UUID(rec.result)
        value = uuid_mod.uuid4()
        self._record(seq, "uuid", "uuid", str(value))
        return value

    async def set_details(self, text: str | None) -> None:
        """Publish a progress breadcrumb (status messages, watch streams). Not replayed."""
        self._buf.set_details = True
        self._buf.details = text
        await self._flush()

    # --- timers --------------------------------------------------------------------------------

    async def sleep(self, duration: float | timedelta) -> None:
        """Sleep durably: the run parks and any worker wakes it when the time has come."""
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
        """Open several waits at once; return their answers in order once all are answered.

        Answers that arrive one by one are kept as they come; the run stays parked on the
        rest. With `timeout`, WaitTimeout is raised when it passes first. Parked again, the
        waits get new keys, unless they keep theirs (`WaitSpec.keeps_keys`).
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
        parked = waits.descriptors(self.execution_id, unanswered, state, n)
        raise Park(parked, deadline_dt, status="waiting")

    async def wait_any(self, *specs: waits.WaitSpec) -> dict[str, Any]:
        """Open several waits at once; return `{channel: answer}` as soon as one or more are
        answered. Any answer wakes the run (`waits.WAKES_RUN`): the others are closed, and
        the workflow may offer them again, under new keys, with its next call."""
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
        raise Park([{**d, waits.WAKES_RUN: True} for d in opened], None, status="waiting")

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
        """End this run and start a successor (same business id) with `input`."""
        raise ContinueAsNew(input, workflow)
