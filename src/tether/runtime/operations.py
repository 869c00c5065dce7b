"""The one operations module every surface calls (MCP tools, tasks methods, execute, CLI, REST).

Each operation validates its input first and raises a typed TetherError that names the problem;
a refused call changes nothing. Storage errors leave as Unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal

import asyncpg
import orjson

from tether.runtime import errors as e
from tether.runtime import waits as w
from tether.runtime.chain import follow
from tether.runtime.ids import is_execution_id, new_execution_id, new_update_id
from tether.runtime.policy import seconds
from tether.runtime.registry import App, WorkflowDef
from tether.storage import repo
from tether.storage.coalesce import RowReader
from tether.storage.errors import (
    DatabaseUnavailable,
    ErrorMapper,
    InvalidData,
    StorageError,
    storage_error,
)
from tether.storage.notify import CHANGE_CHANNEL, UPDATE_CHANNEL, Listener
from tether.storage.rows import (
    ENDED_STATUSES,
    STATUSES,
    ExecutionRow,
    HistoryEvent,
    StepRecord,
    UpdateRow,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
POLL_FALLBACK_S = 0.25


@dataclass(frozen=True)
class Started:
    execution: ExecutionRow
    deduped: bool


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


def _cursor(row: ExecutionRow) -> str:
    return f"{row.created_at.isoformat()}|{row.id}"


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        at, _, rid = cursor.partition("|")
        return datetime.fromisoformat(at), rid
    except ValueError:
        raise e.InvalidInput(f"invalid cursor {cursor!r}") from None


class _Storage(ErrorMapper):
    """Storage failures (also those raised outside a query, e.g. acquiring a connection while
    the server is down) leave as Unavailable, which every surface reports as retryable."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            return
        err = exc if isinstance(exc, StorageError) else storage_error(exc)
        if isinstance(err, DatabaseUnavailable):
            raise e.Unavailable() from err
        if isinstance(err, InvalidData):
            raise e.InvalidInput("the database refused a value (invalid text or number)") from err
        if err is not None:
            raise e.Unavailable(f"database error: {err}") from err


_STORAGE = _Storage()


def _storage() -> _Storage:
    return _STORAGE


