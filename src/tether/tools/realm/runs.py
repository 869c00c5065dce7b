"""A protocol run as the protocol tools describe it, pure: its phase, its open agent step, the
auto steps and guards a call ran (from the run's step records), and the ways back into an
ended run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from tether.runtime.realm import failures
from tether.runtime.realm.attempts import CAPABILITY
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.runtime.statuses import ENDED_STATUSES
from tether.specs.realm import Progress, upstream_verdict

AUTO_PREFIX: Final = "realm:auto:"
GUARD_PREFIX: Final = "realm:guard:"
FINAL_PREFIX: Final = failures.FINAL_PREFIX
RESUME: Final = "tether runs resume {run} --from {step}"
#: How long a call waits for the run to stop at its next wait or end (the worker runs what
#: the call made ready).
SETTLE_S: Final = 30.0


def phase(row: ExecutionRow) -> str:
    """`running | gate_waiting | completed | failed | abandoned | aborted`."""
    if row.status == "completed":
        return "completed"
    if row.status in ("cancelled", "terminated") and not exhausted(row):
        return "abandoned"
    if row.status in ENDED_STATUSES:
        err = row.error if isinstance(row.error, dict) else {}
        return "aborted" if err.get("type") in ("GuardAborted", "GateExpired") else "failed"
    if any(w.get("kind") == "approval" for w in row.waits):
        return "gate_waiting"
    return "running"


def exhausted(row: ExecutionRow) -> bool:
    """The run was ended by an agent step's budget of refused answers (exhaustion.py)."""
    err = row.error if isinstance(row.error, dict) else {}
    return str(err.get("message", "")).startswith("VALIDATION_EXHAUSTED: ")


def ended(row: ExecutionRow) -> bool:
    return row.status in ENDED_STATUSES


def settled(row: ExecutionRow) -> bool:
    """The run stopped at a wait or ended: nothing more happens without an answer."""
    return row.status == "waiting" or ended(row)


def open_step(row: ExecutionRow, step: str) -> dict[str, Any] | None:
    """The open `agent_step` wait of `step`, if any."""
    return next(
        (w for w in row.waits if w.get("kind") == "agent_step" and w.get("name") == step), None
    )


def open_gate(row: ExecutionRow) -> dict[str, Any] | None:
    """The open gate (an approval wait with choices), if any."""
    return next((w for w in row.waits if w.get("kind") == "approval"), None)


def capability_waits(row: ExecutionRow) -> list[dict[str, Any]]:
    """The auto steps parked because this server lacks their handler (interpreter._capable):
    each a signal wait `realm.capability.<step>` whose prompt says why."""
    return [
        w
        for w in row.waits
        if w.get("kind") == "signal" and str(w.get("name", "")).startswith(CAPABILITY)
    ]


def parked(row: ExecutionRow, step: str) -> bool:
    """Whether auto step `step` waits for a handler this server lacks."""
    return any(w.get("name") == f"{CAPABILITY}{step}" for w in capability_waits(row))


def gate_message_problem(row: ExecutionRow) -> tuple[str, str, str] | None:
    """A gate whose message could not be rendered: (step, code, detail), else None."""
    for w in capability_waits(row):
        prompt = str(w.get("prompt"))
        if prompt.startswith("(gate message): "):
            code, _, detail = prompt.removeprefix("(gate message): ").partition(": ")
            return str(w["name"]).removeprefix(CAPABILITY), code, detail
    return None


CAPABILITY_WAY_OUT: Final = " — register the handler here, or let a server that has it run the step"
WAY_OUT: Final = (
    "The run cannot go on with its workflow as it is: once the workflow is fixed and registered "
    "anew, call advance_run; otherwise abandon_run ends it."
)
FOR_THE_AGENT: Final = "Steps for the agent"


def cannot_run_here(step: str, handler: str | None) -> str:
    """An auto step this server lacks the handler of: `'<s>' cannot run here (capability): …`."""
    return f"'{step}' cannot run here (capability): this server has no handler '{handler}'" + (
        f"{CAPABILITY_WAY_OUT}."
    )


