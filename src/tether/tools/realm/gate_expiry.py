"""`submit_human_response` after the gate's time is up, pure but for the one settle: the call
lets the expiry happen first (the run wakes at its deadline and applies `on_expiry`), and the
answer is never recorded. The reply says so, with `answer_recorded: false`,
`error_details{runId, gateId, winning_choice, resolved_by, expired_at, overdue_ms}` and the
expiry's line in `warnings`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final

from tether.runtime.operations import Operations
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.realm import replies, runs
from tether.tools.realm.envelope import Reply, refusal

#: The tool whose answers these rules judge (gates.py serves it).
COMMAND: Final = "submit_human_response"
Settle = Callable[
    [Operations, ExecutionRow, list[StepRecord]], Awaitable[tuple[ExecutionRow, runs.Chain]]
]
MATCHED_LATE: Final = (
    "The gate's time ran out before your answer came, and its default is the choice you sent: "
    "the default was recorded, not your answer."
)


def not_recorded(key: str, winning: Any, choice: str, *, timed_out: bool) -> str:
    """The refusal of an answer to a gate that was already settled with another choice."""
    if timed_out:
        return (
            f"Your choice '{choice}' was not recorded: gate '{key}' had run out of time and "
            f"took its default, '{winning}'."
        )
    return (
        f"Your choice '{choice}' was not recorded: gate '{key}' had already been answered "
        f"with '{winning}'."
    )


def lag(ms: int) -> str:
    """A duration in its largest units: `12s`, `3m`, `2h 5m`, `1d 3h`."""
    secs = max(0, ms) // 1000
    if secs < 60:
        return f"{secs}s"
    mins, hours = secs // 60, secs // 3600
    if mins < 60:
        return f"{mins}m"
    return f"{hours}h {mins % 60}m" if hours < 24 else f"{hours // 24}d {hours % 24}h"


async def late_answer(
    settle: Settle,
    plan: Plan | None,
    ops: Operations,
    row: ExecutionRow,
    gate: dict[str, Any],
    a: dict[str, Any],
    w: list[str],
    claim: dict[str, Any],
    claim_said: str | None = None,
) -> Reply:
    """The expiry is applied before anything else, and the late answer is dropped. `claim_said`
    is the claim proof's warning, if any."""
    expired_at, step, key = gate["deadline"], gate["name"], gate["key"]
    overdue = int((datetime.now(UTC) - datetime.fromisoformat(expired_at)).total_seconds() * 1000)
    now, chain = await settle(ops, row, await ops.steps(row.id))
    details: dict[str, Any] = {"runId": row.id, "gateId": key, "resolved_by": "timeout"}
    timing = {"expired_at": expired_at, "overdue_ms": overdue}
    if gate.get("on_expiry") == "abort":
        said = (
            f"The time of gate '{key}' on step '{step}' ran out and its on_expiry ended the run "
            "(aborted); your choice was not recorded."
        )
        return refusal(
            step,
            now.id,
            "STATE_RUN_TERMINAL",
            said,
            run_version=now.version,
            answer_recorded=False,
            run_phase=runs.phase(now),
            error_details={**details, "winning_choice": None, **timing},
        )
    winning = gate.get("default_choice")
    warns = [
        *w,
        f"The time of gate '{key}' on step '{step}' ran out {lag(overdue)} before this call, so "
        "this call first applied its on_expiry (settle_default) and recorded the default "
        f"choice '{winning}' (enacted_via: submit_human_response).",
    ]
    details = {**details, "winning_choice": winning, **timing}
    if a["choice"] != winning:
        said = not_recorded(key, winning, a["choice"], timed_out=True)
        return _other_choice(plan, now, chain, step, said, details, warns)
    reply = replies.progress(
        step, plan, now, chain, tool=COMMAND, lead=MATCHED_LATE, done=MATCHED_LATE, warnings=warns
    )
    return answered(reply, chain, claim, claim_said, answer_recorded=False, error_details=details)


def _other_choice(
    plan: Plan | None,
    now: ExecutionRow,
    chain: runs.Chain,
    step: str,
    said: str,
    details: dict[str, Any],
    warns: list[str],
) -> Reply:
    """The expiry settled another choice: refused, then what the expiry's write did."""
    reply = replies.progress(step, plan, now, chain, tool=COMMAND, lead=said, done=said)
    refused = refusal(
        step,
        now.id,
        "STATE_BLOCKED",
        said,
        run_version=now.version,
        action="report_to_user",
        context_hint=reply.context_hint,
        next_actions=reply.next_actions,
        answer_recorded=False,
        error_details=details,
        run_phase=runs.phase(now),
        guards=chain.guards or None,
        ended_by=chain.ended_by,
    )
    return with_fields(refused, warnings=warns)


def answered(
    reply: Reply,
    chain: runs.Chain,
    claim: dict[str, Any],
    claim_said: str | None,
    **fields: Any,
) -> Reply:
    """The reply to an answer the gate took (recorded, or matching its expiry's default):
    `reply` with the claim's warning after its own, `gate_claim`, the chain's guards, and
    `fields`."""
    return with_fields(
        reply,
        warnings=[*reply.warnings, claim_said] if claim_said is not None else list(reply.warnings),
        **fields,
        gate_claim=claim,
        chained_auto_steps=None,
        guards=chain.guards or None,
    )


def with_fields(reply: Reply, *, warnings: list[str], **fields: Any) -> Reply:
    """`reply` with other `warnings` and more fields."""
    return Reply(
        reply.command,
        reply.run_id,
        reply.status,
        reply.context_hint,
        reply.run_version,
        next_actions=reply.next_actions,
        warnings=warnings,
        errors=reply.errors,
        data=reply.data,
        evidence=reply.evidence,
        extra={**reply.extra, **fields},
    )
