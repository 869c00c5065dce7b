"""Starting protocol runs: one run under the idempotency key policies (`start_run`,
`create_workflow`, each item of `start_run_batch`), and `start_run_batch` itself.

`start_run` and `create_workflow` start through `Operations.start`; a batch starts all its
items in one statement through `Operations.start_many`, then applies the key policies to
each item's outcome the same way. The batch checks, in order, its
size (`VALIDATION_BATCH_TOO_LARGE`), the workflow (`STATE_WORKFLOW_NOT_FOUND`) and every
item's params (`VALIDATION_BATCH_ITEMS`) before any run is created: those refusals are
all-or-nothing; a key policy refusal applies to its item only (`failed[]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from tether.runtime import errors as rt
from tether.runtime.operations import Operations, Started, StartRequest
from tether.runtime.realm.interpreter import ProtocolInput
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow
from tether.specs.realm import templates, validate_payload
from tether.specs.realm.schemas import Schema
from tether.tools.realm import envelope, replies, runs, storable
from tether.tools.realm.envelope import Reply, refusal

MAX_ITEMS: Final = 100
PARENT_LABEL: Final = "realm.parent_run"


def schema_errors(schema: Any, value: Any) -> list[str]:
    """Draft-07 violations of `value` in Ajv's words, one line each
    (`(root) must have required property 'path'`, `/n must be integer`)."""
    if not schema:
        return []
    return [
        f"{v.instance_path or '(root)'} {v.message}"
        for v in validate_payload(Schema(schema), value)
    ]


@dataclass(frozen=True)
class Outcome:
    """One start: the run (None when refused), whether it was an existing one, the refusal's
    code and message, and the ended run a `rerun` replaced."""

    row: ExecutionRow | None
    deduped: bool = False
    code: str | None = None
    message: str = ""
    rerun_of: str | None = None
    warnings: tuple[str, ...] = ()


async def start_one(
    ops: Operations,
    workflow: str,
    params: dict[str, Any],
    *,
    key: str | None,
    live: str | None,
    terminal: str | None,
    by: str | None,
    labels: dict[str, str] | None = None,
) -> Outcome:
    """Start one run under the key policies (`on_live_match`: use_existing | fail;
    `on_terminal_match`: reuse | reject | rerun_if_failed | rerun)."""
    on_live: Literal["return", "fail"] = "fail" if live == "fail" else "return"
    inp = ProtocolInput(params=params).model_dump()
    try:
        started: Started | rt.TetherError = await ops.start(
            workflow, inp, idempotency_key=key, on_live_match=on_live, by=by, labels=labels
        )
    except (rt.RunAlreadyActive, rt.IdempotencyMismatch) as exc:
        started = exc
    return await _settle(
        ops, started, inp, key=key, live=live, terminal=terminal, by=by, workflow=workflow
    )


def _owned(workflow: str, holder: ExecutionRow) -> Outcome:
    """`on_live_match: fail` on a key a live run holds."""
    return Outcome(
        None,
        code="STATE_RUN_ALREADY_ACTIVE",
        message=f"Run '{holder.id}' of workflow '{workflow}' still holds this idempotency_key "
        f"(phase '{runs.phase(holder)}'); no run was started.",
    )


async def _settle(
    ops: Operations,
    started: Started | rt.TetherError,
    inp: dict[str, Any],
    *,
    key: str | None,
    live: str | None,
    terminal: str | None,
    by: str | None,
    workflow: str,
) -> Outcome:
    """One start's outcome under the key policies, from what the runtime's start gave: the
    run (new or the key's holder) or its refusal. Raises any other refusal."""
    if isinstance(started, rt.RunAlreadyActive):
        holder = (await ops.get(started.execution_id, follow_chain=False)).current
        return _owned(workflow, holder)
    warned: tuple[str, ...] = ()
    if isinstance(started, rt.IdempotencyMismatch) and started.execution_id:
        # other params under a used key only warn: the key's run is matched all the same
        holder = (await ops.get(started.execution_id, follow_chain=False)).current
        if live == "fail" and not runs.ended(holder):
            return _owned(workflow, holder)
        started = Started(holder, deduped=True)
        warned = (OTHER_PARAMS,)
    if isinstance(started, rt.TetherError):
        raise started
    row = started.execution
    if started.deduped and row.sealed_from is not None:  # the key moved to its rerun
        row = (await ops.list_runs(business_id=row.business_id, limit=1)).items[0]
        if not runs.ended(row) and live == "fail":
            return _owned(workflow, row)
    if not started.deduped:
        return Outcome(row, deduped=False, warnings=warned)
    if not runs.ended(row):  # only a warning: a caller's own retry matches the same way
        live_match = (
            f"The idempotency_key matched run '{row.id}', which is still open (phase "
            f"'{runs.phase(row)}')."
        )
        return Outcome(row, deduped=True, warnings=(live_match, *warned))
    policy = terminal or "reuse"
    if policy == "reject":
        return Outcome(
            None,
            code="STATE_IDEMPOTENCY_KEY_USED",
            message=f"idempotency_key is held by the ended run '{row.id}'.",
            warnings=warned,
        )
    if policy == "rerun" or (policy == "rerun_if_failed" and runs.phase(row) == "failed"):
        try:
            # Realm's rerun: the run again from the start, in the key's run's place
            new = await ops.again(row.id, business_id="same", input=inp, by=by)
        except rt.Conflict as exc:
            return Outcome(None, code="STATE_IDEMPOTENCY_KEY_USED", message=exc.message)
        return Outcome(new, rerun_of=row.id, warnings=warned)
    return Outcome(row, deduped=True, warnings=warned)


OTHER_PARAMS: Final = (
    "The idempotency_key matched a run that was started with other params; that run is "
    "returned as it was, and the params of this call were not used."
)


def first_calls(row: ExecutionRow, plan: Plan, handlers: Any) -> list[dict[str, Any]]:
    """A batch run's first call: its open agent steps when the run already waits, else the
    agent steps with no dependency, and `advance_run` when an auto step or guard comes
    first; empty when an auto step's handler is not registered in this server."""
    if runs.ended(row):
        return []
    if row.waits:
        gate = runs.open_gate(row)
        if gate is not None:
            choices = gate.get("choices") or []
            return [envelope.gate_action(row.id, gate["key"], gate["name"], choices)]
        return replies.open_entries(row, plan)
    roots = [s for s in plan.steps if not s.depends_on]
    if any(s.kind == "auto" and s.handler and s.handler not in handlers for s in plan.steps):
        return []
    params = (row.input.get("params") or {}) if isinstance(row.input, dict) else {}
    out = [
        replies.step_entry(
            row.id, plan, s.id, prompt=templates.render(s.prompt, params, {}) if s.prompt else None
        )
        for s in roots
        if s.kind == "agent"
    ]
    owed = [s.id for s in roots if s.kind == "guard"] + [s.id for s in roots if s.kind == "auto"]
    if owed:
        out.append(envelope.advance_action(row.id, owed))
    return out


def _batch_refusal(
    wf: str, items: list[dict[str, Any]], plan: Plan | None, cap: int
) -> Reply | None:
    if len(items) > cap:
        return refusal(
            "start_run_batch",
            "",
            "VALIDATION_BATCH_TOO_LARGE",
            f"The batch has {len(items)} items; max_items is {cap}.",
            error_details={"count": len(items), "max_items": cap},
        )
    if plan is None:
        return envelope.workflow_not_found("start_run_batch", wf)
    failures = [
        {"index": i, "reason": "; ".join(found)}
        for i, item in enumerate(items)
        if (found := schema_errors(plan.params_schema, item["params"]))
    ]
    if failures:
        return refusal(
            "start_run_batch",
            "",
            "VALIDATION_BATCH_ITEMS",
            f"{len(failures)} of the {len(items)} items have params that the workflow's "
            "params_schema refuses; error_details.failures names them.",
            context_hint="No run was started: every item's params must fit params_schema.",
            error_details={"failures": failures},
        )
    return None


def _unstorable_item(ops: Operations, items: list[dict[str, Any]]) -> Reply | None:
    """The first item whose params the store cannot hold (storable.py): no run is created."""
    for i, item in enumerate(items):
        if (bad := ops.unstorable({"params": item["params"]})) is not None:
            what = f"The params of item {i}"
            return storable.refused("start_run_batch", "", bad, what, then="No run was created.")
    return None


async def start_run_batch(
    ops: Operations, plan_of: Any, a: dict[str, Any], by: str | None
) -> Reply | dict[str, Any]:
    """`{started[], failed[]}` (with the envelope's fields), or one all-or-nothing refusal."""
    wf, items = a["workflow_id"], a["items"]
    cap = a.get("max_items", MAX_ITEMS)  # a positive integer (params.py)
    plan: Plan | None = plan_of(wf)
    refused = _batch_refusal(wf, items, plan, cap) or _unstorable_item(ops, items)
    if refused is not None:
        return refused
    assert plan is not None  # noqa: S101 — refused above otherwise
    parent = a.get("parent_run_id")
    labels = {PARENT_LABEL: parent} if parent else None
    live, terminal = a.get("on_live_match"), a.get("on_terminal_match")
    on_live: Literal["return", "fail"] = "fail" if live == "fail" else "return"
    inputs = [ProtocolInput(params=item["params"]).model_dump() for item in items]
    requests = [
        StartRequest(wf, inp, item.get("idempotency_key"), on_live_match=on_live, labels=labels)
        for item, inp in zip(items, inputs, strict=True)
    ]
    outcomes = await ops.start_many(requests, by=by)  # one statement for the whole batch
    started: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for index, (item, inp, result) in enumerate(zip(items, inputs, outcomes, strict=True)):
        key = item.get("idempotency_key")
        out = await _settle(
            ops, result, inp, key=key, live=live, terminal=terminal, by=by, workflow=wf
        )
        if out.row is None:
            failed.append(_failure(index, key, item["params"], out))
        else:
            started.append(_started(ops, out, key, item["params"], plan))
    hint = f"Started {len(started)} run(s) of '{wf}'; {len(failed)} item(s) refused."
    wire = Reply("start_run_batch", "", "ok", hint).to_wire()
    return {**wire, "started": started, "failed": failed}


def _failure(index: int, key: str | None, params: Any, out: Outcome) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index}
    if key is not None:
        entry["idempotency_key"] = key
    entry.update(params=params, error=out.message, error_code=out.code)
    return entry


