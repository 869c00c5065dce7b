"""Starting a run: validate the input, insert the row (committed before returning), and
resolve an idempotency key to the run that already holds it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from tether.runtime import errors
from tether.runtime.ids import new_execution_id
from tether.runtime.operations.env import Env
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.policy import seconds
from tether.storage import repo
from tether.storage.rows import ExecutionRow


@dataclass(frozen=True)
class Started:
    execution: ExecutionRow
    deduped: bool


def _check_idempotency_key(key: str | None) -> None:
    if key is not None and (not (0 < len(key) <= 255) or "\x00" in key):
        raise errors.InvalidInput("idempotency key must be 1-255 characters, without NUL")


async def start(
    env: Env,
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
    wf = env.app.get(workflow)
    value = wf.dump_input(wf.parse_input(input)) if wf.takes_input else None
    env.check_payload(value, errors.InvalidInput)
    _check_idempotency_key(idempotency_key)
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
        tenant=env.tenant,  # None for an every-tenant scope: the run has no tenant
    )
    with storage_errors():
        for _ in range(3):
            row = await repo.insert_execution(env.pool, new)
            if row is not None:
                return Started(row, deduped=False)
            assert idempotency_key is not None  # noqa: S101 — only a key can conflict
            existing = await repo.get_by_idempotency_key(
                env.pool, wf.name, idempotency_key, new.tenant
            )
            if existing is None:
                continue  # deleted between the two statements: try the insert again
            if existing.input != value:
                raise errors.IdempotencyMismatch(
                    f"idempotency key {idempotency_key!r} was used with different input"
                )
            if on_live_match == "fail" and existing.live:
                raise errors.RunAlreadyActive(execution_id=existing.id)
            return Started(existing, deduped=True)
    raise errors.Unavailable("could not create the run; retry")
