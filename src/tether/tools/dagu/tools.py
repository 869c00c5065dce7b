"""The tools/list entries of `dagu_execute` and `dagu_read` (their names come from settings)."""

from __future__ import annotations

from typing import Any, Final

from tether.tools.dagu.inputs import ACTIONS, FIELDS, MAX_WAIT_S, TARGET_TYPES

_JSON_TYPES: Final[dict[str, dict[str, Any]]] = {
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "integer": {"type": "integer"},
    "object": {"type": "object"},
    "string_or_object": {"type": ["string", "object"]},
    "string_array": {"type": "array", "items": {"type": "string"}},
}
_DESCRIPTIONS: Final = {
    "action": "Execution action.",
    "targetType": "dag (default), inline_spec (when spec is given) or run (run actions).",
    "name": "DAG name, including the identity used for inline runs.",
    "spec": "Inline DAG YAML for start and enqueue (targetType inline_spec).",
    "dagRunId": "DAG-run id: required for run actions; an override for start and enqueue.",
    "params": "Runtime parameters (start, enqueue); an object is sent as compact JSON.",
    "queue": "Queue override (enqueue).",
    "singleton": "Refuse when a run is already running (start) or running or queued (enqueue).",
    "noReuse": "Execute build steps without reusing results (accepted; Tether reuses none).",
    "profile": "Runtime profile for this run only.",
    "labels": "Additional labels, key=value or key-only.",
    "stepName": "Step to retry, or the waiting step to decide.",
    "includeDownstream": "Retry the step and every reachable descendant (needs stepName).",
    "subDAGRunId": "Sub-DAG run of dagRunId that owns the waiting step.",
    "inputs": "Values for the waiting step (approval inputs are strings).",
    "reason": "Reason recorded with a rejection.",
    "attemptId": "The attempt the decision is based on (read it from the run detail).",
    "wait": "Wait for the identified run to end or stop at a waiting checkpoint.",
    "waitTimeoutSeconds": f"Maximum wait, 1-{MAX_WAIT_S} seconds (default 60); needs wait.",
}
MUTATING: Final = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}
READ_ONLY: Final = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}


def execute_definition(name: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for field, rule in FIELDS.items():
        prop = dict(_JSON_TYPES[rule.type])
        prop["description"] = _DESCRIPTIONS[field]
        props[field] = prop
    props["action"]["enum"] = list(ACTIONS)
    props["targetType"]["enum"] = list(TARGET_TYPES)
    props["waitTimeoutSeconds"].update(minimum=1, maximum=MAX_WAIT_S, default=60)
    return {
        "name": name,
        "description": (
            "Start, enqueue, retry or stop DAG-runs, decide steps waiting for a person "
            "(approve, reject, push_back), and optionally wait for the run's result. "
            "Errors are isError results whose structured content has a `code` to branch on."
        ),
        "inputSchema": {
            "type": "object",
            "properties": props,
            "required": ["action", "name"],
            "additionalProperties": False,
        },
        "annotations": dict(MUTATING),
    }


def read_definition(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": (
            "Read DAGs and DAG-runs by URI: dagu://dags (the DAG list), dagu://dags/{name} "
            "(a DAG's spec), dagu://runs/{name}/{dagRunId} (the run detail, with attemptId "
            "and waiting steps' prompts and forms), …/logs (per-step output)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "A dagu:// URI"}},
            "required": ["uri"],
            "additionalProperties": False,
        },
        "annotations": dict(READ_ONLY),
    }
