"""The generic protocol workflow: one execution walks a `Plan` as its steps become ready.

- the protocol's text is recorded by the run's first step (`realm:spec`), so a run interprets
  the protocol it started with even when it is replaced while the run goes on;
- a step is decided once its `trigger_rule` can tell from its dependencies
  (`graph.upstream_verdict`); a step it excludes is skipped, as is a step whose `when` is
  false (`realm:when:<id>`); a skipped step has no output. Engine steps run in dependency
  order; every agent step that is ready is offered at once (`Context.wait_any`), so two agent
  steps with no order between them are answered concurrently, and the walk goes on with
  each answer as it comes;
- an `auto` step is a durable step calling the user function its `handler` names
  (`realm:auto:<id>`; runtime/functions.py) with `{"params", "steps", "config"}`; one
  with no handler passes its one dependency's output on (the params with none, `{}` with
  several). Its failure ends the run (StepFailed) unless a step depending on it can run after
  a failure (`all_failed`, `all_done`, `one_failed`, `one_success`): then the walk goes on,
  and the run completes with `failed_steps` (outcome `completed_with_failed_steps`);
- a `guard` is decided by a durable step in the same replay that made it ready
  (`realm:guard:<id>`): every `abort_unless` condition true passes it, a false one aborts
  the run (GuardAborted), a path that names nothing fails it (GuardResolutionError);
- an `agent` step is a wait of kind `agent_step` named after the step, whose schema is the
  step's `answer_schema` (input_schema and output_schema): the one runtime `answer` path
  checks an answer against it, so a refused answer changes nothing; a step whose refused
  answers spent its budget fails like an auto step (failures.Exhausted);
- a gated step (`trust: human_*`) then opens an approval wait (`GateWait`), alone: while it
  is open no other step is offered (Realm's gates are served one at a time), with the gate's
  choices and the step's output as preview; its deadline is the gate's `timeout_seconds`.
  When the deadline passes first, the run (woken by the worker, or by the next act on it)
  carries out `on_expiry`: `settle_default` records the default choice with
  `resolved_by: "timeout"`, `abort` ends the run aborted (GateExpired); without `on_expiry`
  the gate stays open. The step's output gains `choice` (read as `<step>.choice`).
- when the walk ends (complete, completed_with_failed_steps, a guard's or gate's abort, a
  failure), the finalizers whose `on_outcome` names that ending (or `always`) run once each,
  in file order (`realm:final:<id>`); a finalizer's failure is recorded and changes nothing;
  one whose handler this process lacks is recorded as left pending (`cleanup_pending`).
  An abandoned run (terminated) runs no more code, so no finalizer.
The output is `{"outputs": {step: output}, "gates": {step: resolution}, "failed_steps"?}`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tether.runtime.context import Context
from tether.runtime.errors import StepFailed, WaitTimeout
from tether.runtime.functions import Functions
from tether.runtime.realm import attempts
from tether.runtime.realm.asks import AgentAnswer, GateWait, Spent
from tether.runtime.realm.failures import (
    Exhausted,
    GateExpired,
    GateMessageError,
    GuardAborted,
    GuardResolutionError,
    left_pending,
)
from tether.runtime.realm.plan import Plan, PlanStep, plan_from_text
from tether.specs.realm import (
    ConditionContext,
    ConditionUnresolved,
    Progress,
    evaluate,
    explain,
    finalizers_for,
    templates,
    upstream_verdict,
)
from tether.specs.realm.model import Outcome


class ProtocolInput(BaseModel):
    """A protocol run's input: the run's params (checked against `params_schema` by the tool
    before the run is created)."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class ProtocolHost:
    """What the interpreter needs from the app, handed in (it imports no registry)."""

    functions: Functions  # the App's user functions (`handler: NAME` steps)
    snapshot: Callable[[str], dict[str, str]]  # protocol id → {"id", "text"}


