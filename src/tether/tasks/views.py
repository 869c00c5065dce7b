"""PURE: execution rows → MCP task objects and tool results.

| run                                          | task status      | extra                 |
|----------------------------------------------|------------------|-----------------------|
| pending / running; waiting without elicitation | working        | statusMessage         |
| waiting, form elicitation declared           | input_required   | inputRequests         |
| completed                                    | completed        | result                |
| failed / timed_out (workflow error)          | completed        | result.isError = true |
| failed with a protocol error                 | failed           | error                 |
| cancelled, terminated                        | cancelled        |                       |
| sealed by a rerun                            | the ending it had|                       |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from tether.jsonrpc import codes
from tether.runtime import answers, votes
from tether.runtime.answer_rules import ANSWERABLE_KINDS
from tether.runtime.chain import error_text, outcome
from tether.runtime.hints import status_hint
from tether.runtime.rows import ExecutionRow
from tether.wire.timestamps import iso

PAYLOAD_FIELD: Final = "payload"
_DEFINED_MCP: Final = frozenset(
    {
        codes.HEADER_MISMATCH,
        codes.MISSING_REQUIRED_CLIENT_CAPABILITY,
        codes.UNSUPPORTED_PROTOCOL_VERSION,
    }
)
_PRIMITIVE_TYPES: Final = frozenset({"string", "number", "integer", "boolean"})
_PRIMITIVE_KEYS: Final = frozenset(
    {
        "type",
        "title",
        "description",
        "default",
        "enum",
        "enumNames",
        "oneOf",
        "format",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
    }
)


# --- elicitation forms --------------------------------------------------------------------------


def _primitive(prop: Any) -> dict[str, Any] | None:
    if not isinstance(prop, dict):
        return None
    kind = prop.get("type")
    if kind in _PRIMITIVE_TYPES:
        return {k: v for k, v in prop.items() if k in _PRIMITIVE_KEYS}
    if kind == "array":
        items = prop.get("items")
        if isinstance(items, dict) and items.get("type") == "string" and "enum" in items:
            out = {k: v for k, v in prop.items() if k in ("type", "title", "description")}
            out["items"] = {"type": "string", "enum": items["enum"]}
            return out
    return None


def flat_form(schema: Any) -> dict[str, Any] | None:
    """The elicitation form for an answer schema when it is flat (an object of primitive
    fields, no references); None when it is not."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or "$ref" in schema:
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    out_props: dict[str, Any] = {}
    for name, prop in props.items():
        flat = _primitive(prop)
        if flat is None:
            return None
        out_props[name] = flat
    form: dict[str, Any] = {"type": "object", "properties": out_props}
    required = [r for r in schema.get("required", []) if r in out_props]
    if required:
        form["required"] = required
    return form


def payload_form(prompt: str | None) -> dict[str, Any]:
    """The fallback form: one required string field holding the answer as JSON text."""
    return {
        "type": "object",
        "properties": {
            PAYLOAD_FIELD: {
                "type": "string",
                "title": "Payload (JSON)",
                "description": prompt or "The answer as JSON text",
            }
        },
        "required": [PAYLOAD_FIELD],
    }


def is_payload_form(schema: Any) -> bool:
    """Whether an elicitation's requestedSchema is the fallback form (`payload_form`): its
    answer goes as JSON text in the one `payload` field. Told apart from a flat form that
    happens to have a single string field named `payload` by the fallback's title."""
    if not isinstance(schema, dict):
        return False
    props = schema.get("properties")
    if not isinstance(props, dict) or set(props) != {PAYLOAD_FIELD}:
        return False
    field = props[PAYLOAD_FIELD]
    expected = payload_form(None)["properties"][PAYLOAD_FIELD]
    return (
        isinstance(field, dict)
        and field.get("type") == expected["type"]
        and field.get("title") == expected["title"]
    )


