"""What the interpreter needs of a protocol, as plain frozen data: its steps in order, each
an `agent` step (a wait of kind `agent_step`), an `auto` step (a registered handler) or a
`guard` (decided in the write that makes it ready).

A bridge: the strict loader (`tether.specs.realm`) validates the YAML; `plan_from_mapping`
reads the subset the interpreter runs from an already-parsed document, so runs record and
replay the text they started with whatever the loader becomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

KINDS: Final = ("agent", "auto", "guard")


class PlanError(ValueError):
    """The protocol cannot be interpreted (names the step and field)."""


@dataclass(frozen=True)
class PlanStep:
    id: str
    description: str
    kind: str
    depends_on: tuple[str, ...] = ()
    input_schema: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None
    prompt: str | None = None
    instructions: str | None = None
    handler: str | None = None
    config: Mapping[str, Any] | None = None
    abort_unless: tuple[str, ...] = ()
    abort_message: str | None = None

    @property
    def answer_schema(self) -> dict[str, Any]:
        """The schema an agent's answer must fit (output_schema, else any object)."""
        return dict(self.output_schema or {"type": "object"})


@dataclass(frozen=True)
class Plan:
    id: str
    name: str
    version: int | float
    steps: tuple[PlanStep, ...]
    description: str | None = None
    params_schema: Mapping[str, Any] | None = None
    quick_start: str | None = None
    rules: tuple[str, ...] = ()

    def step(self, step_id: str) -> PlanStep | None:
        return next((s for s in self.steps if s.id == step_id), None)


def plan_from_text(text: str) -> Plan:
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise PlanError("a protocol is a YAML mapping")
    return plan_from_mapping(doc)


def _str_tuple(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in items):
        raise PlanError(f"{where}: a string or a list of strings")
    return tuple(items)


def _step(sid: str, raw: Any) -> PlanStep:
    if not isinstance(raw, dict):
        raise PlanError(f"steps.{sid}: a mapping")
    kind = raw.get("execution")
    if kind not in KINDS:
        raise PlanError(f"steps.{sid}.execution: one of {list(KINDS)} (got {kind!r})")
    if kind == "auto" and not isinstance(raw.get("handler"), str):
        raise PlanError(f"steps.{sid}.handler: required for an auto step")
    return PlanStep(
        id=sid,
        description=str(raw.get("description") or ""),
        kind=kind,
        depends_on=_str_tuple(raw.get("depends_on"), f"steps.{sid}.depends_on"),
        input_schema=raw.get("input_schema"),
        output_schema=raw.get("output_schema"),
        prompt=raw.get("prompt"),
        instructions=raw.get("instructions"),
        handler=raw.get("handler"),
        config=raw.get("config"),
        abort_unless=_str_tuple(raw.get("abort_unless"), f"steps.{sid}.abort_unless"),
        abort_message=raw.get("abort_message"),
    )


def plan_from_mapping(doc: Mapping[str, Any]) -> Plan:
    """The interpretable subset of a parsed protocol document. Raises PlanError."""
    steps_raw = doc.get("steps")
    if not isinstance(doc.get("id"), str) or not isinstance(steps_raw, dict) or not steps_raw:
        raise PlanError("a protocol needs an `id` and a non-empty `steps` map")
    steps = tuple(_step(str(sid), raw) for sid, raw in steps_raw.items())
    ids = {s.id for s in steps}
    for s in steps:
        missing = [d for d in s.depends_on if d not in ids]
        if missing:
            raise PlanError(f"steps.{s.id}.depends_on: no step {missing}")
    protocol = doc.get("protocol") or {}
    return Plan(
        id=doc["id"],
        name=str(doc.get("name") or doc["id"]),
        version=doc.get("version", 1),
        steps=_ordered(steps),
        description=doc.get("description"),
        params_schema=doc.get("params_schema"),
        quick_start=protocol.get("quick_start"),
        rules=_str_tuple(protocol.get("rules"), "protocol.rules"),
    )


def _ordered(steps: tuple[PlanStep, ...]) -> tuple[PlanStep, ...]:
    """Steps in dependency order, the file's order among the ready ones (deterministic)."""
    done: list[PlanStep] = []
    left = list(steps)
    while left:
        names = {s.id for s in done}
        ready = next((s for s in left if set(s.depends_on) <= names), None)
        if ready is None:
            raise PlanError(f"steps {[s.id for s in left]} depend on each other in a cycle")
        done.append(ready)
        left.remove(ready)
    return tuple(done)
