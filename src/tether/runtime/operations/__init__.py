"""The one operations API every surface calls (MCP tools, tasks methods, execute, CLI, REST).

`Operations` is a thin facade; each concept lives in its own module:

| module | operations |
|---|---|
| `starting` | start (idempotency keys; queue, singleton, profile, labels) |
| `batching` | start_many (many starts in one statement, an outcome per item) |
| `queries` | get (chain following), list_runs (cursor pages), history, steps, starters |
| `answering` | answer, answer_wait (by key or name), answer_many, signal |
| `updates` | update (validate, admit, wait for the handler) |
| `lifecycle` | cancel, terminate |
| `again` | again: a new run after an ended one (each surface's retry, resume, rerun) |
| `waiting` | wait_until, wait_for_end |
| `env` | what they share: pool, App, listener, row reader, payload cap |
| `storage_errors` | the storage → runtime error map they all run under |

Each operation validates its input first and raises a typed TetherError that names the problem;
a refused call changes nothing. Storage errors leave as Unavailable.

Tenants: `Operations(...)` sees every tenant's runs and starts runs with no tenant (workers, the
CLI, an admin bound to no tenant). `ops.scoped(tenant)` is the same API for a caller bound to a
tenant: it sees only that tenant's runs (None: only the runs with no tenant), a run outside reads
exactly as a missing one (ExecutionNotFound), and the runs it starts belong to the tenant.
`ops.for_principal(principal)` picks between the two for a caller (`tether.principal`): every
surface asks it, so a caller reaches the same runs over MCP, in the console and in the CLI.
"""

from __future__ import annotations

import copy
from collections.abc import Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from tether.principal import Principal
from tether.runtime import errors
from tether.runtime.admission import NO_ADMISSION, Admission
from tether.runtime.operations import (
    again,
    answering,
    batching,
    lifecycle,
    queries,
    starting,
    updates,
    waiting,
)
from tether.runtime.operations import env as env_module
from tether.runtime.operations.again import BusinessId, Plan
from tether.runtime.operations.answering import AnswerOutcome, AnswerResult, SignalResult
from tether.runtime.operations.batching import StartOutcome, StartRequest
from tether.runtime.operations.env import DEFAULT_MAX_PAYLOAD_BYTES, POLL_FALLBACK_S, Env
from tether.runtime.operations.queries import Page, RunView
from tether.runtime.operations.starting import Singleton, Started
from tether.runtime.registry import App, WorkflowDef
from tether.storage.coalesce import RowReader
from tether.storage.driver import Database, Notifications
from tether.storage.rows import BufferedSignal, ExecutionRow, HistoryEvent, StepRecord

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "POLL_FALLBACK_S",
    "AnswerOutcome",
    "AnswerResult",
    "BusinessId",
    "Operations",
    "Page",
    "Plan",
    "RunView",
    "SignalResult",
    "Singleton",
    "StartOutcome",
    "StartRequest",
    "Started",
]


