"""Waits: one abstraction for every "needs input" case (docs/architecture.md). Pure: no I/O.

A wait spec is what workflow code asks for; its *descriptor* (a JSON object written to the
run's `waits` column when it parks) is what every surface sees and what answers are checked
against, so the server that admits an answer needs no workflow code to validate it.

Answers are JSON objects where the kind has a form: an approval's answer carries `decision`
(approve / reject / push_back) beside its named string inputs, and a rejection its `reason`; a
human task's carries `decision` (complete / push_back) beside its form fields. Only those are
the decision's own arguments: for an approve or a push-back, `reason` is an input like any
other. An input named `decision` cannot sit beside the decision, so an answer may also be
written as an envelope, `{"decision": …, "inputs": {…}}` (and a rejection's `reason`), which
holds any input names (`answer_fields`, `decision_answer`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

import jsonschema
from pydantic import BaseModel, ValidationError

from tether.runtime import votes
from tether.runtime.errors import Rejected
from tether.specs.scalar_forms import form_errors

KINDS: Final = (
    "signal",
    "approval",
    "human_task",
    "agent_step",
    "update",
    "child",
    "remote_input",
)
#: `remote_input`: a question a remote tool's task asks (runtime/remote), answered like a
#: signal against the remote's form and forwarded to the remote.
ANSWERABLE_KINDS: Final = frozenset(
    {"signal", "approval", "human_task", "agent_step", "remote_input"}
)
APPROVAL_DECISIONS: Final = ("approve", "reject", "push_back")
HUMAN_TASK_DECISIONS: Final = ("complete", "push_back")
_RESERVED_APPROVAL_FIELDS: Final = frozenset({"decision", "reason"})
INPUTS: Final = "inputs"  # an answer's envelope of inputs (module docstring)
_NAME: Final = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")

#: A wait descriptor's flag: an answer to this wait wakes its run even while other waits it
#: was opened with stay unanswered (`Context.wait_any`); a list of decisions: an answer with
#: one of them does (a DAG's gate or task, on a push-back). Without it, waits opened together
#: keep the run parked until the last of them is answered (`Context.wait_all`).
WAKES_RUN: Final = "wakes_run"
#: A wait descriptor's list of decisions that end its run in the write that delivers them
#: (`reject`: a DAG's gate, whose run does nothing more after a rejection).
ENDS_RUN: Final = "ends_run"

M = TypeVar("M", bound=BaseModel)


# --- keys ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyParts:
    execution_id: str
    kind: str
    name: str
    n: int


def make_key(execution_id: str, kind: str, name: str, n: int) -> str:
    """`{execution id}:{kind}:{name}:{n}`; n is the run's last event id when it parked
    (when it first parked, for a wait that keeps its keys)."""
    return f"{execution_id}:{kind}:{name}:{n}"


def parse_key(key: str) -> KeyParts | None:
    """Split a wait key; None when it is not one (names may contain ':', ids and kinds not)."""
    head = key.split(":", 2)
    if len(head) != 3:
        return None
    execution_id, kind, rest = head
    name, sep, n_text = rest.rpartition(":")
    if not sep or not execution_id or kind not in KINDS or not name:
        return None
    if not n_text.isdigit() or (len(n_text) > 1 and n_text[0] == "0"):
        return None
    return KeyParts(execution_id, kind, name, int(n_text))


def takes(spec: WaitSpec, execution_id: str, n: int | None, signal_key: str | None) -> bool:
    """Whether a signal buffered on the wait's channel (sent with `signal_key`) answers it:
    any does, but an answer to another wait's key never answers a wait that keeps its keys
    (`n`: the keys' n), such as one parked before under the same channel."""
    if n is None or signal_key is None or parse_key(signal_key) is None:
        return True
    return signal_key == make_key(execution_id, spec.kind, spec.name, n)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"invalid wait name {name!r}: 1-200 characters, no control characters")
    return name


# --- results handed back to workflow code ----------------------------------------------------


@dataclass(frozen=True)
class Approved:
    """An approval's answer: approved.

    Attributes:
        inputs: The string inputs the answer filled in, by name.
        by: Who answered, as the surface that took the answer names them (`None` when
            unknown); for an approval decided by votes, whoever completed the quorum.
        approvers: For an approval decided by votes, everyone whose approval counted, in
            the order they voted (empty otherwise).
    """

    inputs: dict[str, str]
    by: str | None = None
    approvers: tuple[str, ...] = ()


@dataclass(frozen=True)
class PushedBack:
    """An approval's or human task's answer: pushed back, with feedback.

    Attributes:
        feedback: The answer's fields (checked against the human task's `feedback` model,
            when it has one).
        by: Who answered, as the surface that took the answer names them (`None` when
            unknown).
    """

    feedback: dict[str, Any]
    by: str | None = None


@dataclass(frozen=True)
class Completed(Generic[M]):
    """A human task's answer: the form, filled in.

    Attributes:
        values: The form, as an instance of the task's `form` model.
        by: Who answered, as the surface that took the answer names them (`None` when
            unknown).
    """

    values: M
    by: str | None = None