def owed_sentence(owed: Sequence[str]) -> str:
    """The engine's owed steps (quoted names) and the call that runs them; with more than one,
    where that call stops."""
    tail = "; a single call keeps going until a step waits for an answer or fails, or the run ends"
    return (
        f"The engine has {', '.join(owed)} to run — call advance_run"
        f"{tail if len(owed) > 1 else ''}."
    )


def cannot_run(row: ExecutionRow) -> list[str]:
    """A clause for each step that cannot run: `'<s>' cannot run here (capability): <why>` and
    the way out of that, or `'<s>' cannot run (<check>): <why>`; then, when nothing else can go
    on and a step is refused for a reason another server would not fix, the way out."""
    said, refused = [], False
    for w in capability_waits(row):
        prompt = str(w.get("prompt"))
        capability = prompt.startswith("here (capability)")
        refused = refused or prompt.startswith("(input_schema)")
        way = CAPABILITY_WAY_OUT if capability else ""
        said.append(f"'{str(w['name']).removeprefix(CAPABILITY)}' cannot run {prompt}{way}.")
    if refused and not open_agent_steps(row) and open_gate(row) is None:
        said.append(WAY_OUT)
    return said


def open_agent_steps(row: ExecutionRow) -> list[dict[str, Any]]:
    return [w for w in row.waits if w.get("kind") == "agent_step"]


@dataclass(frozen=True)
class Chain:
    """What a call's write ran: `chained_auto_steps`, `guards`, and the guard that ended it."""

    chained: list[dict[str, Any]]
    guards: list[dict[str, Any]]
    ended_by: dict[str, Any] | None
    cleanup: tuple[str, ...] = ()  # the run's cleanup steps left pending (left_pending)


AGENT_CHANNEL: Final = "agent_step:"
GATE_CHANNEL: Final = "approval:"


def agent_answers(r: StepRecord) -> list[tuple[str, dict[str, Any]]]:
    """The agent steps a wait record holds answers of, each with its answer (`payload`, `by`):
    agent steps ready together are offered by one wait, and it records each answer that came
    before the run went on."""
    if r.kind != "wait" or not r.done or not isinstance(r.result, dict):
        return []
    got = r.result.get("answers")
    return [
        (channel.removeprefix(AGENT_CHANNEL), answer)
        for channel, answer in (got.items() if isinstance(got, dict) else ())
        if channel.startswith(AGENT_CHANNEL) and isinstance(answer, dict)
    ]


def upto(records: Sequence[StepRecord], step: str) -> list[StepRecord]:
    """The records up to the answer of agent step `step` (what ran before that answer)."""
    last = max((r.seq for r in records if any(s == step for s, _ in agent_answers(r))), default=-1)
    return [r for r in records if r.seq <= last]


def chain(before: Sequence[StepRecord], after: Sequence[StepRecord], final_phase: str) -> Chain:
    """The auto steps and guards recorded after `before` (each with the run's phase after
    it: `running` until the last, which has the run's phase now)."""
    seen = {r.seq for r in before if r.done}
    ran = [
        r
        for r in after
        if r.done and r.seq not in seen and r.name.startswith((AUTO_PREFIX, GUARD_PREFIX))
    ]
    chained: list[dict[str, Any]] = []
    guards: list[dict[str, Any]] = []
    ended_by: dict[str, Any] | None = None
    for i, rec in enumerate(ran):
        is_guard = rec.name.startswith(GUARD_PREFIX)
        step = rec.name.removeprefix(GUARD_PREFIX if is_guard else AUTO_PREFIX)
        if not is_guard and isinstance(rec.result, dict) and "error" in rec.result:
            continue  # a failed auto step is the one the call stopped at, not a chained one
        last = i == len(ran) - 1
        chained.append({"step": step, "run_phase": final_phase if last else "running"})
        if is_guard:
            verdict = rec.result.get("value", {}) if isinstance(rec.result, dict) else {}
            outcome = verdict.get("outcome", "pass")
            guards.append({"step": step, "outcome": outcome})
            if outcome != "pass":
                arm = "guard_abort" if outcome == "abort" else "guard_resolution_error"
                ended_by = {"arm": arm, "step": step}
                if verdict.get("reason"):
                    ended_by["reason"] = verdict["reason"]
            elif last and final_phase == "completed":  # its pass was the run's last step
                ended_by = {"arm": "guard_pass_complete", "step": step}
    return Chain(chained, guards, ended_by, tuple(left_pending(after)))


