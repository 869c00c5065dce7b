"""`submit_human_response`: a person's choice at a protocol gate, and the late-answer rules.

The gate is the run's open approval wait; `gate_id` is its key. An answer in time goes
through the one runtime `answer` path (`decision` = the choice). A late answer is never
recorded: when the gate's deadline has passed, the call first lets the expiry happen (the
run wakes at its deadline and carries out `on_expiry`), then replies with
`answer_recorded: false` and `error_details{winning_choice, resolved_by, expired_at,
overdue_ms}`. A gate already resolved is read from the run's wait record.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from tether.runtime import answers, waits
from tether.runtime import errors as rt
from tether.runtime.operations import Operations
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.realm import envelope, gate_expiry, replies, runs
from tether.tools.realm.envelope import Reply, refusal
from tether.tools.realm.gate_expiry import COMMAND, MATCHED_LATE, Settle, answered

WRONG_GATE: Final = "submit_gate"  # the reply's command for an answer that names no open gate


def _now() -> datetime:
    return datetime.now(UTC)


def _actor_problem(name: str | None) -> str | None:
    """Why `responded_by` is refused: empty, over 200 characters, or holding a control
    character (None: fine, or not given)."""
    if name is None:
        return None
    if not name:
        why = "empty"
    elif len(name) > 200:
        why = "over 200 characters long"
    elif any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in name):
        why = "holding a control character"
    else:
        return None
    return (
        f"responded_by is {why}, so nothing was recorded. Send a name of up to 200 characters "
        "without control characters, or no responded_by at all."
    )


def due(gate: dict[str, Any]) -> bool:
    """The gate's deadline has passed and it names an `on_expiry`, which the engine now owes."""
    deadline = gate.get("deadline")
    return bool(deadline and gate.get("on_expiry") and _now() >= datetime.fromisoformat(deadline))


def _claim(gate: dict[str, Any], token: str | None, *, spent: str | None = None) -> dict[str, Any]:
    """`gate_claim{proof, cause?, opened_by}`."""
    if spent is not None:
        return {"proof": "spent", "cause": spent, "opened_by": None}
    if token is None:
        return {"proof": "absent", "opened_by": None}
    ok = token != "" and token == replies.claim_token(gate)
    return {"proof": "matched" if ok else "mismatch", "opened_by": None}


#: The warnings a claim proof adds to an `ok` answer. The part before our own guidance is the
#: fixed wording clients match.
NO_CLAIM: Final = (
    "No claim_token was passed; the answer was recorded. Only the reply that opened the gate "
    "carries a token to send back."
)
OTHER_CLAIM: Final = "The claim_token passed is not this question's; the answer was recorded."
SPENT: Final = {
    "answered": "The claim_token could not be checked: this question was already settled by an "
    "earlier answer.",
    "expired": "The claim_token could not be checked: this question was already settled by its "
    "expiry.",
}


def claim_warning(claim: dict[str, Any], token: str | None) -> str | None:
    """The warning `claim` adds to an answer's reply (None for a matched token, and for a
    settled gate when no token was passed)."""
    proof = claim["proof"]
    if proof == "absent":
        return NO_CLAIM
    if proof == "mismatch":
        return OTHER_CLAIM
    if proof == "spent" and token is not None:
        return SPENT[claim["cause"]]
    return None


def resolution(records: list[StepRecord], step: str) -> dict[str, Any] | None:
    """How the gate of `step` was resolved, from its wait record (None: not yet)."""
    channel = f"approval:{step}"
    rec = next((r for r in records if r.kind == "wait" and r.name == channel and r.done), None)
    if rec is None or not isinstance(rec.result, dict):
        return None
    if rec.result.get("timed_out"):
        return {"resolved_by": "timeout", "deadline": rec.result.get("deadline")}
    answer = rec.result.get("answers", {}).get(channel, {})
    payload = answer.get("payload") or {}
    return {"resolved_by": "human", "choice": payload.get("decision"), "by": answer.get("by")}


