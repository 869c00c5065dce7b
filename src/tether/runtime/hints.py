"""How to answer an open wait, in words a person or an agent can act on. Pure: no I/O.

Every hint a surface shows (the task's statusMessage, the `<wf>_status` tool, `tether runs
show`) is built here, so they name the same wait the same way: by its name when no other open
wait of the run has it, else by its key (`answer_wait` accepts both).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Final

import orjson

from tether.runtime.answer_rules import ANSWERABLE_KINDS
from tether.storage.rows import ExecutionRow

_EXAMPLE_BY_TYPE: Final[Mapping[str, Any]] = {
    "string": "...",
    "integer": 0,
    "number": 0,
    "boolean": True,
    "array": [],
    "object": {},
}


def wait_ref(run: ExecutionRow, wait: Mapping[str, Any]) -> str:
    """The wait's name when it names one open wait of the run, else its key."""
    same = [
        w
        for w in run.waits
        if w.get("kind") in ANSWERABLE_KINDS and w.get("name") == wait.get("name")
    ]
    return str(wait["name"]) if len(same) == 1 else str(wait["key"])


def _fields_example(schema: Any) -> dict[str, Any]:
    """Its required fields with placeholder values (all fields when none is required)."""
    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    names = [n for n in schema.get("required", []) if n in props] or list(props)
    out: dict[str, Any] = {}
    for name in names:
        prop = props[name] if isinstance(props[name], dict) else {}
        if prop.get("enum"):
            out[name] = prop["enum"][0]
        else:
            out[name] = _EXAMPLE_BY_TYPE.get(str(prop.get("type")), "...")
    return out


def example_answer(wait: Mapping[str, Any]) -> Any:
    """A well-formed answer to fill in: the decision and every required input or field."""
    kind = wait.get("kind")
    if kind == "approval" and wait.get("choices"):  # a protocol gate: one of its own choices
        return {"decision": wait["choices"][0]}
    if kind == "approval":
        required = wait.get("required") or []
        return {"decision": "approve", **dict.fromkeys(required, "...")}
    if kind == "human_task":
        return {"decision": "complete", **_fields_example(wait.get("form"))}
    schema = wait.get("schema")
    if isinstance(schema, dict) and schema.get("type") == "object":
        return _fields_example(schema)
    return {} if kind == "agent_step" else None


def _shape(wait: Mapping[str, Any]) -> str:
    kind = wait.get("kind")
    if kind == "approval" and wait.get("choices"):
        return "decision: one of " + ", ".join(_json(c) for c in wait["choices"])
    if kind == "approval":
        return 'decision "approve" (with its inputs), "reject" (with a reason) or "push_back"'
    if kind == "human_task":
        return 'the form\'s fields, decision "complete" (default) or "push_back"'
    if kind == "agent_step":
        return "an object matching the step's schema"
    if kind == "remote_input":
        return "the remote's form, filled in (forwarded to the remote tool)"
    return "the signal's payload"


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def cli_hint(run: ExecutionRow, wait: Mapping[str, Any]) -> str:
    """The `tether runs answer` command that answers `wait` (a placeholder answer)."""
    response = example_answer(wait)
    return shlex.join(["tether", "runs", "answer", run.id, wait_ref(run, wait), _json(response)])


def tool_call_hint(tool: str, run: ExecutionRow, wait: Mapping[str, Any]) -> dict[str, Any]:
    """The answer tool call that answers `wait`, as `{tool, arguments}`."""
    arguments = {"handle": run.id, "wait": wait_ref(run, wait), "response": example_answer(wait)}
    return {"tool": tool, "arguments": arguments}


def answer_hints(
    run: ExecutionRow,
    wait: Mapping[str, Any],
    *,
    tool: str | None = None,
    tasks_update: bool = False,
    cli: bool = True,
) -> list[str]:
    """One line per way to answer `wait` that works for the reader: the answer tool (when the
    workflow serves one: `tool`), `tasks/update` (for clients that declared the Tasks
    extension), the command line (`cli`)."""
    lines = []
    if tool is not None:
        call = tool_call_hint(tool, run, wait)
        lines.append(f"call {tool} {_json(call['arguments'])} — response: {_shape(wait)}")
    if tasks_update:
        lines.append(f"tasks/update with inputResponses keyed {wait['key']!r}")
    if cli:
        lines.append(cli_hint(run, wait))
    return lines


def status_hint(run: ExecutionRow, *, tool: str | None, tasks_update: bool) -> str:
    """The short form for a task's statusMessage: which ways answer the run's open waits."""
    ways = []
    if tool is not None:
        ways.append(f"{tool} (wait: its name or key)")
    if tasks_update:
        ways.append("tasks/update (inputResponses keyed by the wait's key)")
    return "answer with " + " or ".join(ways) if ways else ""
