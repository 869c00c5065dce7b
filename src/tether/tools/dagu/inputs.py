"""`dagu_execute` input (pure): which fields the tool takes, as data, and one function that
checks an arguments object against them.

Each rule is a row of `FIELDS` or a step of `parse`, checked in this order: unknown fields,
types, null = absent, trimming (not `spec`), empty after trim = absent, known `action` /
`targetType` values, fields valid only for some actions (refused even when `false` or `[]`),
required fields, `includeDownstream` needs `stepName`, `waitTimeoutSeconds` needs `wait` and
lies in 1-300 (default 60), object `params` canonicalized to compact JSON; then an inline
spec's `name`, which names a new DAG, follows Dagu's DAG-name rule. A refusal is
`InputError(field, message)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

import orjson

from tether.specs.dag.loader import dag_name_problem
from tether.specs.limits import SpecLimits, json_over_depth, too_deep

Action = Literal["start", "enqueue", "retry", "stop", "approve", "reject", "push_back"]
TargetType = Literal["dag", "inline_spec", "run"]

ACTIONS: Final = ("start", "enqueue", "retry", "stop", "approve", "reject", "push_back")
TARGET_TYPES: Final = ("dag", "inline_spec", "run")
STARTS: Final = frozenset({"start", "enqueue"})
RUN_ACTIONS: Final = frozenset({"retry", "stop", "approve", "reject", "push_back"})
DECISIONS: Final = frozenset({"approve", "reject", "push_back"})
ALL: Final = frozenset(ACTIONS)

DEFAULT_WAIT_S: Final = 60
MAX_WAIT_S: Final = 300
RUN_ID: Final = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")


@dataclass(frozen=True)
class Rule:
    """One input field: its JSON type and the actions that accept it."""

    type: Literal["string", "boolean", "integer", "object", "string_or_object", "string_array"]
    actions: frozenset[str]
    trim: bool = True


#: Every input field → its type and the actions it is valid for.
FIELDS: Final[Mapping[str, Rule]] = MappingProxyType(
    {
        "action": Rule("string", ALL),
        "targetType": Rule("string", ALL),
        "name": Rule("string", ALL),
        "spec": Rule("string", STARTS, trim=False),
        "dagRunId": Rule("string", ALL),
        "params": Rule("string_or_object", STARTS),
        "queue": Rule("string", frozenset({"enqueue"})),
        "singleton": Rule("boolean", STARTS),
        "noReuse": Rule("boolean", STARTS),
        "profile": Rule("string", STARTS),
        "labels": Rule("string_array", STARTS),
        "stepName": Rule("string", frozenset({"retry"}) | DECISIONS),
        "includeDownstream": Rule("boolean", frozenset({"retry"})),
        "subDAGRunId": Rule("string", DECISIONS),
        "inputs": Rule("object", frozenset({"approve", "push_back"})),
        "reason": Rule("string", frozenset({"reject"})),
        "attemptId": Rule("string", DECISIONS),
        "wait": Rule("boolean", ALL),
        "waitTimeoutSeconds": Rule("integer", ALL),
    }
)


class InputError(Exception):
    """The input breaks a rule; `field` names the one field that caused it."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ExecuteInput:
    action: Action
    target_type: TargetType
    name: str
    spec: str | None = None
    dag_run_id: str | None = None
    params: str | None = None  # a Dagu params string, or an object's compact JSON
    queue: str | None = None
    singleton: bool = False
    no_reuse: bool = False
    profile: str | None = None
    labels: tuple[str, ...] = ()
    step_name: str | None = None
    include_downstream: bool = False
    sub_dag_run_id: str | None = None
    inputs: Mapping[str, Any] | None = None
    reason: str | None = None
    attempt_id: str | None = None
    wait: bool = False
    wait_timeout_s: int = DEFAULT_WAIT_S


def _typed(field: str, rule: Rule, value: Any) -> Any:
    """The value checked against its type, trimmed; None when it counts as absent."""
    kind = rule.type
    if kind == "string" or (kind == "string_or_object" and isinstance(value, str)):
        if not isinstance(value, str):
            raise InputError(field, f"The {field} field must be a string.")
        text = value.strip() if rule.trim else value
        return None if not text or text.isspace() else text  # no copy of a large `spec`
    if kind == "string_or_object":
        if not isinstance(value, dict):
            raise InputError(field, f"The {field} field must be a string or an object.")
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    if kind == "boolean":
        if not isinstance(value, bool):
            raise InputError(field, f"The {field} field must be a boolean.")
        return value
    if kind == "integer":
        integral = isinstance(value, float) and value.is_integer()
        if isinstance(value, bool) or not (isinstance(value, int) or integral):
            raise InputError(field, f"The {field} field must be an integer.")
        return int(value)
    if kind == "object":
        if not isinstance(value, dict):
            raise InputError(field, f"The {field} field must be a JSON object.")
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(field, f"The {field} field must be an array of strings.")
    items = [v.strip() for v in value]
    if any(not v for v in items):
        raise InputError(field, f"The {field} field must not hold an empty label.")
    return tuple(items)


