"""Waits: one abstraction for every "needs input" case (docs/architecture.md). Pure: no I/O.

A wait spec is what workflow code asks for; its *descriptor* (a JSON object written to the
run's `waits` column when it parks) is what every surface sees and what answers are checked
against (runtime/answer_rules.py), so the server that admits an answer needs no workflow code
to validate it. An answer reaches workflow code parsed by its spec, as one of the results here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from tether.runtime import votes
from tether.runtime.answer_rules import answer_fields, approval_schema, human_task_schema
from tether.runtime.errors import Rejected

KINDS: Final = (
    "signal",
    "approval",
    "human_task",
    "agent_step",
    "update",
    "child",
    "remote_input",
)
_RESERVED_APPROVAL_FIELDS: Final = frozenset({"decision", "reason"})
_NAME: Final = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")

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


# --- answers handed to workflow code, descriptors of parked waits ----------------------------


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