async def submit_human_response(
    settle: Settle,
    plan_of: Callable[[str], Plan | None],
    ops: Operations,
    a: dict[str, Any],
    w: list[str],
    by: str | None,
) -> Reply:
    run_id, gate_id = a["run_id"], a["gate_id"]
    try:
        row = (await ops.get(run_id)).current
    except rt.ExecutionNotFound:
        return refusal(COMMAND, run_id, "STATE_RUN_NOT_FOUND", f"Run not found: {run_id}")
    problem = _actor_problem(a.get("responded_by"))
    if problem is not None:
        return refusal(
            COMMAND, row.id, "VALIDATION_ACTOR_INVALID", problem, run_version=row.version
        )
    plan = plan_of(row.workflow)
    if not runs.settled(row):  # the worker is carrying something out (an expiry, a step)
        row = (await ops.wait_until(row.id, runs.settled, timeout=runs.SETTLE_S)).current
    gate = runs.open_gate(row)
    if gate is not None and gate["key"] == gate_id:
        return await _answer_open(settle, plan, ops, row, gate, a, w, by)
    parts = waits.parse_key(gate_id)
    step = parts.name if parts is not None and parts.execution_id == row.id else None
    records = await ops.steps(row.id) if step is not None or runs.ended(row) else []
    resolved = resolution(records, step) if step is not None else None
    if step is None or resolved is None:
        return _wrong_gate(row, gate, records, gate_id)
    return _already(plan, row, step, resolved, a, w, records)


async def _answer_open(
    settle: Settle,
    plan: Plan | None,
    ops: Operations,
    row: ExecutionRow,
    gate: dict[str, Any],
    a: dict[str, Any],
    w: list[str],
    by: str | None,
) -> Reply:
    choice, choices = a["choice"], list(gate.get("choices") or [])
    deadline = gate.get("deadline")
    if deadline and _now() >= datetime.fromisoformat(deadline):
        claim = _claim(gate, a.get("claim_token"), spent="expired")
        said = claim_warning(claim, a.get("claim_token"))
        return await gate_expiry.late_answer(settle, plan, ops, row, gate, a, w, claim, said)
    if choice not in choices:
        return refusal(
            gate["name"],
            row.id,
            "VALIDATION_INPUT_SCHEMA",
            f"'{choice}' is not a choice of this gate; its choices are: {', '.join(choices)}",
            run_version=row.version,
            next_actions=[envelope.gate_action(row.id, gate["key"], gate["name"], choices)],
        )
    before = await ops.steps(row.id)
    try:
        response = answers.read(answers.Form(choice), gate)
        await ops.answer(row.id, gate["key"], response, by=a.get("responded_by") or by)
    except (rt.WaitNotOpen, rt.AnswerConflict):
        now = (await ops.get(row.id)).current
        return _wrong_gate(now, runs.open_gate(now), await ops.steps(now.id), gate["key"])
    now, chain = await settle(ops, row, before)
    done = f"Gate '{gate['name']}' was answered: '{choice}'."
    reply = replies.progress(gate["name"], plan, now, chain, tool=COMMAND, done=done, warnings=w)
    claim = _claim(gate, a.get("claim_token"))
    return answered(reply, chain, claim, claim_warning(claim, a.get("claim_token")))


