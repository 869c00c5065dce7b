"""One step of a protocol workflow: which fields each kind takes, and their parsing.

`KINDS[field]` says, per kind (auto, agent, guard, finalizer), whether a field is used (`y`),
refused (`n`), or accepted without effect (`-`, reported as a diagnostic).
`OUTSIDE` lists the format's step fields that Tether does not support; they are refused by
name.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, cast

import yaml

from tether.specs.realm.blocks import Report, note, parse_exhaustion, parse_gate, parse_retry
from tether.specs.realm.blocks import schema as parse_schema
from tether.specs.realm.conditions import ConditionSyntaxError, parse_condition
from tether.specs.realm.errors import InvalidReference, UnknownField
from tether.specs.realm.model import (
    Condition,
    ConditionField,
    Execution,
    Outcome,
    Step,
    TriggerRule,
)
from tether.specs.realm.nodes import (
    At,
    Fields,
    boolean,
    choice,
    items,
    mapping,
    nonblank,
    positive,
    string,
)

EXECUTIONS: Final[tuple[Execution, ...]] = ("auto", "agent", "guard", "finalizer")
TRIGGER_RULES: Final[tuple[TriggerRule, ...]] = (
    "all_success", "all_failed", "all_done", "one_failed", "one_success", "none_failed",
)  # fmt: skip
OUTCOMES: Final[tuple[Outcome, ...]] = (
    "complete", "fail", "abort", "always", "completed_with_failed_steps",
)  # fmt: skip
#                      auto agent guard finalizer
KINDS: Final = {
    "depends_on": "yyyn",
    "trigger_rule": "yynn",
    "when": "yyyn",
    "preconditions": "yyn-",
    "input_map": "ynnn",
    "handler": "yyny",  # on agent: outside the subset (refused by name in parse_step)
    "config": "y--y",
    "timeout_seconds": "ynny",
    "idempotent": "ynnn",
    "retry": "y--n",
    "prompt": "yy--",
    "instructions": "yy--",
    "input_schema": "yyn-",
    "output_schema": "nynn",
    "structured_output": "nynn",
    "validation_exhaustion": "nynn",
    "llm_timeout_seconds": "nynn",
    "trace_schema": "nynn",
    "trace_validation_mode": "nynn",
    "trust": "yynn",
    "gate": "yy--",
    "display": "yy--",
    "abort_unless": "nnyn",
    "abort_message": "nnyn",
    "on_outcome": "nnny",
}
OUTSIDE: Final = {
    "use_template": "templates: write the steps out",
    "uses_service": "services: use an auto step's `handler`",
    "service_method": "services: use an auto step's `handler`",
    "operation": "services: use an auto step's `handler`",
    "agent_profile": "agent profiles: use `instructions`",
    "tools": "`realm agent` tool servers",
    "max_tool_calls": "`realm agent` tool limits",
    "max_fan_out": "`realm agent` tool limits",
    "tool_timeout": "`realm agent` tool limits",
}
SERVICE_TRUST: Final = ("engine_delivered", "engine_managed", "agent_provided")
_ID_BAD: Final = frozenset(" \t\n.'\"=!<>")


def check_id(step_id: str, at: At) -> None:
    """A step id is usable in condition paths and is not reserved."""
    if step_id in ("run", "context", "$settlement"):
        at.fail(
            f"step name {step_id!r} is reserved: conditions use it as a path root", InvalidReference
        )
    if not step_id or _ID_BAD & set(step_id):
        at.fail("a step name must be non-empty, without spaces, dots, quotes or = ! < >")


def parse_step(step_id: str, node: yaml.Node, at: At, ids: frozenset[str], report: Report) -> Step:
    """The step `step_id` of a workflow whose step names are `ids`."""
    fields = Fields(node, at)
    for name, hint in OUTSIDE.items():
        if taken := fields.take(name):
            taken[1].fail(f"field {name!r} is outside Tether's subset of Realm's format "
                          f"({hint})", UnknownField)  # fmt: skip
    description = fields.take("description") or at.fail("missing required field 'description'")
    execution_f = fields.take("execution") or at.fail("missing required field 'execution'")
    kind = cast(Execution, choice(*execution_f, EXECUTIONS))
    column = EXECUTIONS.index(kind)
    got: dict[str, tuple[yaml.Node, At]] = {}
    for name, uses in KINDS.items():
        if (taken := fields.take(name)) is None:
            continue
        if uses[column] == "n":
            taken[1].fail(f"{name!r} is not allowed on execution: {kind} steps")
        if uses[column] == "-":
            note(report, "inert_field", f"{name!r} has no effect on {kind} steps", taken[1])
            continue
        got[name] = taken
    if kind == "agent" and (taken := got.get("handler")):
        why = "in the format an agent step's handler names the tool for next_actions"
        taken[1].fail(f"field 'handler' on an agent step is outside Tether's subset of "
                      f"Realm's format ({why})", UnknownField)  # fmt: skip
    fields.finish()
    return _build(step_id, kind, nonblank(*description), at, got, ids, report)


def _build(
    step_id: str,
    kind: Execution,
    description: str,
    at: At,
    got: Mapping[str, tuple[yaml.Node, At]],
    ids: frozenset[str],
    report: Report,
) -> Step:
    def text(name: str) -> str | None:
        return string(*got[name]) if name in got else None

    def schema_of(name: str) -> object:
        return parse_schema(*got[name]) if name in got else None

    depends = _depends(step_id, *got["depends_on"], ids) if "depends_on" in got else ()
    rule = (
        cast(TriggerRule, choice(*got["trigger_rule"], TRIGGER_RULES))
        if "trigger_rule" in got
        else "all_success"
    )
    fields: dict[str, object] = {
        "depends_on": depends,
        "trigger_rule": rule,
        "prompt": text("prompt"),
        "instructions": text("instructions"),
        "display": text("display"),
        "abort_message": text("abort_message"),
        "input_schema": schema_of("input_schema"),
        "output_schema": schema_of("output_schema"),
        "trace_schema": schema_of("trace_schema"),
        "idempotent": boolean(*got["idempotent"]) if "idempotent" in got else False,
        "timeout_seconds": positive(*got["timeout_seconds"]) if "timeout_seconds" in got else None,
        "input_map": _input_map(got.get("input_map")),
        "config": _plain_map(got.get("config")),
    }
    fields["when"] = _conditions(got.get("when"), "when", depends, rule, ids)
    fields["preconditions"] = _conditions(
        got.get("preconditions"), "preconditions", depends, rule, ids
    )
    fields["abort_unless"] = _conditions(
        got.get("abort_unless"), "abort_unless", depends, rule, ids
    )
    _kind_fields(kind, at, got, fields, report)
    return Step(id=step_id, execution=kind, description=description, line=at.line, **fields)  # type: ignore[arg-type]


def _kind_fields(
    kind: Execution,
    at: At,
    got: Mapping[str, tuple[yaml.Node, At]],
    fields: dict[str, object],
    report: Report,
) -> None:
    """The fields whose parsing depends on the kind or on other fields of the step."""
    if "handler" in got:
        fields["handler"] = nonblank(*got["handler"])
    elif kind == "finalizer":
        at.fail("execution: finalizer requires 'handler'")
    if kind == "guard" and not fields["abort_unless"]:
        at.fail("execution: guard requires 'abort_unless'")
    if kind == "finalizer":
        if "on_outcome" not in got:
            at.fail("execution: finalizer requires 'on_outcome'")
        fields["on_outcome"] = _outcomes(*got["on_outcome"])
    if "retry" in got:
        fields["retry"] = parse_retry(*got["retry"], bool(fields["idempotent"]), report)
        if "timeout_seconds" not in got:
            note(report, "retry_default_timeout", "'retry' without 'timeout_seconds': each "
                 "attempt gets the default limit of 3600s", got["retry"][1])  # fmt: skip
    if kind == "agent":
        _agent_fields(at, got, fields, report)
    trust = _trust(*got["trust"]) if "trust" in got else "auto"
    fields["trust"] = trust
    if trust != "auto":
        gate_node = got["gate"] if "gate" in got else (_null_node(at), at)
        fields["gate"] = parse_gate(*gate_node, fields["input_schema"], report)  # type: ignore[arg-type]
    elif "gate" in got:
        note(report, "gate_inert", "'gate' has no effect: the step's trust is auto, so no "
             "gate opens", got["gate"][1])  # fmt: skip


def _trust(node: yaml.Node, at: At) -> str:
    if isinstance(node, yaml.ScalarNode) and node.value in SERVICE_TRUST:
        at.fail(f"{node.value!r} is a service's trust value; a step's 'trust' is one of "
                "auto, human_confirmed, human_reviewed")  # fmt: skip
    return choice(node, at, ("auto", "human_confirmed", "human_reviewed"))


def _agent_fields(
    at: At, got: Mapping[str, tuple[yaml.Node, At]], fields: dict[str, object], report: Report
) -> None:
    exhaustion = got.get("validation_exhaustion")
    output = fields["output_schema"]
    fields["exhaustion"] = (
        parse_exhaustion(*exhaustion, output, report)  # type: ignore[arg-type]
        if exhaustion
        else parse_exhaustion(_empty_map(at), at, None, report)
    )
    if fields["input_schema"] is not None and output is not None:
        note(report, "two_schemas", "'input_schema' and 'output_schema' are both declared, so "
             "an answer has to fit the two of them; one is usually enough", at)  # fmt: skip
    if "trace_validation_mode" in got:
        fields["trace_validation_mode"] = choice(*got["trace_validation_mode"], ("warn", "enforce"))
    if "llm_timeout_seconds" in got:
        fields["llm_timeout_seconds"] = positive(*got["llm_timeout_seconds"])
    if "structured_output" in got:
        choice(*got["structured_output"], ("strict",))
        fields["structured_output"] = True


def _null_node(at: At) -> yaml.Node:
    mark = yaml.Mark("", 0, at.line - 1, 0, "", 0)
    return yaml.ScalarNode("tag:yaml.org,2002:null", "", mark, mark)


def _empty_map(at: At) -> yaml.Node:
    mark = yaml.Mark("", 0, at.line - 1, 0, "", 0)
    return yaml.MappingNode("tag:yaml.org,2002:map", [], mark, mark)


def _input_map(taken: tuple[yaml.Node, At] | None) -> Mapping[str, object]:
    """Each value a path (text), a nested map (10 deep at most) or `{$literal: value}`
    standing alone; any other `$` key, or a bare list, number or boolean, is refused."""
    if taken is None:
        return MappingProxyType({})
    _check_map(*taken, depth=1)
    return _plain_map(taken)


def _check_map(node: yaml.Node, at: At, depth: int) -> None:
    if not isinstance(node, yaml.MappingNode):
        at.fail("must be a mapping")
    if depth > 10:
        at.fail("input_map nests maps more than 10 deep")
    keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
    if "$literal" in keys and len(keys) > 1:
        at.fail("a map with '$literal' may hold no other key")
    for key, value in node.value:
        where = at.child(value, str(key.value))
        if str(key.value).startswith("$") and key.value != "$literal":
            where.fail(f"input_map key {key.value!r}: '$literal' is the only key that may "
                       "start with '$'")  # fmt: skip
        if key.value == "$literal":
            continue
        if isinstance(value, yaml.MappingNode):
            _check_map(value, where, depth + 1)
        elif not (isinstance(value, yaml.ScalarNode) and value.tag.endswith(":str")):
            kind = "array" if isinstance(value, yaml.SequenceNode) else "a scalar that is not text"
            where.fail(f"input_map key {key.value!r} holds {kind}; give a path (text) or a "
                       "map, or put the value in {$literal: …}")  # fmt: skip


def _plain_map(taken: tuple[yaml.Node, At] | None) -> Mapping[str, object]:
    return MappingProxyType(mapping(*taken)) if taken else MappingProxyType({})


def _depends(step_id: str, node: yaml.Node, at: At, ids: frozenset[str]) -> tuple[str, ...]:
    out: list[str] = []
    for item, item_at in items(node, at):
        name = string(item, item_at)
        if name not in ids:
            item_at.fail(f"depends on unknown step {name!r}", InvalidReference)
        if name == step_id or name in out:
            item_at.fail(f"{name!r} cannot be listed here (self or duplicate)", InvalidReference)
        out.append(name)
    return tuple(out)


def _outcomes(node: yaml.Node, at: At) -> tuple[Outcome, ...]:
    nodes = items(node, at) if isinstance(node, yaml.SequenceNode) else [(node, at)]
    outcomes = tuple(cast(Outcome, choice(n, a, OUTCOMES)) for n, a in nodes)
    if not outcomes:
        at.fail("'on_outcome' must not be empty")
    return outcomes


def _conditions(
    taken: tuple[yaml.Node, At] | None,
    where: ConditionField,
    depends: tuple[str, ...],
    rule: TriggerRule,
    ids: frozenset[str],
) -> tuple[Condition, ...]:
    if taken is None:
        return ()
    node, at = taken
    if where == "preconditions" and not isinstance(node, yaml.SequenceNode):
        at.fail("'preconditions' must be a list of strings")
    nodes = items(node, at) if isinstance(node, yaml.SequenceNode) else [(node, at)]
    if not nodes:
        at.fail(f"{where!r} list must not be empty")
    out = []
    for item, item_at in nodes:
        try:
            condition = parse_condition(string(item, item_at, allow_scalars=True), where)
        except ConditionSyntaxError as exc:
            item_at.fail(str(exc))
        _check_refs(condition, depends, rule, ids, item_at)
        out.append(condition)
    return tuple(out)


def _check_refs(
    condition: Condition,
    depends: tuple[str, ...],
    rule: TriggerRule,
    ids: frozenset[str],
    at: At,
) -> None:
    step = condition.path.step
    if step is None:
        return
    if step not in ids:
        at.fail(f"{condition.text!r} references unknown step {step!r}", InvalidReference)
    if condition.field == "when" and step not in depends:
        at.fail(
            f"'when' reads step {step!r}, which depends_on [{', '.join(depends)}] does not "
            "list: add the step there, or read 'run.params.*' instead",
            InvalidReference,
        )
    never = condition.path.root == "settlement" and condition.path.keys == ("failed",)
    never = never and condition.op == "==" and condition.value is True
    if never and condition.field == "when" and rule in ("all_success", "none_failed"):
        at.fail(
            f"'when' {condition.text!r} cannot hold: under trigger_rule {rule!r} the step is "
            f"skipped once {step!r} fails. To run it after that failure, use trigger_rule "
            "all_done, one_failed or all_failed"
        )
