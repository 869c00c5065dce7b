"""The protocol tools' reply envelope, pure: one JSON object per reply, with its presence
rules.

Always present: `command`, `run_id`, `status`, `context_hint`, `next_actions`, `warnings`,
`errors`, `data`, `evidence`, and `run_version` (which `get_run_state` and `abandon_run` leave
out when they refuse). Every other field is present only when it applies; `Reply` refuses a
combination the protocol rules out (an `ok` reply with an action other than `stop`, a
`confirm_required` reply without its gate, `retry_after` without `wait_and_proceed` …), so a
tool cannot build a reply an agent written for the protocol would misread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

Status = Literal["ok", "error", "blocked", "confirm_required"]
Action = Literal[
    "provide_input",
    "resolve_precondition",
    "report_to_user",
    "wait_for_human",
    "wait_and_proceed",
    "stop",
]

STATUSES: Final = frozenset({"ok", "error", "blocked", "confirm_required"})
ACTIONS: Final = frozenset(
    {
        "provide_input",
        "resolve_precondition",
        "report_to_user",
        "wait_for_human",
        "wait_and_proceed",
        "stop",
    }
)

#: Error code → its default `agent_action`. A reply may override it by the rules
#: in `action_for` (failing before the run is read, a failed step on an open run …).
CODE_ACTIONS: Final[Mapping[str, Action]] = MappingProxyType(
    {
        # stop
        "STATE_WORKFLOW_UNREADABLE": "stop",
        "VALIDATION_EXHAUSTED": "stop",
        "ENGINE_INTERNAL": "stop",
        "ENGINE_STORE_FAILED": "stop",
        "ENGINE_ADAPTER_NOT_REGISTERED": "stop",
        "ENGINE_HANDLER_NOT_REGISTERED": "stop",
        "ENGINE_STEP_FAILED": "stop",
        "GATE_MESSAGE_UNRESOLVABLE": "stop",
        "FILTER_UNKNOWN": "stop",
        # report_to_user
        "STATE_RUN_NOT_FOUND": "report_to_user",
        "STATE_WORKFLOW_NOT_FOUND": "report_to_user",
        "STATE_RUN_TERMINAL": "report_to_user",
        "STATE_SNAPSHOT_MISMATCH": "report_to_user",
        "STATE_RUN_BUSY": "report_to_user",
        "STATE_TRANSITION_DENIED": "report_to_user",
        "STATE_RUN_ALREADY_ACTIVE": "report_to_user",
        "STATE_IDEMPOTENCY_KEY_USED": "report_to_user",
        "STEP_NOT_FOUND": "report_to_user",
        "VALIDATION_TRUST_VALUE": "report_to_user",
        "VALIDATION_ACTOR_INVALID": "report_to_user",
        "STEP_TIMEOUT": "report_to_user",
        "STEP_ABORTED": "report_to_user",
        "STEP_RETRY_EXHAUSTED": "report_to_user",
        # provide_input
        "VALIDATION_OUTPUT_SCHEMA": "provide_input",
        "VALIDATION_TRACE_SCHEMA": "provide_input",
        "VALIDATION_EMPTY_VALUE": "provide_input",
        "VALIDATION_BATCH_TOO_LARGE": "provide_input",
        "VALIDATION_BATCH_ITEMS": "provide_input",
        "BUFFER_FULL": "provide_input",
        "VALIDATION_INPUT_SCHEMA": "provide_input",
        # resolve_precondition
        "STATE_STEP_ALREADY_CLAIMED": "resolve_precondition",
        "STATE_CLAIM_LOST": "resolve_precondition",
        "STATE_BLOCKED": "resolve_precondition",
        "STATE_STEP_NOT_ELIGIBLE": "resolve_precondition",
        "STATE_STEP_ALREADY_SETTLED": "resolve_precondition",
        # report_to_user or stop, by reply
        "VALIDATION_WORKFLOW_SCHEMA": "report_to_user",
        "ENGINE_ADAPTER_FAILED": "report_to_user",
        "ENGINE_HANDLER_FAILED": "report_to_user",
        # wait_and_proceed (the only code that sets retry_after)
        "SERVICE_RATE_LIMITED": "wait_and_proceed",
        # provide_input, for an answer the store cannot hold (never a refused answer that
        # counts): over the payload limit (a code Realm defines and never raises), or text
        # with U+0000, which PostgreSQL cannot store (Tether's own code)
        "RESOURCE_TOO_LARGE": "provide_input",
        "VALIDATION_UNSTORABLE_TEXT": "provide_input",
    }
)

SCHEMA_CODES: Final = frozenset({"VALIDATION_INPUT_SCHEMA", "VALIDATION_OUTPUT_SCHEMA"})


def action_for(
    code: str, *, run_read: bool = True, run_ended: bool = False, step_failed: bool = False
) -> Action:
    """The `agent_action` for `code` in this reply: a refusal
    before the run is read turns provide_input and resolve_precondition into report_to_user;
    a failed step that ended the run gives stop; a failed step on an open run turns stop,
    provide_input and resolve_precondition into report_to_user; a schema refusal keeps
    provide_input."""
    action: Action = CODE_ACTIONS.get(code, "report_to_user")
    if code in SCHEMA_CODES and run_read:
        return "provide_input"
    if not run_read and action in ("provide_input", "resolve_precondition"):
        return "report_to_user"
    if step_failed and run_ended:
        return "stop"
    if step_failed and action in ("stop", "provide_input", "resolve_precondition"):
        return "report_to_user"
    return action


# --- next_actions ------------------------------------------------------------------------------


def skeleton(schema: Mapping[str, Any]) -> Any:
    """A minimal value of `schema`, with placeholders (the `call_with` template): an
    object's required properties (all, when none is required), an array of one item, `<a|b>`
    for a string enum, `""`, `0`, `false`, else null."""
    kind, props = schema.get("type"), schema.get("properties")
    if kind == "object" or (kind is None and isinstance(props, Mapping)):
        if not isinstance(props, Mapping):
            return {}
        required = schema.get("required") or list(props)
        return {k: skeleton(props[k]) for k in required if isinstance(props.get(k), Mapping)}
    if kind == "array":
        items = schema.get("items")
        return [skeleton(items)] if isinstance(items, Mapping) else []
    if kind == "string":
        enum = schema.get("enum")
        return f"<{'|'.join(str(v) for v in enum)}>" if isinstance(enum, list) else ""
    return {"number": 0, "integer": 0, "boolean": False}.get(str(kind))


def next_action(
    tool: str,
    params: Mapping[str, Any],
    *,
    call_with: Mapping[str, Any] | None = None,
    human_readable: str,
    orientation: str,
    input_schema: Mapping[str, Any] | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    """One `next_actions` entry: `instruction{tool, params, call_with}` (`call_with` is the
    whole argument object, with `<…>` placeholders where the caller fills in a value),
    `input_schema?`, `human_readable`, `orientation` and `prompt?`."""
    entry: dict[str, Any] = {
        "instruction": {
            "tool": tool,
            "params": dict(params),
            "call_with": dict(call_with if call_with is not None else params),
        }
    }
    if input_schema is not None:
        entry["input_schema"] = dict(input_schema)
    entry["human_readable"] = human_readable
    entry["orientation"] = orientation
    if prompt is not None:
        entry["prompt"] = prompt
    return entry


def step_action(
    run_id: str,
    step: str,
    *,
    description: str,
    input_schema: Mapping[str, Any] | None,
    prompt: str | None,
) -> dict[str, Any]:
    """Call agent step `step` with `execute_step`: `call_with`'s params are a skeleton of the
    step's `input_schema`; `input_schema` and `prompt` only when the step declares them."""
    params = skeleton(input_schema) if input_schema is not None else {}
    return next_action(
        "execute_step",
        {"run_id": run_id, "command": step},
        call_with={"run_id": run_id, "command": step, "params": params},
        input_schema=input_schema,
        prompt=prompt,
        human_readable=f"Do step '{step}' with execute_step: {description}",
        orientation=f"The run is open; step '{step}' is ready for you.",
    )