def _already(
    plan: Plan | None,
    row: ExecutionRow,
    step: str,
    resolved: dict[str, Any],
    a: dict[str, Any],
    w: list[str],
    records: list[StepRecord],
) -> Reply:
    choice, key = a["choice"], a["gate_id"]
    winning = resolved.get("choice")
    if resolved["resolved_by"] == "timeout":
        gstep = plan.step(step) if plan is not None else None
        gate = gstep.gate if gstep is not None else None
        if gate is None or gate.on_expiry == "abort":  # the question recorded no choice
            return _terminal(row, records)
        winning = gate.default_choice
    details: dict[str, Any] = {"winning_choice": winning}
    timed_out = resolved["resolved_by"] == "timeout"
    if timed_out:
        details.update(resolved_by="timeout")
    if choice != winning:
        # An expiry an earlier call carried out: the answer was not recorded, and says so
        # (Realm's table of late answers); a person's own answer sent again does not.
        unrecorded: dict[str, Any] = (
            {"answer_recorded": False, "run_phase": runs.phase(row)} if timed_out else {}
        )
        return refusal(
            step,
            row.id,
            "STATE_BLOCKED",
            gate_expiry.not_recorded(key, winning, choice, timed_out=timed_out),
            run_version=row.version,
            action="report_to_user",
            next_actions=replies.open_entries(row, plan),
            error_details=details,
            **unrecorded,
        )
    hint = (
        MATCHED_LATE
        if timed_out
        else (f"Gate '{key}' was already resolved with choice '{winning}' — no action was taken.")
    )
    claim = _claim({}, None, spent="expired" if timed_out else "answered")
    extra: dict[str, Any] = {"run_phase": runs.phase(row), "gate_claim": claim}
    if timed_out:
        extra.update(answer_recorded=False, error_details=details)
    said = claim_warning(claim, a.get("claim_token"))
    return Reply(
        step,
        row.id,
        "ok",
        hint,
        row.version,
        warnings=[*w, said] if said is not None else w,
        next_actions=replies.open_entries(row, plan),
        extra=extra,
    )


def _terminal(row: ExecutionRow, records: list[StepRecord]) -> Reply:
    """An answer to an ended run that recorded no choice for it: the ending and its way out."""
    return refusal(
        WRONG_GATE,
        row.id,
        "STATE_RUN_TERMINAL",
        f"Run '{row.id}' has ended ({runs.phase(row)}), so no gate of it can be answered now; "
        f"{_way_out(row, records)}",
        run_version=row.version,
        action="report_to_user",
    )


def _way_out(row: ExecutionRow, records: list[StepRecord]) -> str:
    p, left = runs.phase(row), runs.left_pending(records)
    cleanup = runs.cleanup_sentence(row.id, left)
    if p == "completed":
        return (
            f"it completed; {cleanup[0].lower()}{cleanup[1:]}"
            if left
            else "it completed and owes nothing."
        )
    if p == "aborted":
        way = "a run that was aborted is not resumed."
    elif way := runs.way_back(row, None):
        way = f"{way[0].lower()}{way[1:]}"
        way = way if way.endswith(".") else f"{way}."
    elif failed := runs.failed_steps(records):
        names = ", ".join(f"'{s}'" for s in failed)
        way = f"none of the failed steps ({names}) is one 'tether runs resume' can start again."
    else:
        way = "no step failed, so there is nothing for 'tether runs resume' to start again."
    return replies.join(way, cleanup)


def _wrong_gate(
    row: ExecutionRow, gate: dict[str, Any] | None, records: list[StepRecord], gate_id: str
) -> Reply:
    """An answer naming some other gate than the open one: point at the open gate, answered as
    `next_actions` says — or, past its deadline with `on_expiry`, at `advance_run`, which
    applies it."""
    if runs.ended(row):
        return _terminal(row, records)
    said = f"'{gate_id}' is neither this run's open gate nor one it has answered."
    tail, actions = "This run has no open gate.", []
    if gate is not None and due(gate):
        tail = (
            f"The gate of step '{gate['name']}' (gate '{gate['key']}') can no longer be "
            f"answered: its time is up, and advance_run applies its {gate.get('on_expiry')}."
        )
        actions = [envelope.advance_action(row.id, [], expiry=gate)]
    elif gate is not None:
        tail = (
            f"The open gate is the one of step '{gate['name']}' (gate '{gate['key']}'); answer "
            "it as next_actions shows."
        )
        choices = list(gate.get("choices") or [])
        actions = [envelope.gate_action(row.id, gate["key"], gate["name"], choices)]
    return refusal(
        WRONG_GATE,
        row.id,
        "STATE_BLOCKED",
        said,
        run_version=row.version,
        context_hint=f"{said} {tail}",
        next_actions=actions,
        action="resolve_precondition" if actions else "report_to_user",
    )