class Operations:
    """Start, read, steer and end runs. Safe to share across tasks; holds no run state.

    Each method is documented (with what it raises) on the module function it calls.
    """

    def __init__(
        self,
        pool: Database,
        app: App,
        *,
        listener: Notifications | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        admission: Admission = NO_ADMISSION,
        approver_roles: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.env = Env(
            pool,
            app,
            listener,
            max_payload_bytes,
            admission=admission,
            approver_roles=dict(approver_roles or {}),
        )
        self._scopes: dict[str | None, Operations] = {}

    @property
    def tenant(self) -> str | None:
        """The tenant these operations are bound to (None: no tenant, or every tenant)."""
        return self.env.tenant

    @property
    def every_tenant(self) -> bool:
        """Whether these operations see every tenant's runs (not `scoped`)."""
        return self.env.every_tenant

    def scoped(self, tenant: str | None) -> Operations:
        """These operations for a caller bound to `tenant` (None: the runs with no tenant):
        they see and steer only its runs, and the runs they start belong to it. Built once per
        tenant and kept, so a request pays a dict lookup, not an allocation. Scoped operations
        only narrow: asking one for another tenant raises.

        Raises:
            InvalidInput: a malformed tenant name, or a tenant other than this scope's own.
        """
        if not self.env.every_tenant:
            if tenant == self.env.tenant:
                return self
            raise errors.InvalidInput("tenant-scoped operations cannot reach another tenant")
        found = self._scopes.get(tenant)
        if found is None:
            found = copy.copy(self)
            found.env = self.env.narrowed(tenant)
            found._scopes = {}
            self._scopes[tenant] = found
        return found

    def for_principal(self, principal: Principal | None) -> Operations:
        """These operations as `principal` may use them: themselves for a principal that sees
        every tenant (an admin bound to no tenant), else `scoped(principal.tenant)`. A request
        without a principal (no security layer) gets the narrowest scope, the runs with no
        tenant. On the tasks/get path this costs two attribute reads and one dict lookup.

        Raises:
            InvalidInput: as `scoped`.
        """
        if principal is None:
            return self.scoped(None)
        if principal.every_tenant:
            return self
        return self.scoped(principal.tenant)

    @property
    def pool(self) -> Database:
        return self.env.pool

    @property
    def app(self) -> App:
        return self.env.app

    @property
    def listener(self) -> Notifications | None:
        return self.env.listener

    @property
    def max_payload_bytes(self) -> int:
        return self.env.max_payload_bytes

    def unstorable(self, value: Any) -> errors.AnswerUnstorable | None:
        """Why `value` cannot be stored (over the payload cap, or text with NUL), or None."""
        return env_module.unstorable(value, self.env.max_payload_bytes)

    @property
    def reader(self) -> RowReader:
        return self.env.reader

    def workflow(self, name: str) -> WorkflowDef:
        return self.app.get(name)

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
        queue: str | None = None,
        singleton: Singleton | None = None,
        profile: str | None = None,
        labels: Sequence[str] | Mapping[str, str] | None = None,
    ) -> Started:
        """Start a run, committed before this returns (see `starting.start`)."""
        return await starting.start(
            self.env,
            workflow,
            input,
            idempotency_key=idempotency_key,
            business_id=business_id,
            retention=retention,
            on_live_match=on_live_match,
            by=by,
            queue=queue,
            singleton=singleton,
            profile=profile,
            labels=labels,
        )

    async def start_many(
        self, requests: Sequence[StartRequest], *, by: str | None = None
    ) -> list[StartOutcome]:
        """Start many runs in one statement: one outcome per request, in order, each a
        `Started` or the TetherError that refused that item (see `batching.start_many`)."""
        return await batching.start_many(self.env, requests, by=by)

    def get(self, execution_id: str, *, follow_chain: bool = True) -> Coroutine[Any, Any, RunView]:
        """Resolve a handle to the live run of its chain (see `queries.get`); awaited as an
        `async def` would be. It hands back `queries.get`'s coroutine rather than awaiting
        it: one coroutine frame fewer on every tasks/get."""
        return queries.get(self.env, execution_id, follow_chain=follow_chain)

    async def list_runs(
        self,
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
        """Runs newest first, a page at a time (see `queries.list_runs`)."""
        return await queries.list_runs(
            self.env,
            workflow=workflow,
            statuses=statuses,
            business_id=business_id,
            root_id=root_id,
            cursor=cursor,
            limit=limit,
            labels=labels,
            started_by=started_by,
            text=text,
        )

    async def history(self, execution_id: str) -> list[HistoryEvent]:
        return await queries.history(self.env, execution_id)

    async def steps(self, execution_id: str) -> list[StepRecord]:
        return await queries.steps(self.env, execution_id)

    async def history_page(
        self, execution_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[HistoryEvent]:
        """A bounded page of the run's events, newest first (see `queries.history_page`)."""
        return await queries.history_page(self.env, execution_id, before=before, limit=limit)

    async def steps_page(
        self, execution_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[StepRecord]:
        """A bounded page of the run's recorded calls, newest first (`queries.steps_page`)."""
        return await queries.steps_page(self.env, execution_id, before=before, limit=limit)

    async def starters(self, rows: Sequence[ExecutionRow]) -> dict[str, str | None]:
        """Who started each run, by id (see `queries.starters`)."""
        return await queries.starters(self.env, rows)

    async def buffered_signals(self, execution_id: str, name: str) -> list[BufferedSignal]:
        """Signals named `name` the run holds unconsumed (see `queries.buffered_signals`)."""
        return await queries.buffered_signals(self.env, execution_id, name)

    async def pending_answers(self, execution_id: str, channel: str) -> list[BufferedSignal]:
        """Answers delivered to wait channel `channel` (`kind:name`, e.g. `approval:gate`)
        that the run has not consumed yet (see `queries.pending_answers`)."""
        return await queries.pending_answers(self.env, execution_id, channel)

    async def answer(
        self,
        execution_id: str,
        key: str,
        response: Any,
        *,
        by: str | None = None,
        once: str | None = None,
    ) -> AnswerResult:
        """Answer the open wait `key` (see `answering.answer`; `once`: a single-use link's
        nonce)."""
        return await answering.answer(self.env, execution_id, key, response, by=by, once=once)

    async def link_used(self, nonce: str) -> bool:
        """Whether the single-use link with this nonce has acted (see `answering`)."""
        return await answering.link_used(self.env, nonce)

    async def answer_wait(
        self, handle: str, wait: str, response: Any, *, by: str | None = None
    ) -> AnswerResult:
        """Answer a wait by key or name on the run this handle resolves to (see
        `answering.answer_wait`)."""
        return await answering.answer_wait(self.env, handle, wait, response, by=by)

    async def answer_many(
        self, execution_id: str, answers: Sequence[tuple[str, Any]], *, by: str | None = None
    ) -> list[AnswerOutcome]:
        """Answer several open waits of one run atomically (see `answering.answer_many`)."""
        return await answering.answer_many(self.env, execution_id, answers, by=by)

    async def signal(
        self,
        execution_id: str,
        name: str,
        payload: Any = None,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
    ) -> SignalResult:
        """Send signal `name` to the live run of this handle's chain (see `answering.signal`)."""
        return await answering.signal(
            self.env, execution_id, name, payload, idempotency_key=idempotency_key, by=by
        )

    async def answer_unchecked(
        self, execution_id: str, key: str, response: Any, *, by: str | None = None
    ) -> bool:
        """Deliver a surface's own answer to an open wait, unchecked (`answering`)."""
        return await answering.answer_unchecked(self.env, execution_id, key, response, by=by)

    async def note(
        self,
        execution_id: str,
        name: str,
        payload: Any,
        *,
        by: str | None = None,
        counted: bool = False,
    ) -> None:
        """Buffer a note for the live run without waking it (see `answering.note`)."""
        await answering.note(self.env, execution_id, name, payload, by=by, counted=counted)

    async def update(
        self,
        execution_id: str,
        name: str,
        input: Any = None,
        *,
        timeout: float = 10.0,
        by: str | None = None,
    ) -> Any:
        """Validate, admit, and wait for an update; its output (see `updates.update`)."""
        return await updates.update(self.env, execution_id, name, input, timeout=timeout, by=by)

    async def cancel(
        self, execution_id: str, *, reason: str | None = None, by: str | None = None
    ) -> ExecutionRow:
        """Ask the live run to cancel; idempotent (see `lifecycle.cancel`)."""
        return await lifecycle.cancel(self.env, execution_id, reason=reason, by=by)

    async def terminate(
        self, execution_id: str, *, reason: str | None = None, by: str | None = None
    ) -> ExecutionRow:
        """End the live run now (see `lifecycle.terminate`)."""
        return await lifecycle.terminate(self.env, execution_id, reason=reason, by=by)

    async def again(
        self,
        execution_id: str,
        *,
        from_step: str | None = None,
        plan: Plan | None = None,
        business_id: BusinessId = "new",
        input: Any = None,
        by: str | None = None,
    ) -> ExecutionRow:
        """A new run after an ended one: from the start, from a step or by a plan, under a
        new business id or the same one, with the same input or a new one (see
        `again.again`)."""
        return await again.again(
            self.env,
            execution_id,
            from_step=from_step,
            plan=plan,
            business_id=business_id,
            input=input,
            by=by,
        )

    async def wait_until(
        self,
        execution_id: str,
        predicate: waiting.Predicate,
        *,
        timeout: float,
    ) -> RunView:
        """Re-read the handle until `predicate` (sync or async) holds or `timeout` passes
        (see `waiting`)."""
        return await waiting.wait_until(self.env, execution_id, predicate, timeout=timeout)

    async def wait_for_end(self, execution_id: str, *, timeout: float) -> RunView:
        """Wait until the chain's live run has ended, or timeout; the last view."""
        return await waiting.wait_for_end(self.env, execution_id, timeout=timeout)
