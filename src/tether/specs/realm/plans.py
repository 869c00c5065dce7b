"""`create_workflow` plans: an agent's list of steps made into a `WorkflowSpec` (pure).

A plan is `{steps: [{id, description, depends_on?, input_schema?, structured_output?,
llm_timeout_seconds?}], metadata?: {name, description, task_description, model, agent}}`.
Every step is an agent step. A field outside that list is left out and reported as a
diagnostic (the tool also puts it in `warnings`). A malformed plan is refused with
`InvalidValue` naming the field (the tool replies `provide_input`, without an `error_code`).
The workflow id is the plan's name plus a hash of its content, so the same plan gets the same id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NoReturn

from tether.specs.limits import (
    MAX_BYTES_SETTING,
    MAX_DEPTH_SETTING,
    MAX_STEPS_SETTING,
    SpecLimits,
    json_over_depth,
    over_bytes,
    over_steps,
    too_deep,
)
from tether.specs.realm.errors import InvalidValue, LimitExceeded, RealmSpecError, UnknownField
from tether.specs.realm.model import Diagnostic, Protocol, Step, ValidationExhaustion, WorkflowSpec
from tether.specs.realm.nodes import At
from tether.specs.realm.schemas import Schema, check_schema
from tether.specs.realm.steps import check_id

PLAN_FILE: Final = "<create_workflow>"
STEP_KEYS: Final = (
    "id", "description", "depends_on", "input_schema", "structured_output", "llm_timeout_seconds",
)  # fmt: skip
METADATA_KEYS: Final = ("name", "description", "task_description", "model", "agent")
DYNAMIC_PREFIX: Final = "dynamic"


def _fail(path: str, reason: str, kind: type[RealmSpecError] = InvalidValue) -> NoReturn:
    field = path.rsplit(".", 1)[-1].split("[", 1)[0]
    raise kind(reason, field=field, path=path, file=PLAN_FILE, line=0)


def _note(report: list[Diagnostic], code: str, path: str, message: str) -> None:
    report.append(Diagnostic(code, message, path, 0))


def plan_workflow(
    arguments: Mapping[str, object], limits: SpecLimits | None = None
) -> tuple[WorkflowSpec, list[Diagnostic]]:
    """The workflow a `create_workflow` call describes, and what was left out of it.

    `limits`: checked first (depth, then the step count, then the size as compact JSON).

    Raises:
        InvalidValue: the plan is malformed (no steps, a duplicate id, a bad reference or
            schema); UnknownField: it names `extensions`; LimitExceeded: it is over `limits`.
    """
    if limits is not None:
        check_limits(arguments, limits)
    report: list[Diagnostic] = []
    if "extensions" in arguments:
        _fail("extensions", "create_workflow takes no 'extensions': the steps of a created "
              "workflow are all agent steps", UnknownField)  # fmt: skip
    for key in arguments:
        if key not in ("steps", "metadata"):
            _note(report, "unknown_plan_key", key, _ignored_top(key))
    metadata = _metadata(arguments.get("metadata"), report)
    raw = arguments.get("steps")
    if not isinstance(raw, list) or not raw:
        _fail("steps", "'steps' must list at least one step")
    steps: dict[str, Step] = {}
    every = {str(s.get("id")) for s in raw if isinstance(s, dict)}
    for index, item in enumerate(raw):
        step = _step(item, f"steps[{index}]", steps, every, report)
        steps[step.id] = step
    name = metadata.get("name")
    workflow_id = f"{name or DYNAMIC_PREFIX}-{_digest(metadata, raw)}"
    spec = WorkflowSpec(
        id=workflow_id,
        name=name or workflow_id,
        version=1,
        steps=MappingProxyType(steps),
        order=tuple(steps),
        description=metadata.get("description"),
        protocol=Protocol(quick_start=metadata.get("task_description") or None),
        file=PLAN_FILE,
        source=json.dumps(dict(arguments), sort_keys=True, default=str),
    )
    return spec, report


def check_limits(arguments: Mapping[str, object], limits: SpecLimits) -> None:
    """Refuse a plan over `limits`, cheapest check first, each before the next one's work.

    Raises:
        LimitExceeded: naming the setting and its value.
    """
    if json_over_depth(dict(arguments), limits):
        raise LimitExceeded(
            too_deep(limits), setting=MAX_DEPTH_SETTING, maximum=limits.max_depth,
            file=PLAN_FILE, line=0,
        )  # fmt: skip
    steps = arguments.get("steps")
    if isinstance(steps, list) and (why := over_steps(len(steps), limits)):
        raise LimitExceeded(
            why, setting=MAX_STEPS_SETTING, maximum=limits.max_steps, field="steps",
            path="steps", file=PLAN_FILE, line=0,
        )  # fmt: skip
    text = json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False, default=str)
    if why := over_bytes(text, limits):
        raise LimitExceeded(
            why.replace("the document", "the plan (as compact JSON)"),
            setting=MAX_BYTES_SETTING, maximum=limits.max_bytes, file=PLAN_FILE, line=0,
        )  # fmt: skip


def _ignored_top(key: str) -> str:
    if key == "workflow_id":
        return ("'workflow_id' is ignored: create_workflow makes the id itself and returns it "
                "in data.workflow_id.")  # fmt: skip
    if key in METADATA_KEYS:
        return (f"'{key}' is ignored at the top level; it goes under metadata "
                f"(metadata.{key}).")  # fmt: skip
    return f"create_workflow takes no field '{key}'; it is ignored."


def _metadata(raw: object, report: list[Diagnostic]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        _fail("metadata", "must be an object")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key not in METADATA_KEYS:
            _note(report, "unknown_plan_key", f"metadata.{key}",
                  f"metadata takes no field '{key}'; it is ignored.")  # fmt: skip
        elif value is not None and not isinstance(value, str):
            _fail(f"metadata.{key}", "must be a string")
        elif value:
            out[key] = value
    if "/" in out.get("name", ""):
        _fail("metadata.name", "a workflow name must not contain '/'")
    return out


def _at(path: str) -> At:
    return At(PLAN_FILE, 0, path, path.rsplit(".", 1)[-1])


def _step(
    raw: object,
    path: str,
    earlier: Mapping[str, Step],
    every: set[str],
    report: list[Diagnostic],
) -> Step:
    if not isinstance(raw, dict):
        _fail(path, "a step must be an object")
    for key in raw:
        if key == "timeout_seconds":
            _note(report, "removed_field", f"{path}.{key}", "'timeout_seconds' is ignored: no "
                  "time limit applies to an agent step here; 'llm_timeout_seconds' bounds a "
                  "model request.")  # fmt: skip
        elif key not in STEP_KEYS:
            _note(report, "unknown_step_key", f"{path}.{key}", f"step '{raw.get('id')}' takes "
                  f"no field '{key}'; it is ignored.")  # fmt: skip
    step_id = _text(raw.get("id"), f"{path}.id")
    check_id(step_id, _at(f"{path}.id"))
    if step_id in earlier:
        _fail(f"{path}.id", f"step id '{step_id}' is used twice")
    depends = _depends(raw.get("depends_on"), f"{path}.depends_on", step_id, earlier, every)
    schema = None
    if (document := raw.get("input_schema")) is not None:
        if (why := check_schema(document)) is not None:
            _fail(f"{path}.input_schema", f"'input_schema' is not a usable JSON Schema: {why}")
        schema = Schema(document)
    return Step(
        id=step_id,
        execution="agent",
        description=_text(raw.get("description"), f"{path}.description"),
        depends_on=depends,
        input_schema=schema,
        exhaustion=ValidationExhaustion(),
        structured_output=_strict(raw.get("structured_output"), f"{path}.structured_output"),
        llm_timeout_seconds=_seconds(raw.get("llm_timeout_seconds"), f"{path}.llm_timeout_seconds"),
    )


def _text(value: object, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(path, "required: a non-empty string")
    return value


def _depends(
    value: object, path: str, step_id: str, earlier: Mapping[str, Step], every: set[str]
) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _fail(path, "must be a list of step ids")
    for name in value:
        if name not in every:
            _fail(path, f"step '{step_id}': depends_on names '{name}', which is not in the plan")
        if name == step_id or name not in earlier:
            _fail(path, f"step '{step_id}': depends_on may name only steps listed before it")
    if len(set(value)) != len(value):
        _fail(path, f"step '{step_id}': depends_on names a step twice")
    return tuple(value)


def _strict(value: object, path: str) -> bool:
    if value is None:
        return False
    if value != "strict":
        _fail(path, "must be 'strict'")
    return True


def _seconds(value: object, path: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        _fail(path, "must be a positive integer")
    return value


def _digest(metadata: Mapping[str, str], steps: list[object]) -> str:
    """16 hex digits of SHA-256 over the plan's accepted content (canonical JSON)."""
    kept = [{k: v for k, v in s.items() if k in STEP_KEYS} for s in steps if isinstance(s, dict)]
    meta = {k: v for k, v in metadata.items() if k in ("name", "description", "task_description")}
    canonical = json.dumps({"metadata": meta, "steps": kept}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
