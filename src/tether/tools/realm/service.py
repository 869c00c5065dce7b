"""The protocol tools over the runtime: each call checks its parameters (params.py), acts through
`Operations`, waits for the run to stop at its next agent step, gate or end (the worker runs
the auto steps and guards the call made ready), and replies with one envelope (envelope.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Final

from tether.runtime import errors as rt
from tether.runtime.operations import Operations
from tether.runtime.realm.attempts import CAPABILITY
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.specs.limits import SpecLimits
from tether.tools import results
from tether.tools.realm import (
    agent_plans,
    delivery,
    envelope,
    exhaustion,
    gates,
    health,
    params,
    replies,
    runs,
    starts,
    state,
    storable,
    traces,
    uncallable,
)
from tether.tools.realm.envelope import Reply, refusal
from tether.tools.realm.views import listing, protocol_view

SETTLE_S: Final = runs.SETTLE_S
Args = dict[str, Any]


def reply_result(reply: Reply | dict[str, Any]) -> dict[str, Any]:
    """One JSON text item, as every reply of these tools is."""
    wire = reply.to_wire() if isinstance(reply, Reply) else reply
    out = results.text_result(wire)
    out.pop("structuredContent", None)
    return out


class RealmTools:
    """The 11 tools; `call(name, args, by)` returns the MCP result."""

    def __init__(self, ops: Operations, limits: SpecLimits | None = None) -> None:
        self.ops = ops
        self.limits = limits or SpecLimits()  # on create_workflow plans
        self._tools: dict[str, Callable[[Operations, Args, list[str], str | None], Awaitable[Any]]]
        self._tools = {
            "list_workflows": self.list_workflows,
            "get_workflow_protocol": self.get_workflow_protocol,
            "start_run": self.start_run,
            "execute_step": self.execute_step,
            "advance_run": self.advance_run,
            "get_run_state": self.get_run_state,
            "abandon_run": self.abandon_run,
            "submit_human_response": self.submit_human_response,
            "start_run_batch": self.start_run_batch,
            "create_workflow": self.create_workflow,
            "append_trace": self.append_trace,
        }

    def served(self) -> list[str]:
        return [name for name in params.TOOLS if name in self._tools]

    async def call(
        self, ops: Operations, name: str, args: dict[str, Any] | None, by: str | None
    ) -> dict[str, Any]:
        """Raises InvalidParams (missing or wrong-typed required parameter)."""
        known, warnings = params.checked(name, args)
        if name == "create_workflow":  # plan_workflow names what it ignores (diagnostics)
            known, warnings = dict(args or {}), []
        out = await self._tools[name](ops, known, warnings, by)
        if isinstance(out, dict) and "content" in out:
            return out
        return reply_result(out)

    def _plan(self, workflow: str) -> Plan | None:
        entry = self.ops.app.protocols.get(workflow)
        return entry.plan if entry is not None else None

    async def submit_human_response(
        self, ops: Operations, a: Args, w: list[str], by: str | None
    ) -> Any:
        return await gates.submit_human_response(self._settle, self._plan, ops, a, w, by)

    # --- reading ----------------------------------------------------------------------------

    async def list_workflows(self, ops: Operations, a: Args, w: list[str], by: Any) -> Any:
        items = [
            {"id": e.plan.id, "name": e.plan.name, "version": e.plan.version}
            for e in self.ops.app.protocols.values()
        ]
        return listing(items, self.ops.app.unreadable_protocols, w, self.ops.app)

    async def get_workflow_protocol(self, ops: Operations, a: Args, w: list[str], by: Any) -> Any:
        plan = self._plan(a["workflow_id"])
        if plan is None:
            missing = envelope.workflow_missing(a["workflow_id"])
            return results.text_result(f"Error: {missing}", is_error=True)
        return protocol_view(plan)

    # --- starting ---------------------------------------------------------------------------

    async def start_run(self, ops: Operations, a: Args, w: list[str], by: str | None) -> Any:
        wf = a["workflow_id"]
        plan = self._plan(wf)
        if plan is None:
            return envelope.workflow_not_found("start_run", wf)
        run_params = a.get("params") or {}
        problems = starts.schema_errors(plan.params_schema, run_params)
        if problems:
            return refusal(
                "start_run",
                "",
                "VALIDATION_INPUT_SCHEMA",
                f"The params do not fit the params_schema of workflow '{wf}': "
                f"{'; '.join(problems)}",
                error_details={"errors": problems},
            )
        if (bad := ops.unstorable({"params": run_params})) is not None:
            return storable.refused("start_run", "", bad, "The run's params")
        out = await starts.start_one(
            ops,
            wf,
            run_params,
            key=a.get("idempotency_key"),
            live=a.get("on_live_match"),
            terminal=a.get("on_terminal_match"),
            by=by,
        )
        row, warned = out.row, list(out.warnings)
        if row is None:
            return refusal("start_run", "", out.code, out.message)
        handlers = ops.app.functions
        if out.deduped:
            return await _matched(ops, plan, row, [*starts.preflight(plan, handlers), *warned])
        row, chain = await self._settle(ops, row, [])
        reached = [str(w["name"]).removeprefix(CAPABILITY) for w in runs.capability_waits(row)]
        warned = [*starts.preflight(plan, handlers, reached), *warned]
        ran = any(c["step"] not in {g["step"] for g in chain.guards} for c in chain.chained)
        done = replies.completed("", chain) if ran else ""  # the last step the call ran
        hint = f"Run '{row.id}' created for workflow '{wf}'."
        if out.rerun_of is not None:
            hint = (
                f"{hint} It takes the place of run '{out.rerun_of}', which held the same "
                "idempotency_key (on_terminal_match)."
            )
        reply = replies.progress(
            "start_run", plan, row, chain, deduped=False, lead=hint, done=done, warnings=warned
        )
        if out.rerun_of is None:
            return reply
        return {**reply.to_wire(), "rerun_of": out.rerun_of}

    async def start_run_batch(self, ops: Operations, a: Args, w: list[str], by: Any) -> Any:
        return await starts.start_run_batch(ops, self._plan, a, by)

    async def append_trace(self, ops: Operations, a: Args, w: list[str], by: Any) -> Any:
        return await traces.append_trace(ops, self._plan, a, by)

    async def create_workflow(self, ops: Operations, a: Args, w: list[str], by: Any) -> Any:
        return await agent_plans.create_workflow(ops, a, by, self.limits)

    # --- acting -----------------------------------------------------------------------------

    async def execute_step(self, ops: Operations, a: Args, w: list[str], by: str | None) -> Any:
        step, run_id = a["command"], a["run_id"]
        if (bad := traces.nonce_problem(a.get("writer_nonce"))) is not None:
            return refusal(step, run_id, "VALIDATION_EMPTY_VALUE", bad)
        try:
            row = (await ops.get(run_id)).current
        except rt.ExecutionNotFound:
            return refusal(step, run_id, "STATE_RUN_NOT_FOUND", f"Run not found: {run_id}")
        plan = self._plan(row.workflow)
        refused = replies.not_callable(plan, row, step, a.get("writer_nonce"))
        if refused is not None or plan is None:
            return refused
        if not runs.settled(row):  # a replay in flight (woken by a signal, a trace …)
            row = (await ops.wait_until(row.id, runs.settled, timeout=SETTLE_S)).current
        if runs.ended(row):
            return replies.ended(step, row, "no steps executed.", await ops.steps(row.id))
        wait = runs.open_step(row, step)
        if wait is None and runs.parked(row, step):  # naming an auto step runs it
            return await self.advance_run(ops, {"run_id": row.id}, [], by, command=step)
        if wait is None:
            return uncallable.blocked(step, plan, row, await ops.steps(row.id))
        answer = a.get("params") or {}
        if (unfit := ops.unstorable(answer)) is not None:  # nothing written, nothing counted
            return exhaustion.unstorable(plan, row, wait, unfit)
        refused, warned = await traces.screened(ops, plan, row, step, a.get("trace") or [])
        if refused is not None:
            return refused

        async def deliver(to: dict[str, Any]) -> object:
            return await ops.answer(row.id, to["key"], answer, by=by)

        try:
            delivered = await delivery.deliver_to_step(ops, row, step, wait, deliver)
        except rt.AnswerRejected:
            return await exhaustion.refused(ops, plan, row, wait, answer, self._settle)
        except rt.AnswerConflict:
            delivered = None
        if delivered is None:  # answered meanwhile, or held by a gate that opened meanwhile
            now = (await ops.wait_until(row.id, runs.settled, timeout=SETTLE_S)).current
            return uncallable.blocked(step, plan, now, await ops.steps(now.id))
        row = delivered[0]
        row, chain = await self._settle(ops, row, [], answered=step)
        traced = await ops.buffered_signals(row.id, traces.channel(step))
        adopted = traces.adoption([t.payload for t in traced], a.get("writer_nonce"))
        done = replies.completed(step, chain)
        reply = replies.progress(step, plan, row, chain, done=done, warnings=warned)
        return {**reply.to_wire(), **adopted}

    async def advance_run(
        self, ops: Operations, a: Args, w: list[str], by: Any, command: str = "advance_run"
    ) -> Any:
        run_id = a["run_id"]
        try:
            row = (await ops.get(run_id)).current
        except rt.ExecutionNotFound:
            return refusal("advance_run", run_id, "STATE_RUN_NOT_FOUND", f"Run not found: {run_id}")
        plan = self._plan(row.workflow)
        if runs.ended(row):
            hint = replies.ended_hint(row, "nothing ran.", await ops.steps(row.id))
            return Reply(
                "advance_run",
                row.id,
                "ok",
                hint,
                row.version,
                warnings=w,
                extra={"run_phase": runs.phase(row), "continued_by": dict(health.NO_DRIVER)},
            )
        before = await ops.steps(row.id)
        parked = runs.capability_waits(row)
        for wait in parked:  # look for the handler again (this server's, or another's)
            with contextlib.suppress(rt.RunEnded):
                await ops.signal(row.id, wait["name"])
        gate = runs.open_gate(row)
        if gate is not None and not parked and not gates.due(gate):
            reply = replies.waiting_on(row, gate, w, extra={"continued_by": dict(health.NO_DRIVER)})
            return reply.to_wire()
        chain = runs.Chain([], [], None)
        if parked or not runs.settled(row):  # nothing owed: never an error, nothing to wait on
            row, chain = await self._settle(ops, row, before)
        ran = any(c["step"] not in {g["step"] for g in chain.guards} for c in chain.chained)
        done = replies.completed(command, chain) if ran else f"Run '{row.id}': nothing ran."
        reply = replies.progress(command, plan, row, chain, done=done, warnings=w)
        wire = reply.to_wire()
        if command == "advance_run":
            wire["continued_by"] = dict(health.NO_DRIVER)
        return wire

    async def abandon_run(self, ops: Operations, a: Args, w: list[str], by: str | None) -> Any:
        """The run's summary `{run_id, run_phase, terminal_state, terminal_reason, note}`; a
        refusal is the envelope without `run_version`, its hint a short sentence and its error
        the full one."""
        run_id = a["run_id"]
        reason = a.get("reason") or "Abandoned via abandon_run"
        try:
            row = (await ops.get(run_id)).current
        except rt.ExecutionNotFound:
            return _abandon_refused(
                run_id, "STATE_RUN_NOT_FOUND", f"Run not found: {run_id}", "not found."
            )
        note = ABANDON_NOTE
        if runs.phase(row) == "abandoned":
            note = f"already abandoned (no change this call). {ABANDON_NOTE}"
        elif runs.ended(row):
            message = (
                f"Run '{row.id}' has already ended ({runs.phase(row)}); there is nothing to "
                "abandon."
            )
            hint = "has already ended; nothing to abandon."
            return _abandon_refused(row.id, "STATE_RUN_TERMINAL", message, hint)
        elif runs.phase(row) == "gate_waiting":
            hint = "waits for a person's answer at a gate; answer it before abandoning the run."
            return _abandon_refused(
                row.id, "STATE_TRANSITION_DENIED", _gate_open_sentence(row), hint
            )
        else:
            try:
                row = await ops.terminate(row.id, reason=reason, by=by)
            except rt.RunEnded:
                row = (await ops.get(row.id)).current
        err = row.error if isinstance(row.error, dict) else {}
        return {
            "run_id": row.id,
            "run_phase": "abandoned",
            "terminal_state": True,
            "terminal_reason": err.get("message", reason),
            "note": note,
        }

    async def get_run_state(self, ops: Operations, a: Args, w: list[str], by: Any) -> Any:
        run_id = a["run_id"]
        try:
            row = (await ops.get(run_id)).requested  # the run asked about, not its successor
        except rt.ExecutionNotFound:
            return refusal(
                "get_run_state",
                run_id,
                "STATE_RUN_NOT_FOUND",
                f"Run not found: {run_id}",
                run_version=None,
            )
        plan = self._plan(row.workflow)
        return await state.run_state(ops, plan, row, bool(a.get("include_steps")))

    # --- replies ----------------------------------------------------------------------------

    async def _settle(
        self,
        ops: Operations,
        row: ExecutionRow,
        before: list[StepRecord],
        answered: str | None = None,
    ) -> tuple[ExecutionRow, runs.Chain]:
        """Wait until the run stops at a wait or ends; what ran meanwhile (after `before`, or
        after the answer of agent step `answered`)."""
        seen = row.version

        def moved(r: ExecutionRow) -> bool:
            return runs.settled(r) and (r.version > seen or runs.ended(r))

        view = await ops.wait_until(row.id, moved, timeout=SETTLE_S)
        now = view.current
        after = await ops.steps(now.id)
        if answered is not None:
            before = runs.upto(after, answered)
        return now, runs.chain(before, after, runs.phase(now))


async def _matched(ops: Operations, plan: Plan, row: ExecutionRow, warned: list[str]) -> Reply:
    """A start the key matched: it ran nothing; an ended run's reply still ends with its ways
    back in."""
    left = runs.left_pending(await ops.steps(row.id)) if runs.ended(row) else []
    none = runs.Chain([], [], None, tuple(left))
    lead = starts.matched_lead(row)
    return replies.progress("start_run", plan, row, none, deduped=True, lead=lead, warnings=warned)


def _gate_open_sentence(row: ExecutionRow) -> str:
    """The refusal to abandon a run that waits at a gate, with the call that answers it."""
    gate = runs.open_gate(row) or {}
    choices = ", ".join(gate.get("choices") or [])
    return (
        f"Run '{row.id}' cannot be abandoned while the gate of step '{gate.get('name')}' (gate "
        f"'{gate.get('key')}') waits for an answer. Answer it first: submit_human_response "
        f"{{run_id: '{row.id}', gate_id: '{gate.get('key')}', choice: <one of: {choices}>}}."
    )


#: The note every abandon carries: no finalizer runs after it.
ABANDON_NOTE: Final = (
    "Abandoning stops the run where it stands: its finalizers, if it has any, did not run and "
    "never will. A run that should end with its finalizers is ended by one of its own guard "
    "steps (abort_unless); operators have no abort command."
)


def _abandon_refused(run_id: str, code: str, message: str, hint: str) -> Reply:
    return refusal(
        "abandon_run",
        run_id,
        code,
        message,
        run_version=None,
        context_hint=f"Run '{run_id}' {hint}",
    )
