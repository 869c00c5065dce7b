"""Protocol workflows: a strict subset of Realm's workflow YAML, parsed into frozen data.

Module path: `tether.specs.realm` (pure data; imports no tether package outside `tether.specs`).

Data model (`tether.specs.realm.model`, all frozen dataclasses):
- `WorkflowSpec(id, name, version, steps: Mapping[str, Step], order, finalizers, description,
  params_schema: Schema | None, protocol: Protocol, extensions, file, source)`
- `Step(id, execution: agent|auto|guard|finalizer, description, line, depends_on, trigger_rule,
  when, preconditions, prompt, instructions, input_schema, output_schema, exhaustion:
  ValidationExhaustion | None, trace_schema, trace_validation_mode, llm_timeout_seconds,
  structured_output, handler, input_map, config, timeout_seconds, retry: Retry | None,
  idempotent, trust, gate: Gate | None, display, abort_unless, abort_message, on_outcome)`
- `Gate(choices, choices_source, message, owner, resolution_messages, timeout_seconds,
  on_expiry, default_choice, reminder_seconds, reminder_max)`
- `Retry`, `ValidationExhaustion`, `Protocol`, `Condition(text, field, path: ConditionPath,
  op, value)`, `ConditionPath(root, step, keys, text)`, `Settlement`, `Diagnostic`.
- `Schema(document)` and `Violation` (`tether.specs.realm.schemas`); `validate_payload`.

Loading (`loader`): `load_file(path) -> (WorkflowSpec, list[Diagnostic])`,
`load_string(text, file=...) -> (WorkflowSpec, list[Diagnostic])`; refusals raise
`RealmSpecError` (`.field`, `.path`, `.file`, `.line`).
`create_workflow` (`plans`): `plan_workflow(arguments) -> (WorkflowSpec, list[Diagnostic])`
(agent steps only; dropped fields as diagnostics; id = name + content hash).
Conditions (`conditions`): `parse_condition(text, field)`, `evaluate(condition, context)`
(`ConditionContext(outputs, params, settlements)`; raises `ConditionUnresolved` only for
`abort_unless`), `resolve(path, context)` (the value, or `MISSING`) for "Resolved value: …".
Order (`graph`): `ready_steps(spec, Progress(completed, failed, skipped, active, context))
-> Readiness(ready, skipped: tuple[Skip(step, reason, detail)])`, `upstream_verdict`,
`finalizers_for(spec, outcome)`.
`schema.json` beside this module publishes the subset as a JSON Schema.
"""

from __future__ import annotations

from tether.specs.realm.conditions import (
    ConditionContext,
    ConditionSyntaxError,
    ConditionUnresolved,
    evaluate,
    explain,
    parse_condition,
    resolve,
)
from tether.specs.realm.errors import (
    InvalidReference,
    InvalidValue,
    InvalidYaml,
    LimitExceeded,
    RealmSpecError,
    UnknownField,
)
from tether.specs.realm.graph import (
    Progress,
    Readiness,
    Skip,
    finalizers_for,
    ready_steps,
    upstream_verdict,
)
from tether.specs.realm.loader import load_file, load_string
from tether.specs.realm.model import (
    Condition,
    ConditionPath,
    Diagnostic,
    Gate,
    Protocol,
    Retry,
    Settlement,
    Step,
    ValidationExhaustion,
    WorkflowSpec,
)
from tether.specs.realm.plans import plan_workflow
from tether.specs.realm.schemas import Schema, Violation, check_schema, validate_payload

__all__ = [
    "Condition",
    "ConditionContext",
    "ConditionPath",
    "ConditionSyntaxError",
    "ConditionUnresolved",
    "Diagnostic",
    "Gate",
    "InvalidReference",
    "InvalidValue",
    "InvalidYaml",
    "LimitExceeded",
    "Progress",
    "Protocol",
    "Readiness",
    "RealmSpecError",
    "Retry",
    "Schema",
    "Settlement",
    "Skip",
    "Step",
    "UnknownField",
    "ValidationExhaustion",
    "Violation",
    "WorkflowSpec",
    "check_schema",
    "evaluate",
    "explain",
    "finalizers_for",
    "load_file",
    "load_string",
    "parse_condition",
    "plan_workflow",
    "ready_steps",
    "resolve",
    "upstream_verdict",
    "validate_payload",
]
