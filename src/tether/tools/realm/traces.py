"""`append_trace`: notes about an agent step recorded before the step is done, and their
adoption by the `execute_step` that does it (`adopted_own`, `adopted_anonymous`,
`preserved_foreign`).

The entries of one call are one note of the run on channel `realm.trace.<step>`, through
`Operations.note` (the run's own input buffer: durable, in the run's tenant, sealed like any
signal payload; the run is not woken). The protocol never consumes it, so the notes stay
with the run.
Limits: 200 entries / 102400 bytes per writer (`writer_nonce`), 400 / 204800 per step; a call
that would pass one is refused whole with `BUFFER_FULL`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from tether.runtime import errors as rt
from tether.runtime.operations import Operations
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow
from tether.specs.realm import validate_payload
from tether.tools.realm import runs, storable
from tether.tools.realm.envelope import Reply, refusal

WRITER_LIMIT: Final = (200, 102400)
STEP_LIMIT: Final = (400, 204800)
FINAL_LIMIT: Final = (100, 51200)  # what execute_step adopts of them
ANONYMOUS: Final = ""


def channel(step: str) -> str:
    return f"realm.trace.{step}"


@dataclass(frozen=True)
class Batch:
    """One `append_trace` call as buffered: its writer (`""` with no nonce), entries, bytes."""

    writer: str
    entries: int
    size: int


def batches(payloads: Sequence[Any]) -> list[Batch]:
    return [
        Batch(str(p.get("writer") or ANONYMOUS), len(p["entries"]), int(p.get("bytes", 0)))
        for p in payloads
        if isinstance(p, dict) and isinstance(p.get("entries"), list)
    ]


def adoption(payloads: Sequence[Any], nonce: str | None) -> dict[str, int]:
    """`adopted_own` (this writer's), `adopted_anonymous` (no writer), `preserved_foreign`
    (another writer's entries, kept but not attached to the answer)."""
    own = anonymous = foreign = 0
    for b in batches(payloads):
        if b.writer == ANONYMOUS:
            anonymous += b.entries
        elif nonce is not None and b.writer == nonce:
            own += b.entries
        else:
            foreign += b.entries
    return {"adopted_own": own, "adopted_anonymous": anonymous, "preserved_foreign": foreign}


def _usage(found: list[Batch], writer: str) -> tuple[int, int, int, int]:
    mine = [b for b in found if b.writer == writer]
    return (
        sum(b.entries for b in mine),
        sum(b.size for b in mine),
        sum(b.entries for b in found),
        sum(b.size for b in found),
    )


_STATES: Final = {
    "completed": "Step '{step}' is done already.",
    "failed": "Step '{step}' failed already.",
    "skipped": "The run skipped step '{step}'.",
    "in_progress": "An execute_step call is doing step '{step}' right now.",
}


def _not_eligible(step: str, row: ExecutionRow, state: str, kind: str | None = None) -> Reply:
    """Why a step takes no trace entries: `details.step_state` `run_terminal` (with
    `run_phase`), `completed`, `failed`, `skipped` or `in_progress`; a step that is not an agent
    step has `step_type` instead. Only `in_progress` can be resolved."""
    details: dict[str, Any] = {"step_id": step}
    if kind is not None:
        details["step_type"] = kind
        said = f"Only agent steps take trace entries, and step '{step}' is a {kind} step."
    elif state == "run_terminal":
        phase = runs.phase(row)
        details.update(step_state=state, run_phase=phase)
        said = f"Run '{row.id}' has ended ({phase}); no step of it takes trace entries now."
    else:
        details["step_state"] = state
        said = _STATES[state].format(step=step)
    return refusal(
        "append_trace",
        row.id,
        "STATE_STEP_NOT_ELIGIBLE",
        said,
        run_version=row.version,
        action="resolve_precondition" if state == "in_progress" else "report_to_user",
        context_hint=f"Step '{step}' cannot take trace entries now.",
        error_details={**details, "run_version": row.version},
    )


NONCE_GUIDANCE: Final = (
    "A writer_nonce is 1 to 128 characters with no whitespace at either end; a new UUIDv4 for "
    "each attempt at a step serves well."
)


def nonce_problem(nonce: str | None) -> str | None:
    """Why a `writer_nonce` is refused (None: it is fine, or there is none)."""
    if nonce is None:
        return None
    if not nonce:
        why = "it is empty"
    elif nonce != nonce.strip():
        why = "it starts or ends with whitespace"
    elif len(nonce) > 128:
        why = "it is longer than 128 characters"
    else:
        return None
    return f"writer_nonce refused: {why}. {NONCE_GUIDANCE}"


async def append_trace(
    ops: Operations, plan_of: Any, a: dict[str, Any], by: str | None
) -> Reply | dict[str, Any]:
    run_id, step, entries = a["run_id"], a["step_id"], a["entries"]
    nonce = a.get("writer_nonce")
    if (bad := nonce_problem(nonce)) is not None:
        return refusal("append_trace", run_id, "VALIDATION_EMPTY_VALUE", bad)
    try:
        row = (await ops.get(run_id)).current
    except rt.ExecutionNotFound:
        return refusal(
            "append_trace",
            run_id,
            "STATE_RUN_NOT_FOUND",
            f"Run not found: {run_id}",
            context_hint=f"Run '{run_id}' not found.",
        )
    plan: Plan | None = plan_of(row.workflow)
    target = plan.step(step) if plan is not None else None
    if runs.ended(row):  # an ended run is refused before anything else
        return _not_eligible(step, row, "run_terminal")
    if target is None:
        return refusal(
            "append_trace",
            row.id,
            "STEP_NOT_FOUND",
            f"Workflow '{row.workflow}' has no step '{step}'.",
            run_version=row.version,
            context_hint=f"This run's workflow has no step '{step}'.",
            error_details={
                "step_id": step,
                "workflow_id": row.workflow,
                "run_version": row.version,
            },
        )
    if target.kind != "agent":
        return _not_eligible(step, row, "", kind=target.kind)
    if (settled := await _settled(ops, plan, row, step)) is not None:
        return _not_eligible(step, row, settled)
    return await _buffer(ops, row, step, entries, nonce, by)


async def _settled(ops: Operations, plan: Plan | None, row: ExecutionRow, step: str) -> str | None:
    """Whether agent step `step` has settled: `completed`, `failed` or `skipped` (None: not)."""
    records = await ops.steps(row.id)
    if step in runs.completed_steps(plan, records):
        return "completed"
    if step in runs.failed_steps(records):
        return "failed"
    return "skipped" if step in runs.skipped_steps(row, records) else None


async def _buffer(
    ops: Operations,
    row: ExecutionRow,
    step: str,
    entries: list[dict[str, Any]],
    nonce: str | None,
    by: str | None,
) -> Reply | dict[str, Any]:
    kept = [{k: e[k] for k in ("event", "timestamp", "data") if k in e} for e in entries]
    size = len(orjson.dumps(kept))
    found = batches([s.payload for s in await ops.buffered_signals(row.id, channel(step))])
    writer = nonce or ANONYMOUS
    w_n, w_b, s_n, s_b = _usage(found, writer)
    if w_n + len(kept) > WRITER_LIMIT[0] or w_b + size > WRITER_LIMIT[1]:
        return _full(row, step, "writer", WRITER_LIMIT, w_n, w_b)
    if s_n + len(kept) > STEP_LIMIT[0] or s_b + size > STEP_LIMIT[1]:
        return _full(row, step, "step", STEP_LIMIT, s_n, s_b)
    payload = {"writer": writer, "entries": kept, "bytes": size}
    if (bad := ops.unstorable(payload)) is not None:
        what = f"The trace entries for step '{step}'"
        return storable.refused("append_trace", row.id, bad, what, run_version=row.version)
    try:
        if kept:  # no entries: the buffer's counts, nothing written
            await ops.note(row.id, channel(step), payload, by=by)
    except rt.RunEnded:
        return _not_eligible(step, (await ops.get(row.id)).current, "run_terminal")
    out: dict[str, Any] = {
        "status": "ok",
        "buffer_count": w_n + len(kept),
        "buffer_bytes": w_b + size,
        "limit_count": WRITER_LIMIT[0],
        "limit_bytes": WRITER_LIMIT[1],
        "final_limit_entries": FINAL_LIMIT[0],
        "final_limit_bytes": FINAL_LIMIT[1],
        "file_count": s_n + len(kept),
        "file_bytes": s_b + size,
        "file_limit_count": STEP_LIMIT[0],
        "file_limit_bytes": STEP_LIMIT[1],
    }
    if (near := capacity_warning(out)) is not None:
        out["warnings"] = [near]
    return out


def capacity_warning(usage: dict[str, Any]) -> str | None:
    """A warning once this writer's buffer is at 80% of a limit (never a refusal)."""
    by_count = usage["buffer_count"] / usage["limit_count"]
    by_bytes = usage["buffer_bytes"] / usage["limit_bytes"]
    if max(by_count, by_bytes) < 0.8:
        return None
    if by_count >= by_bytes:
        detail = (
            f"{usage['buffer_count']}/{usage['limit_count']} entries ({round(by_count * 100)}%)"
        )
    else:
        detail = f"{usage['buffer_bytes']}/{usage['limit_bytes']} bytes ({round(by_bytes * 100)}%)"
    return (
        f"This step's trace buffer holds {detail} of what it may. Send fewer entries, or finish "
        "the step with execute_step, before appends start failing with BUFFER_FULL."
    )


def _full(
    row: ExecutionRow, step: str, scope: str, limit: tuple[int, int], used_n: int, used_b: int
) -> Reply:
    return refusal(
        "append_trace",
        row.id,
        "BUFFER_FULL",
        f"The {scope} trace buffer is full ({used_n}/{limit[0]} entries, "
        f"{used_b}/{limit[1]} bytes); nothing was recorded.",
        run_version=row.version,
        context_hint=f"No room is left in the trace buffer of step '{step}'.",
        error_details={"scope": scope, **_counts(used_n, used_b, limit)},
    )


def _counts(entries: int, size: int, limit: tuple[int, int]) -> dict[str, int]:
    return {"entries": entries, "bytes": size, "max_entries": limit[0], "max_bytes": limit[1]}


def inline_channel(step: str) -> str:
    """Where the `trace` sent with an execute_step is kept (not adopted: not append_trace's)."""
    return f"realm.trace-inline.{step}"


async def screened(
    ops: Operations, plan: Plan, row: ExecutionRow, step: str, inline: list[dict[str, Any]]
) -> tuple[Reply | None, list[str]]:
    """An execute_step's trace entries (sent with it and buffered for it) against the step's
    `trace_schema`: `enforce` refuses the call (VALIDATION_TRACE_SCHEMA, nothing written),
    `warn` (the default) names the misfit in `warnings`. Then the sent entries are kept."""
    target = plan.step(step)
    schema = target.spec.trace_schema if target is not None else None
    problems: list[dict[str, Any]] = []
    if schema is not None:
        sent = [s.payload for s in await ops.buffered_signals(row.id, channel(step))]
        buffered = [e for p in sent if isinstance(p, dict) for e in p.get("entries") or []]
        for i, entry in enumerate([*inline, *buffered]):
            problems += [{"entry": i, **v.as_ajv()} for v in validate_payload(schema, entry)]
    said = f"The trace of step '{step}' does not fit its trace_schema."
    if problems and target is not None and target.spec.trace_validation_mode == "enforce":
        details = {"errors": problems}
        return refusal(
            step,
            row.id,
            "VALIDATION_TRACE_SCHEMA",
            said,
            run_version=row.version,
            error_details=details,
            run_phase=runs.phase(row),
            stopped_step=step,
        ), []
    if inline:
        kept = [{k: e[k] for k in ("event", "timestamp", "data") if k in e} for e in inline]
        if (bad := ops.unstorable({"entries": kept})) is not None:
            what = f"The trace of step '{step}'"
            return storable.refused(
                step, row.id, bad, what, run_version=row.version, stopped_step=step
            ), []
        with contextlib.suppress(rt.RunEnded):
            await ops.note(row.id, inline_channel(step), {"entries": kept})
    return None, [f"{said} It is kept as sent."] if problems else []