QUESTION_TEXT: Final = (
    "Where the gate has a message, get_run_state shows it as pending_gate.resolved_message."
)
OPENER_PASSES_BACK: Final = (
    "If this conversation opened the gate and was given a claim_token with it, send that "
    "token back too."
)


def gate_words(gate_id: str, choices: Sequence[str]) -> str:
    """What an open gate waits for: a person's pick among `choices`."""
    return f"Gate '{gate_id}' waits for a person to pick one of: {', '.join(choices)}."


def gate_action(
    run_id: str,
    gate_id: str,
    step: str,
    choices: Sequence[str],
    *,
    claim_token: str | None = None,
    gate_reply: bool = False,
) -> dict[str, Any]:
    """Answer the open gate `gate_id` with `submit_human_response`. Only the opening reply hands
    out the claim token; replies holding the `gate` object refer the agent to it, and the rest
    spell out the choices."""
    token = {"claim_token": claim_token} if claim_token is not None else {}
    if gate_reply:
        then = (
            ", sending call_with unchanged: the claim_token in it ties the answer to the reply "
            "that opened this gate."
            if claim_token is not None
            else "."
        )
        said = (
            f"A person decides step '{step}'. Show them gate.display, take their pick from "
            f"gate.response_spec.choices and send it with submit_human_response{then}"
        )
    else:
        said = (
            f"A person decides step '{step}': ask them to pick one of {', '.join(choices)} and "
            f"send it with submit_human_response. {QUESTION_TEXT} {OPENER_PASSES_BACK}"
        )
    return next_action(
        "submit_human_response",
        {"run_id": run_id, "gate_id": gate_id, **token},
        call_with={
            "run_id": run_id,
            "gate_id": gate_id,
            "choice": f"<{'|'.join(choices)}>",
            **token,
        },
        human_readable=said,
        orientation=gate_words(gate_id, choices),
    )


