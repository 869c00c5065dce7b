"""Answers to open waits, judged from the wait's descriptor alone (runtime/waits.py builds
the descriptor): the form an answer takes, whether it fits its wait, and what it does to the
parked run. Pure: no I/O, and no workflow code, so any server process can admit an answer.

Answers are JSON objects where the kind has a form: an approval's answer carries `decision`
(approve / reject / push_back) beside its named string inputs, and a rejection its `reason`; a
human task's carries `decision` (complete / push_back) beside its form fields. Only those are
the decision's own arguments: for an approve or a push-back, `reason` is an input like any
other. An input named `decision` cannot sit beside the decision, so an answer may also be
written as an envelope, `{"decision": …, "inputs": {…}}` (and a rejection's `reason`), which
holds any input names (`answer_fields`, `decision_answer`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import jsonschema

from tether.runtime.errors import Rejected
from tether.specs.scalar_forms import form_errors

#: The wait kinds answered from outside the run (an `update` or a `child` wait never is).
#: `remote_input`: a question a remote tool's task asks (runtime/remote),
#: answered like a signal against the remote's form and forwarded to the remote.
ANSWERABLE_KINDS: Final = frozenset(
    {"signal", "approval", "human_task", "agent_step", "remote_input"}
)
APPROVAL_DECISIONS: Final = ("approve", "reject", "push_back")
HUMAN_TASK_DECISIONS: Final = ("complete", "push_back")
INPUTS: Final = "inputs"  # an answer's envelope of inputs (module docstring)

#: A wait descriptor's flag: an answer to this wait wakes its run even while other waits it
#: was opened with stay unanswered (`Context.wait_any`); a list of decisions: an answer with
#: one of them does (a DAG's gate or task, on a push-back). Without it, waits opened together
#: keep the run parked until the last of them is answered (`Context.wait_all`).
WAKES_RUN: Final = "wakes_run"
#: A wait descriptor's list of decisions that end its run in the write that delivers them
#: (`reject`: a DAG's gate, whose run does nothing more after a rejection).
ENDS_RUN: Final = "ends_run"


# --- answers of approvals and human tasks (module docstring) ----------------------------------


def is_envelope(response: Any) -> bool:
    """Whether an approval's or human task's answer holds its inputs in an `inputs` object."""
    return isinstance(response, dict) and isinstance(response.get(INPUTS), dict)


def answer_fields(response: dict[str, Any]) -> dict[str, Any]:
    """The inputs an approval's or human task's answer carries: its `inputs` envelope, else
    every member but the decision's own arguments (`decision`, and a rejection's `reason`)."""
    if is_envelope(response):
        return dict(response[INPUTS])
    own = {"decision", "reason"} if response.get("decision") == "reject" else {"decision"}
    return {k: v for k, v in response.items() if k not in own}


def decision_answer(
    decision: str, inputs: Mapping[str, Any] | None = None, reason: str | None = None
) -> dict[str, Any]:
    """The answer a surface sends for a decision with its inputs (and a rejection's reason):
    flat, `decision` beside the inputs, when no input name is taken by it (so equal decisions
    give equal answers whatever surface sent them); else the `inputs` envelope."""
    values = dict(inputs or {})
    answer: dict[str, Any] = {"decision": decision}
    if "decision" in values or is_envelope(values):
        answer[INPUTS] = values
    else:
        answer.update(values)
    if reason is not None:
        answer["reason"] = reason
    return answer


# --- what an answer does to a run parked on several waits --------------------------------------

Effect = Literal["keep", "wake", "end"]


def answer_effect(descriptor: dict[str, Any], response: Any) -> Effect:
    """What an answer does to its parked run beside closing its own wait: it keeps the run
    parked while other waits stay open (`keep`), or wakes it at once (`wake`) when its wait
    says so (`WAKES_RUN`: any answer, or an answer with one of the listed decisions), or
    ends it in the very write that delivers it (`end`: a rejection its wait says ends the
    run, `ENDS_RUN`, after which the run would do nothing more)."""
    decision = response.get("decision") if isinstance(response, dict) else None
    if decision == "reject" and decision in (descriptor.get(ENDS_RUN) or ()):
        return "end"
    wakes = descriptor.get(WAKES_RUN)
    if wakes is True or (isinstance(wakes, list) and decision in wakes):
        return "wake"
    return "keep"


def rejection_error(
    descriptor: dict[str, Any], response: dict[str, Any], by: str | None
) -> dict[str, Any]:
    """The error a run ended by a rejection (`answer_effect` `end`) is stored with: the one
    its workflow would have ended with."""
    reason = response.get("reason")
    return Rejected(str(descriptor.get("name")), reason, by).as_error()


# --- schemas and answer validation (server side, from the descriptor alone) ------------------


def approval_schema(inputs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    decision = {"type": "string", "enum": list(APPROVAL_DECISIONS), "title": "Decision"}
    reason = {"type": "string", "title": "Reason (for reject)"}
    fields_ = {name: {"type": "string", "title": name} for name in inputs}
    if "decision" in fields_:  # it cannot sit beside the decision: the envelope
        props = {"decision": decision, "reason": reason, INPUTS: _inputs_object(fields_)}
    else:
        props = {"decision": decision, "reason": reason, **fields_}
    return {"type": "object", "properties": props, "required": ["decision"]}


def human_task_schema(form: dict[str, Any]) -> dict[str, Any]:
    decision = {
        "type": "string",
        "enum": list(HUMAN_TASK_DECISIONS),
        "default": "complete",
        "title": "Decision",
    }
    fields_ = form.get("properties", {})
    schema: dict[str, Any]
    if "decision" in fields_:  # it cannot sit beside the decision: the envelope
        inner = _inputs_object(fields_, form.get("required"))
        schema = {"type": "object", "properties": {"decision": decision, INPUTS: inner}}
    else:
        schema = {"type": "object", "properties": {"decision": decision, **fields_}}
        if form.get("required"):
            schema["required"] = list(form["required"])
    if "$defs" in form:
        schema["$defs"] = form["$defs"]
    return schema


def _inputs_object(props: dict[str, Any], required: Any = None) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        inner["required"] = list(required)
    return inner


def _schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    if not schema:
        return []
    validator = jsonschema.Draft202012Validator(schema)
    errors = []
    for err in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        errors.append(f"{where}: {err.message}")
    return errors


def validate_answer(descriptor: dict[str, Any], response: Any) -> list[str]:
    """Why `response` cannot answer the wait described by `descriptor` (empty list: it can)."""
    kind = descriptor.get("kind")
    if kind not in ANSWERABLE_KINDS:
        return [f"a {kind} wait is not answered from outside the run"]
    if kind in ("signal", "agent_step", "remote_input"):
        return _schema_errors(descriptor.get("schema") or {}, response)
    if not isinstance(response, dict):
        return ["(root): the answer must be a JSON object"]
    if kind == "approval":
        return _approval_errors(descriptor, response)
    return _human_task_errors(descriptor, response)


def _approval_errors(descriptor: dict[str, Any], response: dict[str, Any]) -> list[str]:
    decision = response.get("decision")
    choices = descriptor.get("choices")  # a protocol gate: its own choices, no inputs
    if choices:
        return [] if decision in choices else [f"decision: must be one of {list(choices)}"]
    if decision not in APPROVAL_DECISIONS:
        return [f"decision: must be one of {list(APPROVAL_DECISIONS)}"]
    envelope = is_envelope(response)
    errors = _envelope_errors(response, {"decision", "reason", INPUTS})
    if (envelope or decision == "reject") and not isinstance(response.get("reason", ""), str):
        errors.append("reason: must be a string")
    # Every input is a string. An approval keeps inputs the gate does not list (Dagu's
    # applyApproval stores each one as an output); a push-back drops them (state.py).
    fields_ = answer_fields(response)
    prefix = f"{INPUTS}/" if envelope else ""
    errors += [
        f"{prefix}{key}: must be a string"
        for key, value in fields_.items()
        if not isinstance(value, str)
    ]
    if decision == "approve":
        errors += [
            f"{prefix}{name}: required to approve"
            for name in descriptor.get("required") or []
            if not str(fields_.get(name, "")).strip()
        ]
    return errors


def _envelope_errors(response: dict[str, Any], allowed: set[str]) -> list[str]:
    """An envelope holds the inputs: beside it only the decision's own arguments."""
    if not is_envelope(response):
        return []
    return [f"{key}: not allowed beside {INPUTS}" for key in response if key not in allowed]


def _human_task_errors(descriptor: dict[str, Any], response: dict[str, Any]) -> list[str]:
    decision = response.get("decision", "complete")
    if decision not in HUMAN_TASK_DECISIONS:
        return [f"decision: must be one of {list(HUMAN_TASK_DECISIONS)}"]
    if errors := _envelope_errors(response, {"decision", INPUTS}):
        return errors
    fields_ = answer_fields(response)
    schema = descriptor.get("form") if decision == "complete" else descriptor.get("feedback")
    if descriptor.get("rules") == "scalar":  # a DAG's flat form: the scalar rules, no coercion
        if schema is None:
            return ["decision: this task cannot be pushed back"]
        return form_errors(schema, fields_)
    return _schema_errors(schema or {}, fields_)