def failed_step(after: Sequence[StepRecord]) -> tuple[str, str] | None:
    """The auto step whose failure ended the run: (step, error message)."""
    for rec in reversed(after):
        if rec.name.startswith(AUTO_PREFIX) and isinstance(rec.result, dict):
            error = rec.result.get("error")
            if rec.done and isinstance(error, dict):
                return rec.name.removeprefix(AUTO_PREFIX), str(error.get("message", ""))
    return None


_EXHAUSTED: Final = re.compile(r"VALIDATION_EXHAUSTED: Step '(.+?)' ")
_STEP_FAILED: Final = re.compile(r"step '(?:realm:(?:auto|guard|when):)?(.+?)' failed: (.*)", re.S)


def failure(row: ExecutionRow) -> tuple[str | None, str]:
    """The protocol step whose failure ended the run (None if no step did), and the error in
    the protocol's words (`Step '<step>' failed: <error>`)."""
    err = row.error if isinstance(row.error, dict) else {}
    message = str(err.get("message", "the run failed"))
    found = _STEP_FAILED.fullmatch(message) if err.get("type") == "StepFailed" else None
    if found is None:
        spent = _EXHAUSTED.match(message) if exhausted(row) else None
        return (spent.group(1) if spent else err.get("step")), message
    return found.group(1), f"Step '{found.group(1)}' failed: {found.group(2)}"


def resumable(row: ExecutionRow) -> dict[str, Any]:
    """get_run_state's `resumable{steps, command}`: a run an engine failure ended (failed, at a
    step `tether runs resume` takes); empty otherwise."""
    step = failure(row)[0]
    if phase(row) != "failed" or step is None or exhausted(row) or row.successor_id:
        return {}  # a run that went on as another is not resumed again
    return {"resumable": {"steps": [step], "command": RESUME.format(run=row.id, step=step)}}


def way_back(row: ExecutionRow, step: str | None) -> str:
    """The sentence an ended run's reply ends with: how to run its work again."""
    p = phase(row)
    step = step or failure(row)[0]
    if p == "abandoned":
        err = row.error if isinstance(row.error, dict) else {}
        reason = err.get("message") or ""
        return (
            f'An operator ended this run, with the reason "{reason}"; to run the work again, '
            "start a new run."
        )
    if p == "failed" and step is not None and not exhausted(row):
        return "To make the failed step runnable again: " + RESUME.format(run=row.id, step=step)
    return ""


def left_pending(records: Sequence[StepRecord]) -> list[str]:
    """The cleanup steps (finalizers) the run's ending left pending: their handler was not
    registered in the process that ended it (interpreter.left_pending), in file order."""
    return [
        r.name.removeprefix(FINAL_PREFIX)
        for r in records
        if r.done and failures.is_left_pending(r.name, r.result)
    ]


def cleanup_command(run_id: str, steps: Sequence[str]) -> str:
    """The command that runs them: a resume from the first, which keeps every other recorded
    call (`Operations.again` from that step), so only the pending cleanup steps run, with the
    server's code."""
    return RESUME.format(run=run_id, step=steps[0])


def cleanup_sentence(run_id: str, steps: Sequence[str]) -> str:
    """The sentence a reply on an ended run ends with when its ending left cleanup steps
    pending; empty when none is."""
    if not steps:
        return ""
    one = len(steps) == 1
    names = ", ".join(f"'{s}'" for s in steps)
    them = "it with code that has its handler" if one else "them with code that has their handlers"
    return (
        f"Cleanup {'step' if one else 'steps'} left pending: {names} — "
        f"'{cleanup_command(run_id, steps)}' runs {them}."
    )