def advance_action(
    run_id: str, owed: Sequence[str], *, expiry: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """`advance_run`: the engine has work to do (guards, auto steps, or applying the
    `on_expiry` of a gate whose time is up), named."""
    if expiry is not None:
        words = f"the {expiry['on_expiry']} of the gate on '{expiry['name']}', whose time is up"
        return next_action(
            "advance_run",
            {"run_id": run_id},
            human_readable=f"Call advance_run: it applies {words}, then runs what the run owes "
            "after it, with this server's handlers, until a step waits for an answer or fails, "
            "or the run ends.",
            orientation=f"The run is open and the engine has work to do: {words}.",
        )
    names = ", ".join(f"'{n}'" for n in owed)
    until = (
        ""
        if len(owed) == 1
        else ", and keeps going until a step waits for an answer or fails, or the run ends"
    )
    return next_action(
        "advance_run",
        {"run_id": run_id},
        human_readable=f"Call advance_run: the engine runs {names} with this server's "
        f"handlers{until}.",
        orientation=f"The run is open and the engine has work to do: {names}.",
    )


def ordered(actions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`next_actions` in order: an `advance_run` entry comes last."""
    return sorted(actions, key=lambda a: a["instruction"]["tool"] == "advance_run")


# --- the reply ---------------------------------------------------------------------------------

#: Optional fields, in the order they are written after the ones always present.
OPTIONAL: Final = (
    "run_phase",
    "error_code",
    "error_details",
    "agent_action",
    "retry_after",
    "blocked_reason",
    "gate",
    "deduped",
    "rerun_of",
    "chained_auto_steps",
    "stopped_step",
    "guards",
    "ended_by",
    "answer_recorded",
    "gate_claim",
    "adopted_own",
    "adopted_anonymous",
    "preserved_foreign",
    "settled_by_default",
    "defaulted_steps",
    "diagnostics",
    "continued_by",
)


@dataclass(frozen=True)
class Reply:
    """One reply of the shared shape. `run_version=None` is allowed only when `get_run_state`
    or `abandon_run` refuses. Raises ValueError for a combination the protocol rules
    out."""

    command: str
    run_id: str
    status: Status
    context_hint: str
    run_version: int | None = 0
    next_actions: Sequence[dict[str, Any]] = ()
    warnings: Sequence[str] = ()
    errors: Sequence[str] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    evidence: Sequence[Any] = ()  # always empty in these replies
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check(self.status, self.run_version, self.command, self.extra)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.command, "run_id": self.run_id}
        if self.run_version is not None:
            out["run_version"] = self.run_version
        out.update(
            status=self.status,
            context_hint=self.context_hint,
            next_actions=ordered(self.next_actions),
            warnings=list(self.warnings),
            errors=list(self.errors),
            data=dict(self.data),
            evidence=list(self.evidence),
        )
        out.update({k: self.extra[k] for k in OPTIONAL if self.extra.get(k) is not None})
        return out


def check(status: str, run_version: int | None, command: str, extra: Mapping[str, Any]) -> None:
    """The presence rules a reply must keep. Pure; raises ValueError."""
    unknown = set(extra) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"not a reply field: {sorted(unknown)}")
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {sorted(STATUSES)}")
    action = extra.get("agent_action")
    if action is not None and action not in ACTIONS:
        raise ValueError(f"agent_action {action!r} is not one of {sorted(ACTIONS)}")
    if status in ("error", "blocked") and action is None:
        raise ValueError(f"a {status} reply needs agent_action")
    if status == "confirm_required" and action is not None:
        raise ValueError("a confirm_required reply has no agent_action")
    if status == "ok" and action not in (None, "stop"):
        raise ValueError("an ok reply carries agent_action only as stop")
    if (extra.get("retry_after") is not None) != (action == "wait_and_proceed"):
        raise ValueError("retry_after goes with wait_and_proceed, and only with it")
    if (extra.get("gate") is not None) != (status == "confirm_required"):
        raise ValueError("gate goes with confirm_required, and only with it")
    if status == "blocked" and extra.get("blocked_reason") is None:
        raise ValueError("a blocked reply needs blocked_reason")
    if extra.get("error_code") is not None and status != "error":
        raise ValueError("error_code only on an error reply")
    if extra.get("answer_recorded") not in (None, False):
        raise ValueError("answer_recorded is never true: a recorded answer leaves it out")
    if run_version is None and command not in ("get_run_state", "abandon_run"):
        raise ValueError("run_version is left out only by get_run_state and abandon_run")


def refusal(
    command: str,
    run_id: str,
    code: str | None,
    message: str,
    *,
    run_version: int | None = 0,
    action: Action | None = None,
    context_hint: str | None = None,
    next_actions: Sequence[dict[str, Any]] = (),
    **extra: Any,
) -> Reply:
    """An `error` reply: `errors=[message]`, the code's action unless `action` overrides it."""
    chosen: Action = action or (action_for(code) if code is not None else "provide_input")
    fields: dict[str, Any] = {"error_code": code, "agent_action": chosen, **extra}
    return Reply(
        command=command,
        run_id=run_id,
        status="error",
        context_hint=context_hint or message,
        run_version=run_version,
        next_actions=next_actions,
        errors=[message],
        extra=fields,
    )


def workflow_missing(workflow: str) -> str:
    """The error for a workflow id nothing is registered under, in the fixed wording clients
    match."""
    return f"Workflow not found: {workflow}"


def workflow_not_found(command: str, workflow: str) -> Reply:
    """A start refused for an unknown workflow: no run, `run_id: ""`, and the hint and error
    in the fixed wording clients match."""
    return refusal(
        command,
        "",
        "STATE_WORKFLOW_NOT_FOUND",
        workflow_missing(workflow),
        context_hint=f"Workflow '{workflow}' not found.",
    )