def _context(params: dict[str, Any], outputs: dict[str, Any]) -> ConditionContext:
    return ConditionContext(outputs=outputs, params=params)


def decide_guard(step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """A guard's outcome, pure: `pass`, `abort` (with the abort message) or
    `resolution_error` (with the error)."""
    try:
        ok = all(evaluate(c, _context(params, outputs)) for c in step.abort_unless)
    except ConditionUnresolved as exc:
        return {"outcome": "resolution_error", "reason": str(exc)}
    if ok:
        return {"outcome": "pass"}
    read = explain(step.abort_unless, _context(params, outputs))
    said = [
        {"condition": c["leaf"], **{k: c[k] for k in ("resolved_value", "passed")}} for c in read
    ]
    return {"outcome": "abort", "reason": step.abort_message, "conditions": said}


def _runs(when: bool | dict[str, Any]) -> bool:
    """A recorded `when` decision (a bool in runs recorded before its leaves were kept)."""
    return when if isinstance(when, bool) else bool(when["run"])


def decide_when(step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """Whether the step runs (`when`, all true), with each condition's reading — pure."""
    leaves = explain(step.when, _context(params, outputs))
    return {"run": all(c["passed"] for c in leaves), "leaves": leaves}


async def _run_handler(
    functions: Functions, step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]
) -> Any:
    """The step's output: its function's result (FunctionNotRegistered when the process has
    none of that name), or what a pass-through step passes on."""
    if step.handler is None:  # a pass-through step
        deps = step.depends_on
        if not deps:
            return dict(params)
        return outputs.get(deps[0]) if len(deps) == 1 else {}
    fn = functions.lookup(step.handler)
    given = templates.resolve_input_map(step.spec.input_map, params, outputs)
    step_input = given if step.spec.input_map else params  # the handler reads `inputs.params`
    with attempts.marked():  # an error marked `retryable` is one a `retry` block retries
        return await fn.call(
            {"params": step_input, "steps": dict(outputs), "config": dict(step.config or {})}
        )


def gate_display(step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]) -> str:
    """What the person is shown: the gate's `message` rendered strictly (a path that finds
    nothing or an unknown filter raises GateMessageError), else the step's prompt."""
    gate = step.gate
    assert gate is not None  # noqa: S101 — only called for gated steps
    if gate.message is None:
        return templates.render(step.prompt, params, outputs) if step.prompt else step.description
    try:
        return templates.render_strict(gate.message, params, outputs)
    except templates.Unresolvable as exc:
        raise GateMessageError(step.id, "GATE_MESSAGE_UNRESOLVABLE", str(exc)) from None
    except templates.UnknownFilter as exc:
        raise GateMessageError(step.id, "FILTER_UNKNOWN", str(exc)) from None


async def _gate(ctx: Context, step: PlanStep, w: Walk) -> dict[str, Any]:
    """Open the step's gate and return its resolution (`choice`, `resolved_by`)."""
    gate = step.gate
    assert gate is not None  # noqa: S101 — only called for gated steps
    output = w.outputs[step.id]
    while True:  # a message that cannot be rendered does not open the gate; the run stays open
        try:
            shown = gate_display(step, w.params, w.outputs)
            break
        except GateMessageError as exc:
            channel = f"{attempts.CAPABILITY}{step.id}"
            await ctx.wait_for_signal(channel, prompt=f"(gate message): {exc}")
    spec = GateWait(
        step.id,
        shown,
        gate.choices,
        output,
        step.instructions,
        gate.on_expiry,
        gate.default_choice,
        gate.timeout_seconds if gate.on_expiry is None else None,
    )
    timeout = gate.timeout_seconds if gate.on_expiry is not None else None
    try:
        (resolution,) = await ctx.wait_all(spec, timeout=timeout)
    except WaitTimeout as exc:
        if gate.on_expiry == "abort":
            said = f"Gate '{step.id}' expired and the run aborted per the workflow's declared "
            raise GateExpired(step.id, f"{said}on_expiry.") from exc
        return {"choice": gate.default_choice, "resolved_by": "timeout", "by": None}
    return dict(resolution)