@dataclass(frozen=True)
class UpdateReceived:
    """A completed update, as [`Context.wait_for_update`][tether.Context.wait_for_update]
    returns it.

    Attributes:
        id: The update's id.
        input: The update's input, as JSON.
        output: The handler's return value, as JSON (`None` if it failed).
        error: The handler's failure as `{"type", "message"}` (`None` if it succeeded).
    """

    id: str
    input: Any
    output: Any
    error: Any


# --- specs -----------------------------------------------------------------------------------


def _model_schema(model: type[BaseModel] | None) -> dict[str, Any]:
    return model.model_json_schema() if model is not None else {}


@dataclass(frozen=True)
class WaitSpec:
    """Base of the wait kinds. `channel` is where its answers are buffered."""

    kind: ClassVar[str] = ""
    # Whether the wait, parked again, keeps the keys of its first park (and takes no answer
    # to another wait's key): a DAG's ask, which stays open while its run goes on. Any other
    # wait is open again under a new key (a key carries the run's last event id when it parked).
    keeps_keys: ClassVar[bool] = False
    name: str
    prompt: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)

    @property
    def channel(self) -> str:
        return f"{self.kind}:{self.name}"

    def answer_schema(self) -> dict[str, Any]:
        return {}

    def extra(self) -> dict[str, Any]:
        return {}

    def descriptor(self, key: str, opened_at: str, deadline: str | None) -> dict[str, Any]:
        return {
            "key": key,
            "kind": self.kind,
            "name": self.name,
            "prompt": self.prompt,
            "schema": self.answer_schema(),
            "opened_at": opened_at,
            "deadline": deadline,
            **self.extra(),
        }

    def parse(self, response: Any, by: str | None) -> Any:
        return response


@dataclass(frozen=True)
class Signal(WaitSpec):
    """A wait for a named signal, for [`Context.wait_all`][tether.Context.wait_all].

    Its answer is the signal's payload (a `schema` instance when `schema` is given), as
    [`Context.wait_for_signal`][tether.Context.wait_for_signal] returns it.

    Args:
        name: The signal's name (1-200 characters, no control characters).
        prompt: What the wait asks for, shown to whoever answers it.
        schema: A pydantic model the payload must fit.

    Raises:
        ValueError: The name is invalid.
    """

    kind: ClassVar[str] = "signal"
    schema: type[BaseModel] | None = None

    def answer_schema(self) -> dict[str, Any]:
        return _model_schema(self.schema)

    def parse(self, response: Any, by: str | None) -> Any:
        return self.schema.model_validate(response) if self.schema is not None else response


@dataclass(frozen=True)
class Approval(WaitSpec):
    """A gate a person approves, rejects or pushes back, for
    [`Context.wait_all`][tether.Context.wait_all].

    Its answer is parsed as [`Context.approval`][tether.Context.approval] returns it: an
    [`Approved`][tether.Approved] or a [`PushedBack`][tether.PushedBack]; a rejection raises
    [`Rejected`][tether.Rejected].

    Args:
        name: The gate's name (1-200 characters, no control characters).
        prompt: What the person is asked.
        inputs: Names of string inputs the answer may carry.
        required: Those of `inputs` an approval must fill in.
        approvers: Who may vote on it: a list of names, or a role (a string naming a role
            of `TETHER_APPROVER_ROLES`). Unset: anyone the surface lets answer.
        quorum: How many different people must approve it; one rejection or push-back
            decides it at once.
        allow_self_approval: Whether the person who started the run may approve it. Unset:
            allowed for an approval without `approvers` or a `quorum`, refused for one with.

    Raises:
        ValueError: The name is invalid, an input is named `decision` or `reason`, a
            required input is not among `inputs`, or the votes asked for cannot be held
            (see [`Context.approval`][tether.Context.approval]).
    """

    kind: ClassVar[str] = "approval"
    # Input names refused: `parse` hands workflow code the inputs without them.
    _reserved: ClassVar[frozenset[str]] = _RESERVED_APPROVAL_FIELDS
    inputs: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    approvers: Sequence[str] | str | None = None
    quorum: int = 1
    allow_self_approval: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "required", tuple(self.required))
        if self.approvers is not None and not isinstance(self.approvers, str):
            object.__setattr__(self, "approvers", tuple(self.approvers))
        votes.make_policy(self.approvers, self.quorum, self.allow_self_approval)
        clash = self._reserved & set(self.inputs)
        if clash:
            raise ValueError(f"approval inputs may not be named {sorted(clash)}")
        missing = set(self.required) - set(self.inputs)
        if missing:
            raise ValueError(f"required inputs {sorted(missing)} are not among the inputs")

    def answer_schema(self) -> dict[str, Any]:
        return approval_schema(self.inputs)

    def extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"inputs": list(self.inputs), "required": list(self.required)}
        policy = votes.make_policy(self.approvers, self.quorum, self.allow_self_approval)
        if policy is not None:
            extra |= {votes.POLICY: policy.as_json(), votes.VOTES: []}
        return extra

    def parse(self, response: Any, by: str | None) -> Approved | PushedBack:
        decision = response["decision"]
        fields_ = answer_fields(response)
        values = {k: v for k, v in fields_.items() if k not in _RESERVED_APPROVAL_FIELDS}
        if decision == "approve":
            return Approved(values, by, votes.approvers_of(response))
        if decision == "push_back":
            return PushedBack(values, by)
        raise Rejected(self.name, response.get("reason"), by)


