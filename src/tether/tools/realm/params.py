"""Parameters of the 11 protocol tools, pure: the table each tool's `inputSchema` is built
from, and the one check every call passes before anything is read or written.

The MCP layer turns away a call that lacks a required parameter or gives one of the wrong
type (JSON-RPC -32602, `Input validation error: Invalid arguments for tool <tool>: <problem>
at <path>`). Parameters a tool does not know are dropped silently, except that
`create_workflow`, `submit_human_response` and `advance_run` list what they dropped in
`warnings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from tether.jsonrpc.errors import InvalidParams

LIVE_MATCH: Final = ("use_existing", "fail")
TERMINAL_MATCH: Final = ("reuse", "reject", "rerun_if_failed", "rerun")
WARN_UNKNOWN: Final = frozenset({"create_workflow", "submit_human_response", "advance_run"})


@dataclass(frozen=True)
class Param:
    """One parameter: JSON type (`any` takes every value), required, allowed values, and for
    an array of objects the item's own parameters."""

    name: str
    type: str
    required: bool = False
    enum: tuple[str, ...] = ()
    items: tuple[Param, ...] = ()
    description: str = ""
    min_items: int = 0  # an array's least length
    positive: bool = False  # a number above 0

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.type == "any" else {"type": self.type}
        if self.enum:
            out["enum"] = list(self.enum)
        if self.items:
            out["items"] = object_schema(self.items)
        elif self.type == "array":
            out["items"] = {}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.positive:
            out["exclusiveMinimum"] = 0
        if self.description:
            out["description"] = self.description
        return out


def object_schema(params: tuple[Param, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {p.name: p.schema() for p in params},
        "required": [p.name for p in params if p.required],
    }


def _s(name: str, required: bool = False, description: str = "") -> Param:
    return Param(name, "string", required, description=description)


RUN_ID = _s("run_id", True, "The run's ID")
_LIVE = Param("on_live_match", "string", enum=LIVE_MATCH)
_TERMINAL = Param("on_terminal_match", "string", enum=TERMINAL_MATCH)
_ITEM = (Param("params", "object", True), _s("idempotency_key"))
_STEP = (
    _s("id", True),
    _s("description", True),
    Param("depends_on", "array"),
    Param("input_schema", "object"),
    Param("llm_timeout_seconds", "number"),
    Param("structured_output", "any"),
)
_ENTRY = (_s("event", True), _s("timestamp"), Param("data", "any"))

#: Tool → its parameters, in tools/list order.
TOOLS: Final[Mapping[str, tuple[Param, ...]]] = MappingProxyType(
    {
        "list_workflows": (),
        "get_workflow_protocol": (_s("workflow_id", True),),
        "start_run": (
            _s("workflow_id", True),
            Param("params", "object"),
            _s("idempotency_key"),
            _LIVE,
            _TERMINAL,
        ),
        "start_run_batch": (
            _s("workflow_id", True),
            Param("items", "array", True, items=_ITEM),
            Param("max_items", "integer", positive=True),
            _s("parent_run_id"),
            _LIVE,
            _TERMINAL,
        ),
        "execute_step": (
            RUN_ID,
            _s("command", True, "The step to do"),
            Param("params", "object"),
            Param("trace", "array", items=_ENTRY),
            _s("writer_nonce"),
        ),
        "submit_human_response": (
            RUN_ID,
            _s("gate_id", True),
            _s("choice", True),
            _s("responded_by"),
            _s("claim_token"),
        ),
        "advance_run": (RUN_ID,),
        "get_run_state": (RUN_ID, Param("include_steps", "boolean")),
        "abandon_run": (RUN_ID, _s("reason")),
        "create_workflow": (
            Param("steps", "array", True, items=_STEP, min_items=1),
            Param("metadata", "object"),
        ),
        "append_trace": (
            RUN_ID,
            _s("step_id", True),
            Param("entries", "array", True, items=_ENTRY),
            _s("writer_nonce"),
        ),
    }
)

_PY_TYPES: Final[Mapping[str, tuple[type, ...]]] = MappingProxyType(
    {
        "string": (str,),
        "object": (dict,),
        "array": (list,),
        "boolean": (bool,),
        "integer": (int,),
        "number": (int, float),
    }
)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", dict: "object", list: "array"}
    return names.get(type(value), type(value).__name__)


def _fits(param: Param, value: Any) -> bool:
    if param.type == "any":
        return True
    if isinstance(value, bool) and param.type in ("integer", "number"):
        return False
    if param.type == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _PY_TYPES[param.type])


def problems(params: tuple[Param, ...], args: Mapping[str, Any], at: str = "") -> list[str]:
    """What is wrong with `args` (missing, wrong type, not an allowed value), zod's words."""
    out: list[str] = []
    for p in params:
        path = f"{at}.{p.name}" if at else p.name
        if p.name not in args:
            if p.required:
                out.append(f"Required at {path}")
            continue
        value = args[p.name]
        if not _fits(p, value):
            out.append(f"Expected {p.type}, received {_type_name(value)} at {path}")
        elif p.enum and value not in p.enum:
            allowed = " | ".join(f"'{e}'" for e in p.enum)
            out.append(f"Invalid enum value. Expected {allowed}, received '{value}' at {path}")
        elif p.positive and value <= 0:
            out.append(f"Number must be greater than 0 at {path}")
        elif p.type == "array" and len(value) < p.min_items:
            out.append(f"Array must contain at least {p.min_items} element(s) at {path}")
        elif p.items:
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    out.append(f"Expected object, received {_type_name(item)} at {path}.{i}")
                else:
                    out += problems(p.items, item, f"{path}.{i}")
    return out


def checked(tool: str, args: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """The call's known arguments, and the warnings for unknown ones (only from the three
    tools that name them).

    Raises:
        InvalidParams: a required parameter is missing or a value has the wrong type.
    """
    params = TOOLS[tool]
    given = dict(args or {})
    found = problems(params, given)
    if found:
        raise InvalidParams(
            f"Input validation error: Invalid arguments for tool {tool}: {'; '.join(found)}"
        )
    names = {p.name for p in params}
    known = {k: v for k, v in given.items() if k in names}
    unknown = sorted(set(given) - names)
    warnings = [_ignored(tool, name, names) for name in unknown] if tool in WARN_UNKNOWN else []
    return known, warnings


#: Names sent for submit_human_response's claim_token, answered with the argument meant.
_MEANT: Final = {"claimToken": "claim_token", "token": "claim_token"}


def _ignored(tool: str, name: str, names: set[str]) -> str:
    """`<tool> takes no argument '<k>'; it was ignored.`; submit_human_response adds the
    argument it has that was meant (`The argument it takes is 'claim_token'.`)."""
    said = f"{tool} takes no argument '{name}'; it was ignored."
    if tool != "submit_human_response":
        return said
    flat = name.replace("_", "").replace("-", "").lower()
    meant = _MEANT.get(name) or next(
        (n for n in sorted(names) if n.replace("_", "").lower() == flat), None
    )
    return f"{said} The argument it takes is '{meant}'." if meant else said