FAILURE_RULES = frozenset({"all_failed", "all_done", "one_failed", "one_success"})


@dataclass
class Walk:
    """A run's progress through its plan: outputs, gate resolutions, settled step ids."""

    params: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    gates: dict[str, Any] = field(default_factory=dict)
    completed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)

    def verdict(self, step: PlanStep) -> str:
        """`run`, `skip`, or `wait` (its trigger rule cannot tell yet)."""
        progress = Progress(
            frozenset(self.completed), frozenset(self.failed), frozenset(self.skipped)
        )
        return upstream_verdict(step.spec.trigger_rule, step.depends_on, progress)


def handled(plan: Plan, step: PlanStep) -> bool:
    """Whether a failure of `step` lets the run go on: a step depending on it can still run
    after that failure (`all_failed`, `all_done`, `one_failed`, `one_success`). Otherwise the
    failure ends the run."""
    return any(step.id in s.depends_on and s.spec.trigger_rule in FAILURE_RULES for s in plan.steps)


async def _auto(ctx: Context, host: ProtocolHost, plan: Plan, step: PlanStep, w: Walk) -> None:
    await attempts.capable(ctx, host.functions, step, w.params, w.outputs)
    policy, retry_if = attempts.retry_of(step)
    try:
        w.outputs[step.id] = await ctx.step(
            _run_handler,
            host.functions,
            step,
            w.params,
            w.outputs,
            name=f"realm:auto:{step.id}",
            timeout=step.spec.effective_timeout,  # one attempt's limit (3600 s by default)
            retry=policy,
            retry_if=retry_if,
            total_timeout=step.spec.retry.total_timeout_seconds if step.spec.retry else None,
        )
    except StepFailed:
        if not handled(plan, step):
            raise
        w.failed.add(step.id)
        return
    w.completed.add(step.id)


async def _one(ctx: Context, host: ProtocolHost, plan: Plan, step: PlanStep, w: Walk) -> None:
    """Run one engine step the walk has reached (its rule and `when` allow it)."""
    if step.kind == "auto":
        await _auto(ctx, host, plan, step, w)
    else:
        verdict = await ctx.step(
            decide_guard, step, w.params, w.outputs, name=f"realm:guard:{step.id}"
        )
        if verdict["outcome"] == "abort":
            raise GuardAborted(step.id, verdict.get("reason"))
        if verdict["outcome"] == "resolution_error":
            raise GuardResolutionError(verdict["reason"])
        w.outputs[step.id] = {"passed": True}
        w.completed.add(step.id)
    await _after(ctx, step, w)


async def _after(ctx: Context, step: PlanStep, w: Walk) -> None:
    """A completed gated step opens its gate; the step's output gains the choice."""
    if step.gate is not None and step.id in w.completed:
        w.gates[step.id] = await _gate(ctx, step, w)
        base = w.outputs[step.id] if isinstance(w.outputs[step.id], dict) else {}
        w.outputs[step.id] = {**base, "choice": w.gates[step.id]["choice"]}


async def _answered(ctx: Context, plan: Plan, step: PlanStep, w: Walk, answer: Any) -> None:
    """An agent step's answer: its output (then its gate), or the failure of a step whose
    refused answers spent its budget."""
    if isinstance(answer, Spent):
        if not handled(plan, step):
            raise Exhausted(step.id, answer.detail)
        w.failed.add(step.id)
        return
    w.outputs[step.id] = answer
    w.completed.add(step.id)
    await _after(ctx, step, w)


