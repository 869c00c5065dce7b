"""The tools/list entries of `dagu_execute` and `dagu_read` (their names come from settings)."""

from __future__ import annotations

from typing import Any, Final

from tether.tools.annotations import READ_ONLY
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
    "action": "What to do: launch a DAG, act on a run, or answer a step that asks a person.",
    "targetType": (
        "What the call acts on: a stored DAG, the YAML in spec, or an existing run. "
        "Usually left out: spec implies inline_spec, the run actions imply run."
    ),
    "name": "The DAG's name; for YAML in spec, the name its runs are filed under.",
    "spec": "DAG YAML to run without storing it first (start and enqueue).",
    "dagRunId": (
        "Which run to act on (retry, stop and the decisions); for start and enqueue, "
        "an id of your choosing for the new run."
    ),
    "params": (
        "Parameters for the new run: a params string such as 'A B NAME=value', or an "
        "object of names to values (passed on as compact JSON)."
    ),
    "queue": "Place the run on this queue instead of the DAG's own (enqueue).",
    "singleton": (
        "Refuse if the DAG already has a run in progress (start), or one in progress "
        "or waiting in its queue (enqueue)."
    ),
    "noReuse": "Taken for compatibility and ignored: Tether keeps no build results to reuse.",
    "profile": "Name of a runtime profile that applies to this run alone.",
    "labels": "Extra labels for the run: 'key=value', or a bare key.",
    "stepName": "For retry, the step to run again from; for a decision, the step that waits.",
    "includeDownstream": "With stepName on retry: also run again every step that follows from it.",
    "subDAGRunId": "When the waiting step belongs to a child run that dagRunId started: its id.",
    "inputs": (
        "Answers for the waiting step: strings for an approval, the form's fields for a human task."
    ),
    "reason": "Why the step is rejected; kept with the decision.",
    "attemptId": (
        "The attemptId read from the run detail; a decision made against an older "
        "attempt is refused as a conflict."
    ),
    "wait": (
        "Hold the call until the run finishes or pauses for a person's decision (or the "
        "wait times out), and include the run's detail."
    ),
    "waitTimeoutSeconds": (
        f"Stop waiting after this many seconds (1-{MAX_WAIT_S}, default 60); only with wait."
    ),
}
MUTATING: Final = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}


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
            "Drive DAG runs: launch a DAG, from the store or as YAML in spec, now (start) or "
            "through a queue (enqueue), repeat a run (retry), end one (stop), or answer a step "
            "that asks a person (approve, reject, push_back). With wait, the same call "
            "returns the outcome. A refusal is an isError result; branch on its `code`."
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
            "Fetch a dagu:// resource: dagu://dags lists the DAGs, dagu://dags/{name} "
            "holds one DAG's YAML, dagu://runs/{name}/{dagRunId} shows a run (its "
            "attemptId, and the prompt and form of any step that asks a person), and "
            "that URI plus /logs gives each step's output."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "uri": {"type": "string", "description": "The dagu:// address to read."}
            },
            "required": ["uri"],
            "additionalProperties": False,
        },
        "annotations": dict(READ_ONLY),
    }