def _started(
    ops: Operations, out: Outcome, key: str | None, params: Any, plan: Plan
) -> dict[str, Any]:
    row = out.row
    assert row is not None  # noqa: S101
    entry: dict[str, Any] = {"run_id": row.id}
    if key is not None:
        entry["idempotency_key"] = key
    entry.update(params=params, deduped=out.deduped, run_phase=runs.phase(row))
    if runs.ended(row) and isinstance(row.error, dict):
        entry["terminal_reason"] = row.error.get("message")
    actions = first_calls(row, plan, ops.app.functions)
    entry.update(
        warnings=[*preflight(plan, ops.app.functions), *out.warnings],
        next_actions=envelope.ordered(actions),
        context_hint=batch_hint(row, plan, ops.app.functions, out.deduped),
    )
    if out.rerun_of is not None:
        entry["rerun_of"] = out.rerun_of
    return entry


def preflight(plan: Plan, handlers: Any, reached: Sequence[str] = ()) -> list[str]:
    """A warning for each auto step whose handler this server lacks, and for each such step
    this call reached, that it waits for one (after the others)."""
    ahead: list[str] = []
    blocked: list[str] = []
    for s in plan.steps:
        if s.kind != "auto" or not s.handler or s.handler in handlers:
            continue
        if s.id in reached:
            blocked.append(
                f"Step '{s.id}' is waiting: this server has no handler '{s.handler}'. The run "
                "is still open and the step can still run; a server that has the handler runs "
                "it on advance_run. Register the handler here, or use such a server, then "
                "follow next_actions."
            )
        else:
            ahead.append(
                f"Step '{s.id}' needs handler '{s.handler}', which this server does not have. "
                "When the run gets there, the step waits (it does not fail) until a server with "
                "the handler runs it: register the handler here, or use such a server."
            )
    return ahead + blocked