async def _reach(
    ctx: Context,
    host: ProtocolHost,
    plan: Plan,
    w: Walk,
    reached: set[str],
    offered: dict[str, AgentAnswer],
) -> None:
    """Decide each step whose dependencies allow it, in dependency order: skip it (its
    rule or `when`), run it (auto, guard), or offer it to the agent (its wait goes in
    `offered`). One pass is enough: a step's dependencies come before it, so a step left
    undecided waits on an agent step that is offered."""
    for step in plan.steps:
        if step.id in reached:
            continue
        verdict = w.verdict(step)
        if verdict == "wait":
            continue
        reached.add(step.id)
        if verdict == "skip" or (
            step.when
            and not _runs(
                await ctx.step(decide_when, step, w.params, w.outputs, name=f"realm:when:{step.id}")
            )
        ):
            w.skipped.add(step.id)
        elif step.kind == "agent":
            prompt = templates.render(step.prompt, w.params, w.outputs) if step.prompt else None
            offered[step.id] = AgentAnswer(
                step.id, prompt or step.description, step.answer_schema, step.input_schema
            )
        else:
            await _one(ctx, host, plan, step, w)


async def _walk(ctx: Context, host: ProtocolHost, plan: Plan, w: Walk) -> None:
    """Run the engine's steps as they become ready, and offer every agent step that is ready
    at once (Realm serves steps with no order between them concurrently): the run parks on
    all of them and goes on with the first answers, offering the rest again with what became
    ready meanwhile. A gate holds every other step while it is open."""
    file_order = list(plan.spec.steps)
    reached: set[str] = set()
    offered: dict[str, AgentAnswer] = {}
    while True:
        await _reach(ctx, host, plan, w, reached, offered)
        if not offered:
            return
        ready = sorted(offered, key=file_order.index)
        got = await ctx.wait_any(*(offered[s] for s in ready))
        for step_id in ready:
            channel = offered[step_id].channel
            if channel in got:
                del offered[step_id]
                step = plan.step(step_id)
                assert step is not None  # noqa: S101 — offered from this plan
                await _answered(ctx, plan, step, w, got[channel])


async def _finalize(
    ctx: Context, host: ProtocolHost, plan: Plan, w: Walk, outcome: Outcome
) -> None:
    """Run the finalizers for `outcome`, each once, in file order; a finalizer that fails is
    recorded, and the run's ending stays as it was."""
    for fin in finalizers_for(plan.spec, outcome):
        step = PlanStep(fin)
        if step.handler is not None and step.handler not in host.functions:
            await ctx.step(left_pending, step.handler, name=f"realm:final:{fin.id}")
            continue  # Realm leaves it `cleanup_pending` for code that has its handler
        with contextlib.suppress(StepFailed):
            await ctx.step(
                _run_handler,
                host.functions,
                step,
                w.params,
                w.outputs,
                name=f"realm:final:{fin.id}",
            )


async def run_protocol(
    ctx: Context, host: ProtocolHost, name: str, inp: ProtocolInput
) -> dict[str, Any]:
    """Walk protocol `name` from its first step to its end, then run its finalizers (not
    after an abandon: a terminated run runs no more code)."""
    snap = await ctx.step(host.snapshot, name, name="realm:spec")
    plan: Plan = plan_from_text(snap["text"])
    w = Walk(dict(inp.params))
    try:
        await _walk(ctx, host, plan, w)
    except GuardAborted:
        await _finalize(ctx, host, plan, w, "abort")
        raise
    except (GuardResolutionError, StepFailed, Exhausted):
        await _finalize(ctx, host, plan, w, "fail")
        raise
    outcome: Outcome = "completed_with_failed_steps" if w.failed else "complete"
    await _finalize(ctx, host, plan, w, outcome)
    out: dict[str, Any] = {"outputs": w.outputs, "gates": w.gates}
    if w.skipped:
        out["skipped_steps"] = [s.id for s in plan.steps if s.id in w.skipped]
    if w.failed:
        out["failed_steps"] = sorted(w.failed)
    return out