def _failed_record(r: StepRecord) -> bool:
    """An auto step whose last try failed, or a guard that did not pass."""
    if not isinstance(r.result, dict):
        return False
    verdict = r.result.get("value")
    if r.name.startswith(GUARD_PREFIX) and isinstance(verdict, dict):
        return bool(verdict.get("outcome", "pass") != "pass")
    return isinstance(r.result.get("error"), dict)


def completed_steps(plan: Plan | None, records: Sequence[StepRecord]) -> list[str]:
    done = {
        r.name.removeprefix(AUTO_PREFIX).removeprefix(GUARD_PREFIX)
        for r in records
        if r.done and r.name.startswith((AUTO_PREFIX, GUARD_PREFIX)) and not _failed_record(r)
    }
    done |= {s for r in records for s, answer in agent_answers(r) if not spent(answer)}
    order = [s.id for s in plan.steps] if plan is not None else sorted(done)
    return [s for s in order if s in done]


def failed_steps(records: Sequence[StepRecord]) -> list[str]:
    """The auto steps whose last try failed, and the agent steps that spent their budget of
    refused answers (in record order)."""
    out: list[str] = []
    for r in records:
        if r.done and r.name.startswith(AUTO_PREFIX) and _failed_record(r):
            out.append(r.name.removeprefix(AUTO_PREFIX))
        out += [s for s, answer in agent_answers(r) if spent(answer)]
    return out


def spent(answer: dict[str, Any]) -> bool:
    """An agent step's answer that is the exhaustion marker (runtime/realm/failures.py)."""
    return failures.exhausted_marker(answer.get("payload"), answer.get("by")) is not None


def expired_gate(row: ExecutionRow, records: Sequence[StepRecord]) -> str | None:
    """The step whose gate's expiry aborted the run (`on_expiry: abort`), else None: its
    gate's wait record is the one that timed out."""
    err = row.error if isinstance(row.error, dict) else {}
    if err.get("type") != "GateExpired":
        return None
    timed_out = [
        r
        for r in records
        if r.done and r.kind == "wait" and r.name.startswith(GATE_CHANNEL)
        and isinstance(r.result, dict) and r.result.get("timed_out")
    ]  # fmt: skip
    return timed_out[-1].name.removeprefix(GATE_CHANNEL) if timed_out else None


def unreachable(
    plan: Plan | None, completed: Sequence[str], failed: Sequence[str], skipped: Sequence[str]
) -> list[str]:
    """The steps that skipped steps leave with no way to run (their trigger rule can no
    longer hold), cascading, in the plan's order."""
    out: list[str] = []
    gone = set(skipped)
    moved = plan is not None
    while moved:
        moved = False
        progress = Progress(frozenset(completed), frozenset(failed), frozenset(gone))
        for s in plan.steps if plan is not None else ():
            if s.id in progress.settled:
                continue
            if upstream_verdict(s.spec.trigger_rule, s.depends_on, progress) == "skip":
                gone.add(s.id)
                out.append(s.id)
                moved = True
                break
    return out


def skipped_steps(row: ExecutionRow, records: Sequence[StepRecord]) -> list[str]:
    """Steps whose `when` was false, and at the end every step the walk skipped."""
    out = row.output if isinstance(row.output, dict) else {}
    if isinstance(out.get("skipped_steps"), list):
        return list(out["skipped_steps"])
    return [
        r.name.removeprefix("realm:when:")
        for r in records
        if r.done
        and r.name.startswith("realm:when:")
        and isinstance(r.result, dict)
        and _skipped(r.result.get("value"))
    ]


def _skipped(when: Any) -> bool:
    """A recorded `when` decision that skipped its step (a bool in older records)."""
    return when is False or (isinstance(when, dict) and when.get("run") is False)
