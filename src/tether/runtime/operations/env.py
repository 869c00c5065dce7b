"""What every operation runs with: the pool, the App, the listener, the row reader, the payload
cap, the admission configuration and the tenant scope, plus the helpers they share (change
subscriptions, poll interval, payload check, tenant visibility)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from tether.principal import tenant_problem
from tether.runtime import errors
from tether.runtime.admission import NO_ADMISSION, Admission
from tether.runtime.registry import App
from tether.storage.coalesce import RowReader
from tether.storage.driver import Database, Notifications
from tether.storage.rows import ExecutionRow, Lease

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
POLL_FALLBACK_S = 0.25


def check_tenant(tenant: str | None) -> None:
    """Raises InvalidInput unless `tenant` is None or a tenant name (`tether.principal`)."""
    if tenant is not None and (problem := tenant_problem(tenant)) is not None:
        raise errors.InvalidInput(problem)


class Taker(Protocol):
    """A worker of this process that takes a run its start inserts already claimed (the
    start's hand-over: operations/starting.py): `reserve` holds one of its free slots and
    says the lease to insert under (None: no free slot, or it claims only through its loop),
    then exactly one of `adopt` (the inserted row, as stored) or `unreserve` frees it."""

    def reserve(self) -> Lease | None: ...

    def adopt(self, row: ExecutionRow) -> None: ...

    def unreserve(self) -> None: ...


@dataclass(frozen=True)
class Env:
    """Shared by every operation; holds no run state."""

    pool: Database
    app: App
    listener: Notifications | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    reader: RowReader = field(init=False)
    admission: Admission = NO_ADMISSION  # queues and profiles (runtime/admission.py)
    # Each approver role's members (TETHER_APPROVER_ROLES): who may vote on an approval
    # whose approvers are a role (runtime/votes.py).
    approver_roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The tenant scope. every_tenant: every run is visible (an unbound admin, the CLI, workers)
    # and new runs have no tenant. Otherwise only runs of `tenant` are visible (None: the runs
    # with no tenant) and new runs belong to it. See `narrowed`.
    tenant: str | None = field(default=None, init=False)
    every_tenant: bool = field(default=True, init=False)
    # This process's workers (the runtime adds them), to which a start hands its run over.
    takers: list[Taker] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        # A quarter of the pool for concurrent single-row reads; more readers share statements.
        # (Tests may hand in one connection instead of a pool: then one statement at a time.)
        max_size = getattr(self.pool, "get_max_size", None)
        size = max_size() if callable(max_size) else 1
        object.__setattr__(self, "reader", RowReader(self.pool, max_statements=max(1, size // 4)))

    def narrowed(self, tenant: str | None) -> Env:
        """This env for a caller bound to `tenant` (None: the runs with no tenant). It shares
        the pool, listener and row reader. Raises InvalidInput for a malformed tenant name."""
        check_tenant(tenant)
        env = copy.copy(self)
        object.__setattr__(env, "tenant", tenant)
        object.__setattr__(env, "every_tenant", False)
        return env

    def sees(self, row: ExecutionRow) -> bool:
        """Whether this scope may see `row`. A run it may not see is reported exactly as a run
        that does not exist (no existence oracle)."""
        return self.every_tenant or row.tenant == self.tenant

    def subscribe(self, channel: str, callback: Callable[[str, str], None]) -> Callable[[], None]:
        """Call `callback` on each notification on `channel`; returns the unsubscribe."""
        if self.listener is None:
            return lambda: None
        return self.listener.subscribe(channel, callback)

    def echo(self, notes: list[tuple[str, str]]) -> None:
        """Hand wake-ups this process is about to send to its own subscribers first."""
        if self.listener is not None:
            self.listener.echo(notes)

    def poll_s(self) -> float:
        """How long to wait for a notification before re-reading anyway."""
        listening = self.listener is not None and self.listener.ready.is_set()
        return 2.0 if listening else POLL_FALLBACK_S

    def check_payload(
        self, value: Any, error: type[errors.AnswerRejected] | type[errors.InvalidInput]
    ) -> None:
        """Refuse a payload over the size cap, or one holding a NUL character (PostgreSQL
        cannot store it in text or jsonb), before anything is stored."""
        refused = unstorable(value, self.max_payload_bytes)
        if refused is None:
            return
        if error is errors.AnswerRejected:
            raise refused
        problem = str(refused)
        raise errors.InvalidInput(problem, [{"loc": [], "msg": problem, "type": "value_error"}])


def unstorable(value: Any, limit_bytes: int) -> errors.AnswerUnstorable | None:
    """Why `value` cannot be stored, whatever it is for (pure): its JSON is over
    `limit_bytes`, or a string in it holds the NUL character (PostgreSQL cannot store it in
    text or jsonb); None when it can be stored."""
    raw = orjson.dumps(value)
    if len(raw) > limit_bytes:
        problem = f"(root): payload larger than {limit_bytes} bytes"
        return errors.AnswerUnstorable(problem, limit_bytes=limit_bytes, size_bytes=len(raw))
    nul = nul_at(value) if b"\\u0000" in raw else None
    if nul is not None:
        problem = f"{nul or '(root)'}: text may not contain the NUL character (U+0000)"
        return errors.AnswerUnstorable(problem, nul_at=nul)
    return None


def nul_at(value: Any, at: str = "") -> str | None:
    """Where `value` holds the NUL character: a JSON pointer to the string or the key that
    does (`""` for the value itself), else None. Only called on a value orjson encoded, so its
    depth is bounded."""
    if isinstance(value, str):
        return at if "\x00" in value else None
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        path = f"{at}/{str(key).replace('~', '~0').replace('/', '~1')}"
        if "\x00" in str(key):
            return path
        if (found := nul_at(item, path)) is not None:
            return found
    return None
