"""get_run_state's fields that apply only sometimes, pure: from the run's row, its plan and its
step records.

- `step_claims`: each step in progress on an open run (a gated step: the question is open),
  with `holder` (Tether records no driver's name: `{by: null, absent_cause}`) and `since`;
- `engine_runnable`: each `auto` step the run owes that cannot run here, with `refused_by`
  (`capability`, with `basis: registry`, or `input_schema`) and `refusal`;
  `capability_blocks`: each step that needs a handler this server lacks;
- `run_health`: the findings on an open run (`capability_block`,
  `gate_expired_awaiting_drive`, `definition_unresolvable`, `never_claimed_idle`), and a
  warning that counts them;
- `skip_details`: for every skipped step, why (`when_false`, `trigger_rule`, `gate_expired`)
  and the fact that settled it;
- `abort_context`: the aborting guard, each of its conditions beside the value it saw, and
  the guard's message;
- `cleanup_pending{steps, command}`: on an ended run, the finalizers left pending because their
  handler was not registered, and the command that runs them (`runs.cleanup_command`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from tether.runtime.realm.attempts import CAPABILITY
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.realm import replies, runs

IDLE_MS: Final = 86_400_000
#: Who drives a run, as Realm's replies and health findings say it: Tether records no driver.
NO_DRIVER: Final = {"by": None, "absent_cause": "driver_not_recorded"}


def fields(
    row: ExecutionRow,
    plan: Plan | None,
    records: Sequence[StepRecord],
    waiting: list[str],
    skipped: list[str],
    expired: str | None = None,
) -> dict[str, Any]:
    """`expired`: the step whose gate's expiry aborted the run (runs.expired_gate)."""
    out: dict[str, Any] = {}
    if details := skip_details(plan, records, skipped, expired):
        out["skip_details"] = details
    if context := abort_context(row, plan, records):
        out["abort_context"] = context
    if runs.ended(row):
        # once the run went on as another (a resume ran them), nothing is pending here
        if row.successor_id is None and (pending := runs.left_pending(records)):
            out["cleanup_pending"] = {
                "steps": pending,
                "command": runs.cleanup_command(row.id, pending),
            }
        return out
    if waiting:
        since = (runs.open_gate(row) or {}).get("opened_at")
        out["step_claims"] = [
            {"step": s, "holder": dict(NO_DRIVER), "since": since} for s in waiting
        ]
    refused = engine_runnable(row, plan)
    if refused:
        out["engine_runnable"] = refused
    blocks = [_block(e, plan) for e in refused if e["refused_by"] == "capability"]
    if blocks:
        out["capability_blocks"] = blocks
    findings = run_health(row, plan, blocks, waiting)
    if findings:
        out["run_health"] = findings
        out["warnings"] = [f"{len(findings)} run_health finding(s) on this run; see 'run_health'."]
    return out


