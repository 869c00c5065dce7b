"""Tool results: run summaries for the handle-taking tools, and the tool-level error shape
(which runtime error becomes which tool error: tools/errors.py)."""

from __future__ import annotations

from typing import Any

import orjson

from tether.runtime.answer_rules import ANSWERABLE_KINDS
from tether.runtime.chain import error_text
from tether.runtime.hints import answer_hints, tool_call_hint
from tether.runtime.operations import AnswerResult, RunView
from tether.wire.timestamps import iso


def text_result(value: Any, *, is_error: bool = False) -> dict[str, Any]:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if isinstance(value, dict):
        result["structuredContent"] = value
    return result


def tool_error(code: str, message: str, **details: Any) -> dict[str, Any]:
    error = {
        "code": code,
        "message": message,
        **{k: v for k, v in details.items() if v is not None},
    }
    return {
        "content": [{"type": "text", "text": f"{code}: {message}"}],
        "structuredContent": {"error": error},
        "isError": True,
    }


def not_found(handle: str) -> dict[str, Any]:
    return tool_error("resource_not_found", f"no run {handle!r} for this tool", handle=handle)


def answered(result: AnswerResult) -> dict[str, Any]:
    """What the answer tool reports: accepted, or duplicate (the same answer was given before,
    nothing changed)."""
    out: dict[str, Any] = {
        "status": result.status,
        "execution_id": result.execution_id,
        "key": result.key,
    }
    if result.status == "duplicate":
        out["note"] = "this answer was given before; nothing changed"
    return out


def summary(
    view: RunView, *, answer_tool: str | None = None, tasks_update: bool = False
) -> dict[str, Any]:
    """A run as the status, watch and start tools report it (follows the chain). The run's
    state, output and error are named and always present as in Harvest's terminal watch frame
    `{state, output, error}` (null where there is none; the error in words, `Type: message`,
    for Harvest's is a string); the rest is Tether's (`error_details`: the error's record).
    Each open wait carries `answer_with`, the answer tool call that answers it, and `hints` says in
    words every way that works for this client (`tasks_update`: it declared the Tasks
    extension)."""
    run = view.current
    ended = run.ended_at is not None
    failed = ended and run.status != "completed" and run.error is not None
    out: dict[str, Any] = {
        "execution_id": run.id,
        "handle": view.requested.id,
        "workflow": run.workflow,
        "business_id": run.business_id,
        "state": run.status,
        "output": run.output if ended and run.status == "completed" else None,
        "error": error_text(run.error, run.status) if failed else None,
        "run_version": run.version,
        "created_at": iso(run.created_at),
    }
    if failed:
        out["error_details"] = run.error
    if run.details:
        out["details"] = run.details
    open_waits = [w for w in run.waits if w.get("kind") in ANSWERABLE_KINDS]
    waits = []
    for w in open_waits:
        shown = {
            k: w.get(k)
            for k in ("key", "kind", "name", "prompt", "schema", "deadline", "inputs", "required")
            if w.get(k) is not None
        }
        if answer_tool is not None:
            shown["answer_with"] = tool_call_hint(answer_tool, run, w)
        waits.append(shown)
    if waits:
        out["waits"] = waits
        out["hints"] = [
            line
            for w in open_waits
            for line in answer_hints(run, w, tool=answer_tool, tasks_update=tasks_update, cli=False)
        ]
    if run.ended_at is not None:
        out["ended_at"] = iso(run.ended_at)
    return out