def batch_hint(row: ExecutionRow, plan: Plan, handlers: Any, deduped: bool) -> str:
    """A batch entry's `context_hint`: start_run's sentence for a run on which nothing ran,
    then the next moves (steps waiting for the agent, work due from the engine, steps that
    cannot run)."""
    lead = matched_lead(row) if deduped else f"Run '{row.id}' created for workflow '{plan.id}'."
    if runs.ended(row) or row.waits:
        return replies.join(lead, "" if runs.ended(row) else replies.what_next(row))
    roots = [s for s in plan.steps if not s.depends_on]
    agents = ", ".join(f"'{s.id}'" for s in roots if s.kind == "agent")
    owed, cannot = [], []
    for s in sorted(roots, key=lambda s: s.kind != "guard"):
        if s.kind == "auto" and s.handler and s.handler not in handlers:
            cannot.append(runs.cannot_run_here(s.id, s.handler))
        elif s.kind in ("auto", "guard"):
            owed.append(f"'{s.id}'")
    said = [f"{runs.FOR_THE_AGENT}: {agents}." if agents else ""]
    if owed:
        said.append(runs.owed_sentence(owed))
    return (
        replies.join(lead, *said, *cannot) if any(said) or cannot else f"{lead} No step is ready."
    )


def matched_lead(row: ExecutionRow) -> str:
    """The hint's first sentence for a start an idempotency key matched: nothing was started."""
    return (
        f"Run '{row.id}' already holds this idempotency_key (phase '{runs.phase(row)}'); no run "
        "was started."
    )
