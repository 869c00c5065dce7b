"""The generic protocol workflow: one execution walks a `Plan` step by step.

- the protocol's text is recorded by the run's first step (`realm:spec`), so a run interprets
  the protocol it started with even when it is replaced while the run goes on;
- an `auto` step is a durable step running its registered handler (`realm:auto:<id>`);
- a `guard` is decided by a durable step in the same replay that made it ready
  (`realm:guard:<id>`): every `abort_unless` condition true passes it, a false one aborts
  the run (GuardAborted), a path that names nothing fails it (GuardResolutionError);
- an `agent` step is a wait of kind `agent_step` named after the step, whose schema is the
  step's `output_schema`: the one runtime `answer` path checks an answer against it, so a
  refused answer changes nothing.
The output is `{"outputs": {step: output}}`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from tether.runtime import waits
from tether.runtime.context import Context
from tether.runtime.realm import conditions
from tether.runtime.realm.plan import Plan, PlanStep, plan_from_text

Handlers = Mapping[str, Callable[..., Any]]


class ProtocolInput(BaseModel):
    """A protocol run's input: the run's params (checked against `params_schema` by the tool
    before the run is created)."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(default_factory=dict)


class GuardAborted(Exception):
    """A guard's condition was false: the run ends `aborted` (phase) with its abort message."""

    def __init__(self, step: str, reason: str | None) -> None:
        super().__init__(reason or f"Guard step '{step}' aborted the run.")
        self.step = step
        self.reason = reason


class GuardResolutionError(Exception):
    """A guard's condition named nothing: the run fails at that guard."""


class HandlerNotRegistered(Exception):
    """An auto step names a handler this process does not have."""


@dataclass(frozen=True)
class AgentAnswer(waits.WaitSpec):
    """An agent step's wait: the answer is any JSON fitting the step's JSON schema (checked by
    `waits.validate_answer` from the descriptor before it is delivered)."""

    kind: ClassVar[str] = "agent_step"
    json_schema: Mapping[str, Any] | None = None
    input_schema: Mapping[str, Any] | None = None

    def answer_schema(self) -> dict[str, Any]:
        return dict(self.json_schema or {"type": "object"})

    def extra(self) -> dict[str, Any]:
        return {"step": self.name, "input_schema": dict(self.input_schema or {})}


@dataclass(frozen=True)
class ProtocolHost:
    """What the interpreter needs from the app, handed in (it imports no registry)."""

    handlers: Handlers
    snapshot: Callable[[str], dict[str, str]]  # protocol id → {"id", "text"}


def decide_guard(step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """A guard's outcome, pure: `pass`, `abort` (with the abort message) or
    `resolution_error` (with the error)."""
    try:
        ok = all(conditions.holds(c, params, outputs) for c in step.abort_unless)
    except conditions.Unresolvable as exc:
        return {"outcome": "resolution_error", "reason": str(exc)}
    if ok:
        return {"outcome": "pass"}
    return {"outcome": "abort", "reason": step.abort_message}


async def _run_handler(
    handlers: Handlers, step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]
) -> Any:
    fn = handlers.get(step.handler or "")
    if fn is None:
        raise HandlerNotRegistered(f"no handler {step.handler!r} is registered (@app.handler)")
    value = fn({"params": params, "steps": dict(outputs), "config": dict(step.config or {})})
    if hasattr(value, "__await__"):
        value = await value
    return value


async def run_protocol(
    ctx: Context, host: ProtocolHost, name: str, inp: ProtocolInput
) -> dict[str, Any]:
    """Walk protocol `name` from its first step to its end."""
    snap = await ctx.step(host.snapshot, name, name="realm:spec")
    plan: Plan = plan_from_text(snap["text"])
    outputs: dict[str, Any] = {}
    for step in plan.steps:
        if step.kind == "auto":
            outputs[step.id] = await ctx.step(
                _run_handler, host.handlers, step, inp.params, outputs, name=f"realm:auto:{step.id}"
            )
        elif step.kind == "guard":
            verdict = await ctx.step(
                decide_guard, step, inp.params, outputs, name=f"realm:guard:{step.id}"
            )
            if verdict["outcome"] == "abort":
                raise GuardAborted(step.id, verdict.get("reason"))
            if verdict["outcome"] == "resolution_error":
                raise GuardResolutionError(verdict["reason"])
            outputs[step.id] = {"passed": True}
        else:
            spec = AgentAnswer(
                step.id, step.prompt or step.description, step.answer_schema, step.input_schema
            )
            (answer,) = await ctx.wait_all(spec)
            outputs[step.id] = answer
    return {"outputs": outputs}