class Operations:
    """Start, read, steer and end runs. Safe to share across tasks; holds no run state."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        app: App,
        *,
        listener: Listener | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.pool = pool
        self.app = app
        self.listener = listener
        self.max_payload_bytes = max_payload_bytes
        # A quarter of the pool for concurrent single-row reads; more readers share statements.
        # (Tests may hand in one connection instead of a pool: then one statement at a time.)
        max_size = getattr(pool, "get_max_size", None)
        size = max_size() if callable(max_size) else 1
        self.reader = RowReader(pool, max_statements=max(1, size // 4))

    # --- start -------------------------------------------------------------------------------

    async def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        business_id: str | None = None,
        retention: float | timedelta | None = None,
        on_live_match: Literal["return", "fail"] = "return",
        by: str | None = None,
    ) -> Started:
        """Start a run, committed before this returns.

        With `idempotency_key`, a repeat with the same input returns the run that holds the
        key (`deduped=True`), live or ended, for as long as its row lives; with different input
        it raises IdempotencyMismatch; with on_live_match="fail" a live holder raises
        RunAlreadyActive. Raises WorkflowNotFound, InvalidInput, Unavailable.
        """
        wf = self.app.get(workflow)
        value = wf.dump_input(wf.parse_input(input)) if wf.takes_input else None
        self._check_payload(value, e.InvalidInput)
        if idempotency_key is not None and (
            not (0 < len(idempotency_key) <= 255) or "\x00" in idempotency_key
        ):
            raise e.InvalidInput("idempotency key must be 1-255 characters, without NUL")
        retention_s = seconds(retention)
        new_id = new_execution_id()
        new = repo.NewExecution(
            id=new_id,
            workflow=wf.name,
            business_id=business_id or new_id,
            input=value,
            idempotency_key=idempotency_key,
            retention_s=int(retention_s) if retention_s is not None else wf.retention_s,
            deadline_at=wf.deadline(),
            created_data={"by": by} if by else {},
        )
        with _storage():
            for _ in range(3):
                row = await repo.insert_execution(self.pool, new)
                if row is not None:
                    return Started(row, deduped=False)
                assert idempotency_key is not None  # noqa: S101 — only a key can conflict
                existing = await repo.get_by_idempotency_key(self.pool, wf.name, idempotency_key)
                if existing is None:
                    continue  # deleted between the two statements: try the insert again
                if existing.input != value:
                    raise e.IdempotencyMismatch(
                        f"idempotency key {idempotency_key!r} was used with different input"
                    )
                if on_live_match == "fail" and existing.live:
                    raise e.RunAlreadyActive(execution_id=existing.id)
                return Started(existing, deduped=True)
        raise e.Unavailable("could not create the run; retry")

    # --- read --------------------------------------------------------------------------------

    async def get(self, execution_id: str, *, follow_chain: bool = True) -> RunView:
        """Resolve a handle; follows retry and continue-as-new links to the live run.

        One primary-key read when the run has no successor. Raises ExecutionNotFound.
        """
        if not is_execution_id(execution_id):
            raise e.ExecutionNotFound("no run with that id")  # not even the shape of one
        with _storage():
            row = await self.reader.get(execution_id)
            if row is None:
                raise e.ExecutionNotFound(f"no run {execution_id!r}")
            if not follow_chain or row.successor_id is None:
                return RunView(row, row, (row,))
            chain = await repo.get_chain(self.pool, execution_id)
        current = follow({r.id: r for r in chain}, execution_id)
        return RunView(row, current, tuple(chain))

    async def list_runs(
        self,
        *,
        workflow: str | None = None,
        statuses: Sequence[str] | None = None,
        business_id: str | None = None,
        root_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page:
        """Runs newest first. Raises InvalidInput for a bad cursor, limit or status."""
        if not 1 <= limit <= 1000:
            raise e.InvalidInput("limit must be 1-1000")
        if statuses is not None:
            unknown = set(statuses) - set(STATUSES)
            if unknown:
                raise e.InvalidInput(f"unknown statuses {sorted(unknown)}")
        after = _parse_cursor(cursor) if cursor else None
        with _storage():
            rows = await repo.list_executions(
                self.pool,
                workflow=workflow,
                statuses=statuses,
                business_id=business_id,
                root_id=root_id,
                after=after,
                limit=limit + 1,
            )
        more = len(rows) > limit
        rows = rows[:limit]
        return Page(rows, _cursor(rows[-1]) if more and rows else None)

    async def history(self, execution_id: str) -> list[HistoryEvent]:
        await self.get(execution_id, follow_chain=False)
        with _storage():
            return await repo.get_history(self.pool, execution_id)

    async def steps(self, execution_id: str) -> list[StepRecord]:
        await self.get(execution_id, follow_chain=False)
        with _storage():
            return await repo.get_steps(self.pool, execution_id)

    # --- answer and signal ---------------------------------------------------------------------

    async def answer(
        self, execution_id: str, key: str, response: Any, *, by: str | None = None
    ) -> AnswerResult:
        """Answer the open wait `key` — the one path every surface answers through.

        First answer wins; an identical repeat is a no-op (`duplicate`); a different answer to
        an answered key raises AnswerConflict; a key that is not open raises WaitNotOpen; an
        answer that does not fit raises AnswerRejected. Raises ExecutionNotFound, Unavailable.
        """
        (outcome,) = await self.answer_many(execution_id, [(key, response)], by=by)
        if outcome == "conflict":
            raise e.AnswerConflict(f"wait {key!r} was already answered differently")
        if outcome == "not_open":
            raise e.WaitNotOpen(f"wait {key!r} is not open")
        return AnswerResult(outcome, execution_id, key)

    async def answer_many(
        self, execution_id: str, answers: Sequence[tuple[str, Any]], *, by: str | None = None
    ) -> list[AnswerOutcome]:
        """Answer several open waits of one run at once, atomically: every answer for an open
        key is checked before any is delivered, so an AnswerRejected changes nothing. Returns
        per answer `accepted`, `duplicate` (the same answer was given before), `conflict`
        (answered differently before) or `not_open`. Raises ExecutionNotFound, Unavailable."""
        for _, response in answers:
            self._check_payload(response, e.AnswerRejected)
        async with _storage(), self.pool.acquire() as conn, conn.transaction():
            row = await repo.get_execution(conn, execution_id, lock=True)
            if row is None:
                raise e.ExecutionNotFound(f"no run {execution_id!r}")
            open_waits = {d["key"]: d for d in row.waits if d.get("kind") in w.ANSWERABLE_KINDS}
            outcomes: list[AnswerOutcome] = []
            deliver: list[tuple[str, dict[str, Any], Any]] = []
            for key, response in answers:
                parts = w.parse_key(key)
                if parts is None or parts.execution_id != execution_id:
                    outcomes.append("not_open")
                    continue
                prior = await repo.get_signal_by_key(conn, execution_id, key)
                if prior is not None:
                    outcomes.append("duplicate" if prior.payload == response else "conflict")
                    continue
                wait = open_waits.get(key)
                if wait is None or any(k == key for k, _, _ in deliver):
                    outcomes.append("not_open")
                    continue
                problems = w.validate_answer(wait, response)
                if problems:
                    raise e.AnswerRejected(f"{key}: " + "; ".join(problems), errors=problems)
                deliver.append((key, wait, response))
                outcomes.append("accepted")
            await self._deliver(conn, row, deliver, by)
        return outcomes

    async def _deliver(
        self,
        conn: Any,
        row: ExecutionRow,
        deliver: list[tuple[str, dict[str, Any], Any]],
        by: str | None,
    ) -> None:
        rest = list(row.waits)
        for i, (key, wait, response) in enumerate(deliver):
            channel = f"{wait['kind']}:{wait['name']}"
            await repo.insert_signal(conn, row.id, channel, key, response, by)
            event = {"key": key, "by": by}
            rest = [d for d in rest if d.get("key") != key]
            last = i == len(deliver) - 1
            if not last or any(d.get("kind") in w.ANSWERABLE_KINDS for d in rest):
                # Waits opened together are answered one by one: the others keep their keys.
                await repo.answer_keep_parked(conn, row.id, rest, "answer", event)
            else:
                await repo.append_event(conn, row.id, "answer", event)

    async def signal(
        self,
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
        w.check_name(name)
        self._check_payload(payload, e.AnswerRejected)
        view = await self.get(execution_id)
        run = view.current
        if not run.live:
            raise e.RunEnded(f"run {run.id!r} has ended ({run.status})")
        wait = next(
            (d for d in run.waits if d.get("kind") == "signal" and d.get("name") == name), None
        )
        if wait is not None and idempotency_key is None:
            with contextlib.suppress(e.WaitNotOpen):
                res = await self.answer(run.id, wait["key"], payload, by=by)
                return SignalResult(res.status, run.id, res.key)
        key = f"sig:{idempotency_key}" if idempotency_key is not None else None
        async with _storage(), self.pool.acquire() as conn, conn.transaction():
            locked = await repo.get_execution(conn, run.id, lock=True)
            if locked is None or not locked.live:
                raise e.RunEnded(f"run {run.id!r} has ended")
            if key is not None and await repo.get_signal_by_key(conn, run.id, key) is not None:
                return SignalResult("duplicate", run.id, key)
            await repo.insert_signal(conn, run.id, f"signal:{name}", key, payload, by)
            await repo.append_event(conn, run.id, "signal", {"name": name, "by": by})
        return SignalResult("accepted", run.id, key)

    # --- updates -----------------------------------------------------------------------------

    async def update(
        self,
        execution_id: str,
        name: str,
        input: Any = None,
        *,
        timeout: float = 10.0,
        by: str | None = None,
    ) -> Any:
        """Validate, admit, and wait (bounded) for the update's handler; return its output.

        The input is checked against the update's model and validator before admission, so a
        refused update leaves no trace. Raises UpdateNotFound, InvalidInput, UpdateRejected,
        RunEnded, UpdateFailed, UpdateTimeout (admitted, not finished in time), Unavailable.
        """
        view = await self.get(execution_id)
        run = view.current
        wf = self.app.get(run.workflow)
        definition = wf.update(name)
        parsed = definition.parse_input(input)
        await _run_validator(definition.validator, parsed)
        raw = definition.input_adapter.dump_python(parsed, mode="json")
        self._check_payload(raw, e.InvalidInput)
        update_id = new_update_id()
        done = asyncio.Event()
        unsubscribe = self._subscribe(
            UPDATE_CHANNEL, lambda _c, p: done.set() if p in (update_id, "") else None
        )
        try:
            async with _storage(), self.pool.acquire() as conn, conn.transaction():
                locked = await repo.get_execution(conn, run.id, lock=True)
                if locked is None or not locked.live:
                    raise e.RunEnded(f"run {run.id!r} has ended")
                await repo.insert_update(conn, update_id, run.id, name, raw, by)
                await repo.append_event(
                    conn, run.id, "update_admitted", {"update_id": update_id, "name": name}
                )
            row = await self._await_update(update_id, done, timeout)
        finally:
            unsubscribe()
        if row.status == "failed":
            raise e.UpdateFailed(f"update {name!r} failed: {row.error}", error=row.error)
        return row.output

    async def _await_update(self, update_id: str, done: asyncio.Event, timeout: float) -> UpdateRow:
        try:
            async with asyncio.timeout(timeout):
                while True:
                    with _storage():
                        row = await repo.get_update(self.pool, update_id)
                    if row is not None and row.status != "admitted":
                        return row
                    done.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(done.wait(), self._poll_s())
        except TimeoutError:
            raise e.UpdateTimeout(
                f"update {update_id} was admitted but did not finish in {timeout}s",
                update_id=update_id,
            ) from None

    # --- cancel, terminate, retry, rerun ----------------------------------------------------------

    async def cancel(
        self, execution_id: str, *, reason: str | None = None, by: str | None = None
    ) -> ExecutionRow:
        """Ask the live run of this handle's chain to cancel (cooperative: it ends `cancelled`
        at its next durable call). Idempotent: an ended run is returned unchanged."""
        view = await self.get(execution_id)
        run = view.current
        if not run.live:
            return run
        async with _storage(), self.pool.acquire() as conn, conn.transaction():
            if await repo.request_cancel(conn, run.id):
                await repo.append_event(
                    conn, run.id, "cancel_requested", {"reason": reason, "by": by}
                )
            row = await repo.get_execution(conn, run.id)
        assert row is not None  # noqa: S101 — rows are deleted only after they end
        return row

    async def terminate(
        self, execution_id: str, *, reason: str | None = None, by: str | None = None
    ) -> ExecutionRow:
        """End the live run of this handle's chain now, without running more of it.
        Raises RunEnded when it has already ended."""
        view = await self.get(execution_id)
        run = view.current
        error = {"kind": "terminated", "message": reason or "terminated by an operator", "by": by}
        with _storage():
            if not await repo.terminate(self.pool, run.id, error):
                raise e.RunEnded(f"run {run.id!r} has already ended")
            row = await repo.get_execution(self.pool, run.id)
        assert row is not None  # noqa: S101 — just written
        return row

    async def retry(self, execution_id: str, *, by: str | None = None) -> ExecutionRow:
        """Start a new run with the same input after a run ended without success; it gets a
        new business id and the old run links to it (handles follow). Raises Conflict when the
        run is live, succeeded, or was already retried or continued."""
        with _storage():
            old = await repo.get_execution(self.pool, execution_id)
        if old is None:
            raise e.ExecutionNotFound(f"no run {execution_id!r}")
        if old.live:
            raise e.Conflict(f"run {old.id!r} is still {old.status}")
        if old.status == "completed" or old.successor_id is not None or old.sealed_from:
            raise e.Conflict(
                f"run {old.id!r} ended {old.status}; only a failed, timed-out, "
                "cancelled or terminated run that has no successor can be retried"
            )
        wf = self.app.get(old.workflow)
        new_id = new_execution_id()
        async with _storage(), self.pool.acquire() as conn, conn.transaction():
            row = await repo.insert_execution(
                conn,
                repo.NewExecution(
                    id=new_id,
                    workflow=old.workflow,
                    business_id=new_id,
                    input=old.input,
                    predecessor_id=old.id,
                    root_id=old.root_id,
                    retention_s=old.retention_s,
                    deadline_at=wf.deadline(),
                    created_data={"retry_of": old.id, "by": by},
                ),
            )
            if not await repo.link_successor(conn, old.id, new_id):
                raise e.Conflict(f"run {old.id!r} was retried concurrently")
        assert row is not None  # noqa: S101 — no idempotency key, so no conflict
        return row

    async def rerun(
        self, execution_id: str, *, input: Any = None, by: str | None = None
    ) -> ExecutionRow:
        """Operator rerun of an ended run under the same business id (new input optional).
        The old run is sealed: it keeps the ending it had and handles do not follow it.
        Raises Conflict when the run is live or already sealed or continued."""
        with _storage():
            old = await repo.get_execution(self.pool, execution_id)
        if old is None:
            raise e.ExecutionNotFound(f"no run {execution_id!r}")
        if old.live or old.sealed_from or old.status == "continued_as_new":
            raise e.Conflict(f"run {old.id!r} ({old.status}) cannot be rerun")
        wf = self.app.get(old.workflow)
        value = old.input if input is None else wf.dump_input(wf.parse_input(input))
        new_id = new_execution_id()
        async with _storage(), self.pool.acquire() as conn, conn.transaction():
            if not await repo.seal(conn, old.id):
                raise e.Conflict(f"run {old.id!r} was sealed concurrently")
            row = await repo.insert_execution(
                conn,
                repo.NewExecution(
                    id=new_id,
                    workflow=old.workflow,
                    business_id=old.business_id,
                    input=value,
                    predecessor_id=old.id,
                    root_id=old.root_id,
                    retention_s=old.retention_s,
                    deadline_at=wf.deadline(),
                    created_data={"rerun_of": old.id, "by": by},
                ),
            )
        assert row is not None  # noqa: S101 — no idempotency key, so no conflict
        return row

    # --- waiting for change ---------------------------------------------------------------------

    async def wait_until(
        self,
        execution_id: str,
        predicate: Callable[[ExecutionRow], bool],
        *,
        timeout: float,
    ) -> RunView:
        """Re-read the handle until `predicate(current run)` holds or `timeout` passes; returns
        the last view either way. Woken by change notifications, with polling as fallback."""
        changed = asyncio.Event()
        unsubscribe = self._subscribe(CHANGE_CHANNEL, lambda _c, _p: changed.set())
        try:
            view = await self.get(execution_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    while not predicate(view.current):
                        changed.clear()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(changed.wait(), self._poll_s())
                        view = await self.get(execution_id)
            return view
        finally:
            unsubscribe()

    async def wait_for_end(self, execution_id: str, *, timeout: float) -> RunView:
        """Wait until the chain's live run has ended (or timeout); returns the last view."""
        return await self.wait_until(
            execution_id, lambda r: r.status in ENDED_STATUSES, timeout=timeout
        )

    # --- helpers ----------------------------------------------------------------------------------

    def _subscribe(self, channel: str, callback: Callable[[str, str], None]) -> Callable[[], None]:
        if self.listener is None:
            return lambda: None
        return self.listener.subscribe(channel, callback)

    def _poll_s(self) -> float:
        listening = self.listener is not None and self.listener.ready.is_set()
        return 2.0 if listening else POLL_FALLBACK_S

    def _check_payload(
        self, value: Any, error: type[e.AnswerRejected] | type[e.InvalidInput]
    ) -> None:
        """Refuse a payload over the size cap, or one holding a NUL character (PostgreSQL
        cannot store it in text or jsonb), before anything is stored."""
        raw = orjson.dumps(value)
        if len(raw) > self.max_payload_bytes:
            problem = f"(root): payload larger than {self.max_payload_bytes} bytes"
        elif b"\\u0000" in raw:
            problem = "(root): text may not contain the NUL character (U+0000)"
        else:
            return
        if error is e.AnswerRejected:
            raise e.AnswerRejected(problem, errors=[problem])
        raise e.InvalidInput(problem, [{"loc": [], "msg": problem, "type": "value_error"}])

    def workflow(self, name: str) -> WorkflowDef:
        return self.app.get(name)


async def _run_validator(validator: Callable[[Any], Any] | None, value: Any) -> None:
    if validator is None:
        return
    try:
        verdict = validator(value)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except ValueError as exc:
        raise e.UpdateRejected("update rejected by validator", reason=str(exc)) from exc
    if verdict is False or isinstance(verdict, str):
        reason = verdict if isinstance(verdict, str) else "refused"
        raise e.UpdateRejected("update rejected by validator", reason=reason)