def _present(args: Mapping[str, Any], limits: SpecLimits) -> dict[str, Any]:
    """Unknown fields refused; types checked; null, and strings empty after trim, dropped;
    an object nested deeper than the limit refused before anything walks it."""
    out: dict[str, Any] = {}
    for field, value in args.items():
        rule = FIELDS.get(field)
        if rule is None:
            raise InputError(field, f"The {field} field is not supported.")
        if value is None:
            continue
        if isinstance(value, dict) and json_over_depth(value, limits):
            raise InputError(field, f"The {field} field: {too_deep(limits)}.")
        typed = _typed(field, rule, value)
        if typed is not None:
            out[field] = typed
    return out


def _target_type(action: str, given: dict[str, Any]) -> TargetType:
    target = given.get("targetType")
    if target is not None and target not in TARGET_TYPES:
        raise InputError("targetType", f"Unknown targetType {target!r}; use one of {TARGET_TYPES}.")
    if action in RUN_ACTIONS:
        if target not in (None, "run"):
            raise InputError("targetType", f"The {action} action requires targetType run.")
        return "run"
    if target == "run":
        raise InputError("targetType", f"targetType run is not valid for the {action} action.")
    if target is None:
        target = "inline_spec" if "spec" in given else "dag"
    if target == "inline_spec" and "spec" not in given:
        raise InputError("spec", "The spec field is required for targetType inline_spec.")
    if target == "dag" and "spec" in given:
        raise InputError("spec", "The spec field is valid only for targetType inline_spec.")
    return target  # type: ignore[return-value]  # checked against TARGET_TYPES above


def _require(given: dict[str, Any], field: str, action: str) -> None:
    if field not in given:
        raise InputError(field, f"The {field} field is required.")


def _check_rules(action: str, given: dict[str, Any]) -> None:
    for field in given:
        if action not in FIELDS[field].actions:
            raise InputError(field, f"The {field} field is not valid for the {action} action.")
    _require(given, "name", action)
    if action in RUN_ACTIONS:
        _require(given, "dagRunId", action)
    if action in DECISIONS:
        _require(given, "stepName", action)
    if "includeDownstream" in given and "stepName" not in given:
        # As Dagu does, the refusal names the missing stepName, not includeDownstream.
        raise InputError("stepName", "The includeDownstream field requires stepName.")
    for field in ("dagRunId", "subDAGRunId"):
        if field in given and not RUN_ID.match(given[field]):
            raise InputError(field, f"The {field} field must match ^[-a-zA-Z0-9_]+$ (<= 64).")
    if "waitTimeoutSeconds" in given:
        if given.get("wait") is not True:
            raise InputError("waitTimeoutSeconds", "The waitTimeoutSeconds field requires wait.")
        if not 1 <= given["waitTimeoutSeconds"] <= MAX_WAIT_S:
            raise InputError(
                "waitTimeoutSeconds", f"The waitTimeoutSeconds field must be 1-{MAX_WAIT_S}."
            )


def parse(args: Any, limits: SpecLimits | None = None) -> ExecuteInput:
    """The checked input of one call; `limits`' depth bounds its objects (`params`,
    `inputs`). Raises InputError naming the field at fault."""
    if not isinstance(args, Mapping):
        raise InputError(None, "The tool input must be a JSON object.")
    given = _present(args, limits or SpecLimits())
    action = given.get("action")
    if action is None:
        raise InputError("action", "The action field is required.")
    if action not in ACTIONS:
        raise InputError("action", f"Unknown action {action!r}; use one of {ACTIONS}.")
    target = _target_type(action, given)
    _check_rules(action, given)
    if target == "inline_spec" and (problem := dag_name_problem(given["name"])):
        raise InputError("name", f"The name field: {problem}.")
    return ExecuteInput(
        action=action,
        target_type=target,
        name=given["name"],
        spec=given.get("spec"),
        dag_run_id=given.get("dagRunId"),
        params=given.get("params"),
        queue=given.get("queue"),
        singleton=given.get("singleton", False),
        no_reuse=given.get("noReuse", False),
        profile=given.get("profile"),
        labels=given.get("labels", ()),
        step_name=given.get("stepName"),
        include_downstream=given.get("includeDownstream", False),
        sub_dag_run_id=given.get("subDAGRunId"),
        inputs=given.get("inputs"),
        reason=given.get("reason"),
        attempt_id=given.get("attemptId"),
        wait=given.get("wait", False),
        wait_timeout_s=given.get("waitTimeoutSeconds", DEFAULT_WAIT_S),
    )


def partial(args: Any) -> dict[str, Any]:
    """What an error result may echo of a refused input (action, targetType, dagName,
    dagRunId), read leniently: only well-typed strings. A known action without a
    `targetType` echoes the one it defaults to, as Dagu's errors do."""
    if not isinstance(args, Mapping):
        return {}
    out = {}
    for field, key in (("action", "action"), ("targetType", "targetType"), ("name", "dagName")):
        value = args.get(field)
        if isinstance(value, str) and value.strip():
            out[key] = value.strip()
    if out.get("targetType") not in (None, *TARGET_TYPES):
        del out["targetType"]  # an unknown value is the error itself, not a target type
    elif "targetType" not in out and out.get("action") in ACTIONS:
        out["targetType"] = _default_target(out["action"], args.get("spec"))
    run_id = args.get("dagRunId")
    if isinstance(run_id, str) and run_id.strip():
        out["dagRunId"] = run_id.strip()
    return out


def _default_target(action: str, spec: Any) -> TargetType:
    if action in RUN_ACTIONS:
        return "run"
    return "inline_spec" if isinstance(spec, str) and spec and not spec.isspace() else "dag"