def engine_runnable(row: ExecutionRow, plan: Plan | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for w in runs.capability_waits(row):
        step = str(w["name"]).removeprefix(CAPABILITY)
        prompt = str(w.get("prompt"))
        if prompt.startswith("here (capability): "):
            refusal = prompt.removeprefix("here (capability): ")
            out.append(_refused(step, "capability", refusal) | {"basis": "registry"})
        elif prompt.startswith("(input_schema): "):
            out.append(_refused(step, "input_schema", prompt.removeprefix("(input_schema): ")))
    return out


def _refused(step: str, by: str, refusal: str) -> dict[str, Any]:
    return {"step": step, "runnable_here": False, "refused_by": by, "refusal": refusal}


def _block(entry: dict[str, Any], plan: Plan | None) -> dict[str, Any]:
    step = plan.step(entry["step"]) if plan is not None else None
    handler = step.handler if step is not None else None
    return {
        "step": entry["step"],
        "requirement": {"kind": "handler", "name": handler},
        "code": "ENGINE_HANDLER_NOT_REGISTERED",
    }


def run_health(
    row: ExecutionRow, plan: Plan | None, blocks: list[dict[str, Any]], waiting: list[str]
) -> list[dict[str, Any]]:
    """The findings about an open run."""
    now = datetime.now(UTC)
    found: list[dict[str, Any]] = [
        {
            "kind": "capability_block",
            "step": b["step"],
            "reason": b["code"],
            "evidence": {"requirement": b["requirement"], "code": b["code"]},
        }
        for b in blocks
    ]
    gate = runs.open_gate(row)
    due = replies.expires_at(gate) if gate is not None else None
    if gate is not None and due and now >= _when(due):
        found.append(_expired(gate, due, now))
    if plan is None:
        found.append(
            {
                "kind": "definition_unresolvable",
                "reason": f"This server has no workflow '{row.workflow}', so the run cannot go "
                f"on here; abandon_run {row.id} ends it.",
                "evidence": {"workflow_id": row.workflow, "code": "STATE_WORKFLOW_NOT_FOUND"},
            }
        )
    idle = int((now - row.updated_at).total_seconds() * 1000)
    if runs.phase(row) == "running" and not waiting and not found and idle >= IDLE_MS:
        found.append(
            {
                "kind": "never_claimed_idle",
                "reason": "no step in progress and nothing has happened on the run for a day",
                "since": _utc(row.updated_at),
                "idle_ms": idle,
                "evidence": {
                    "idle_threshold_ms": IDLE_MS,
                    "eligible_steps": [w["name"] for w in runs.open_agent_steps(row)],
                },
            }
        )
    return found


def _expired(gate: dict[str, Any], due: str, now: datetime) -> dict[str, Any]:
    """An open gate whose time is up: its `on_expiry` is owed, or (none declared) it is only
    reported, and the answer is still awaited (`finding_only`)."""
    disposition = gate.get("on_expiry")
    reason = (
        f"the gate's time is up; its {disposition} has not been applied yet"
        if disposition
        else "the gate's time is up; it declares no on_expiry, so it still waits for an answer"
    )
    return {
        "kind": "gate_expired_awaiting_drive",
        "step": gate.get("name"),
        "reason": reason,
        "evidence": {
            "gate_id": gate.get("key"),
            "expires_at": due,
            "overdue_ms": int((now - _when(due)).total_seconds() * 1000),
            "disposition": disposition or "finding_only",
        },
    }


def skip_details(
    plan: Plan | None, records: Sequence[StepRecord], skipped: list[str], expired: str | None
) -> dict[str, Any]:
    whens = {r.name: r for r in records if r.done}
    out: dict[str, Any] = {}
    for step in skipped:
        rec = whens.get(f"realm:when:{step}")
        decided = (
            rec.result.get("value") if rec is not None and isinstance(rec.result, dict) else None
        )
        spec = plan.step(step) if plan is not None else None
        if isinstance(decided, dict):
            conds = [c.text for c in spec.when] if spec is not None else []
            expression = conds[0] if len(conds) == 1 else conds
            out[step] = {
                "kind": "when_false",
                "expression": expression,
                "leaves": decided["leaves"],
            }
        elif decided is False:
            out[step] = {"kind": "when_false"}
        elif spec is not None:
            out[step] = {"kind": "trigger_rule", "trigger_rule": spec.spec.trigger_rule}
    if expired is not None:
        out[expired] = {"kind": "gate_expired"}
    return out


def abort_context(
    row: ExecutionRow, plan: Plan | None, records: Sequence[StepRecord]
) -> dict[str, Any] | None:
    """The guard that aborted the run (its recorded verdict)."""
    if runs.phase(row) != "aborted":
        return None
    for rec in records:
        if not (rec.done and rec.name.startswith(runs.GUARD_PREFIX)):
            continue
        verdict = rec.result.get("value") if isinstance(rec.result, dict) else None
        if isinstance(verdict, dict) and verdict.get("outcome") == "abort":
            step = rec.name.removeprefix(runs.GUARD_PREFIX)
            out: dict[str, Any] = {"step_id": step, "conditions": verdict.get("conditions", [])}
            if verdict.get("reason") is not None:
                out["abort_message"] = verdict["reason"]
            return out
    return None


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _utc(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")