@dataclass(frozen=True)
class HumanTask(WaitSpec, Generic[M]):
    """A typed form a person fills in or pushes back, for
    [`Context.wait_all`][tether.Context.wait_all].

    Its answer is parsed as [`Context.human_task`][tether.Context.human_task] returns it: a
    [`Completed`][tether.Completed] or a [`PushedBack`][tether.PushedBack].

    Args:
        name: The task's name (1-200 characters, no control characters).
        prompt: What the person is asked.
        form: The pydantic model of the form (required); it may not have a field named
            `decision`.
        feedback: The pydantic model a push-back's fields must fit (default: any).

    Raises:
        ValueError: The name is invalid, `form` is missing, or `form` has a field named
            `decision`.
    """

    kind: ClassVar[str] = "human_task"
    form: type[M] | None = None
    feedback: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.form is None:
            raise ValueError("a human task needs a form model")
        if "decision" in self.form.model_fields:
            raise ValueError("a human task's form may not have a field named 'decision'")

    def answer_schema(self) -> dict[str, Any]:
        return human_task_schema(_model_schema(self.form))

    def extra(self) -> dict[str, Any]:
        return {"form": _model_schema(self.form), "feedback": _model_schema(self.feedback)}

    def parse(self, response: Any, by: str | None) -> Completed[M] | PushedBack:
        assert self.form is not None  # noqa: S101 — checked in __post_init__
        fields_ = answer_fields(response)
        if response.get("decision", "complete") == "push_back":
            if self.feedback is not None:
                return PushedBack(self.feedback.model_validate(fields_).model_dump(), by)
            return PushedBack(fields_, by)
        return Completed(self.form.model_validate(fields_), by)


@dataclass(frozen=True)
class AgentStep(WaitSpec, Generic[M]):
    """A step the agent does itself and answers, for
    [`Context.wait_all`][tether.Context.wait_all].

    Its answer is a `schema` instance, as [`Context.agent_step`][tether.Context.agent_step]
    returns it.

    Args:
        name: The step's name (1-200 characters, no control characters).
        prompt: What the agent is asked to do.
        schema: The pydantic model the answer must fit (required).
        instructions: Further instructions shown with the wait, as JSON.

    Raises:
        ValueError: The name is invalid, or `schema` is missing.
    """

    kind: ClassVar[str] = "agent_step"
    schema: type[M] | None = None
    instructions: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.schema is None:
            raise ValueError("an agent step needs a schema model")

    def answer_schema(self) -> dict[str, Any]:
        return _model_schema(self.schema)

    def extra(self) -> dict[str, Any]:
        return {"instructions": self.instructions} if self.instructions else {}

    def parse(self, response: Any, by: str | None) -> M:
        assert self.schema is not None  # noqa: S101 — checked in __post_init__
        return self.schema.model_validate(response)


@dataclass(frozen=True)
class Update(WaitSpec):
    """A wait for the next completed update of that name, for
    [`Context.wait_all`][tether.Context.wait_all].

    It is not answered from outside: the worker delivers each update once its handler has
    run. Its answer is an [`UpdateReceived`][tether.UpdateReceived].

    Args:
        name: The update's name.
        prompt: Unused by updates (every wait kind takes one).

    Raises:
        ValueError: The name is invalid.
    """

    kind: ClassVar[str] = "update"

    def parse(self, response: Any, by: str | None) -> UpdateReceived:
        return UpdateReceived(
            response["id"], response["input"], response.get("output"), response.get("error")
        )


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


def parse_checked(spec: WaitSpec, response: Any, by: str | None) -> Any:
    """Parse an answer inside the workflow; a model that refuses it raises ValueError."""
    try:
        return spec.parse(response, by)
    except ValidationError as exc:
        raise ValueError(f"answer to {spec.channel} does not fit its model: {exc}") from exc


def parse_answers(specs: Sequence[WaitSpec], answers: dict[str, Any]) -> dict[str, Any]:
    """`{channel: parsed answer}` for the waits among `specs` that `answers` holds."""
    return {
        s.channel: parse_checked(s, answers[s.channel]["payload"], answers[s.channel]["by"])
        for s in specs
        if s.channel in answers
    }


def descriptors(
    execution_id: str, specs: Sequence[WaitSpec], state: dict[str, Any], n: int
) -> list[dict[str, Any]]:
    """The descriptors of `specs` parked together (keys with `n`; `state`: opened, deadline)."""
    return [
        s.descriptor(
            make_key(execution_id, s.kind, s.name, n), state["opened_at"], state["deadline"]
        )
        for s in specs
    ]