def wait_form(wait: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(requestedSchema, is_payload_form) for an open wait."""
    flat = flat_form(wait.get("schema"))
    if flat is not None:
        return flat, False
    return payload_form(wait.get("prompt")), True


def answer_from_content(wait: dict[str, Any], content: Any) -> Any:
    """Turn an accepted elicitation's content back into the wait's answer (`answers.read`):
    a flat form's fields as they are; the payload form's field as text (JSON text; text that
    is not JSON is a string where the wait's schema takes one).

    Raises:
        ValueError: the payload field is missing or not a string.
        AnswerRejected: the payload is neither JSON nor a string the schema takes.
    """
    _, is_payload = wait_form(wait)
    if not is_payload:
        return answers.read(answers.Value(content if content is not None else {}), wait)
    text = content.get(PAYLOAD_FIELD) if isinstance(content, dict) else None
    if not isinstance(text, str):
        raise ValueError(f"content.{PAYLOAD_FIELD} must be a string holding the answer as JSON")
    return answers.read(answers.Text(text, PAYLOAD_FIELD), wait)


def _describe(wait: dict[str, Any]) -> str:
    label = {
        "signal": "signal",
        "approval": "approval",
        "human_task": "human task",
        "agent_step": "agent step",
        "update": "update",
        "remote_input": "remote input",
    }.get(wait.get("kind", ""), "input")
    text = f"{label} '{wait.get('name')}'"
    text = f"{text}: {wait['prompt']}" if wait.get("prompt") else text
    tally = votes.summary(wait)
    return f"{text} (votes: {tally})" if tally else text


def input_requests(waits: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wait in waits:
        if wait.get("kind") not in ANSWERABLE_KINDS:
            continue
        schema, _ = wait_form(wait)
        out[wait["key"]] = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": wait.get("prompt") or f"Input needed for {_describe(wait)}",
                "requestedSchema": schema,
            },
        }
    return out


# --- tool results ---------------------------------------------------------------------------------


def success_result(output: Any) -> dict[str, Any]:
    """CallToolResult for a completed run: structured output plus its text."""
    text = output if isinstance(output, str) else orjson.dumps(output).decode()
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if isinstance(output, dict):
        result["structuredContent"] = output
    return result


def error_result(error: Any, status: str) -> dict[str, Any]:
    """CallToolResult for a run that ended in a workflow error (a tool error, not a protocol
    error: clients must not retry a business failure as a fault)."""
    err = error if isinstance(error, dict) else {}
    return {
        "content": [{"type": "text", "text": error_text(error, status)}],
        "structuredContent": {"error": {**err, "status": status}},
        "isError": True,
    }


def protocol_error(error: Any) -> dict[str, Any]:
    """The JSON-RPC error a run ended with. A code the spec reserves but does not define for
    this use (-32000..-32099 apart from -32020..-32022) is reported as -32603 with the
    workflow's code in `data`, so a workflow cannot make the server emit a forbidden code."""
    err = error if isinstance(error, dict) else {}
    code = err.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        code = codes.INTERNAL_ERROR
    data = err.get("data")
    if -32099 <= code <= -32000 and code not in _DEFINED_MCP:
        data = {"workflowCode": code, "data": data}
        code = codes.INTERNAL_ERROR
    out: dict[str, Any] = {"code": code, "message": str(err.get("message", ""))}
    if data is not None:
        out["data"] = data
    return out


# --- the task -----------------------------------------------------------------------------------


def ttl_ms(requested: ExecutionRow, chain: Sequence[ExecutionRow]) -> int | None:
    """null while the task's (workflow, business id) still has a live run, or without
    retention; else from createdAt to when retention may delete the task's row."""
    if requested.retention_s is None:
        return None
    peers = [
        r
        for r in chain
        if r.workflow == requested.workflow and r.business_id == requested.business_id
    ] or [requested]
    if any(r.ended_at is None for r in peers):
        return None
    last_end = max(r.ended_at for r in peers if r.ended_at is not None)
    lifetime = (last_end - requested.created_at).total_seconds() + requested.retention_s
    return max(int(lifetime * 1000), 1)


def task(
    requested: ExecutionRow,
    current: ExecutionRow,
    chain: Sequence[ExecutionRow],
    *,
    elicitation: bool,
    poll_interval_ms: int,
    answer_tool: str | None = None,
) -> dict[str, Any]:
    """The DetailedTask for a handle: `requested` names the task, `current` is the run its
    chain resolves to. A sealed run reports its own ending and is not followed.
    `answer_tool`: the workflow's answer tool, named in the statusMessage of a run that waits
    (a task is only read by clients that declared the Tasks extension, so tasks/update with
    the wait's key is named too)."""
    run = requested if requested.sealed_from else current
    base: dict[str, Any] = {
        "taskId": requested.id,
        "createdAt": iso(requested.created_at),
        "lastUpdatedAt": iso(max(run.updated_at, requested.created_at)),
        "ttlMs": ttl_ms(requested, chain),
    }
    result = outcome(run)
    if result.outcome in ("live", "waiting", "continued"):
        base["pollIntervalMs"] = poll_interval_ms
        waiting = result.outcome == "waiting" and elicitation
        requests = input_requests(run.waits) if waiting else {}
        if requests:
            return {
                **base,
                "status": "input_required",
                "inputRequests": requests,
                "statusMessage": _waiting_message(run),
            }
        working = _working_message(run, answer_tool)
        return {**base, "status": "working", "statusMessage": working}
    if result.outcome == "succeeded":
        # The inlined result is exactly what tools/call would have returned, resultType
        # included (the rule of `tasks/get`; the extension's examples omit it, but strict
        # clients require it).
        return {
            **base,
            "status": "completed",
            "result": {"resultType": "complete", **success_result(run.output)},
        }
    if result.outcome == "workflow_error":
        return {
            **base,
            "status": "completed",
            "result": {"resultType": "complete", **error_result(run.error, result.status)},
        }
    if result.outcome == "protocol_error":
        err = protocol_error(run.error)
        return {**base, "status": "failed", "error": err, "statusMessage": err["message"]}
    message = (run.error or {}).get("message") if isinstance(run.error, dict) else None
    out = {**base, "status": "cancelled"}
    if message:
        out["statusMessage"] = message
    return out


def _waiting_message(run: ExecutionRow) -> str:
    waits = [w for w in run.waits if w.get("kind") in ANSWERABLE_KINDS]
    return "waiting for " + "; ".join(_describe(w) for w in waits)


def _working_message(run: ExecutionRow, answer_tool: str | None) -> str:
    waits = [w for w in run.waits if w.get("kind") in ANSWERABLE_KINDS]
    if run.status == "waiting" and waits:
        names = "; ".join(f"{_describe(w)} [key {w['key']}]" for w in waits)
        return f"waiting for {names} ({status_hint(run, tool=answer_tool, tasks_update=True)})"
    return run.details or ("queued" if run.status == "pending" else run.status)


def create_task_result(task_view: dict[str, Any]) -> dict[str, Any]:
    """CreateTaskResult: the task fields at the top level, resultType 'task', and nothing of
    the result, error or input requests."""
    keep = (
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
    )
    out = {k: task_view[k] for k in keep if k in task_view}
    out["resultType"] = "task"
    return out
