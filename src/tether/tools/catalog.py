"""The tool catalog: every tool an App serves, in a deterministic order, with its handler.

Order: plain tools, workflows served as tools, then each MCP workflow's generated set
(start_<wf>, <wf>_status, <wf>_watch, signal_<wf>, answer_<wf>, <wf>_update_<u>) in
registration order, then Realm's step-protocol tools (one group) when the app has protocols
or allows create_workflow.
A generated set whose names collide with a tool already in the catalog is left out whole
(with a warning), never shipped with a tool quietly missing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tether.runtime import answer_rules
from tether.runtime.registry import App, UpdateDef, WorkflowDef
from tether.tools.annotations import MUTATING, READ_ONLY
from tether.tools.dagu import tools as dagu_tools
from tether.tools.realm.definitions import realm_definitions

logger = logging.getLogger(__name__)

HANDLE = {"type": "string", "description": "The execution id returned by the start tool"}


@dataclass(frozen=True)
class Tool:
    """One served tool: its tools/list entry and what a call does."""

    name: str
    kind: (
        str  # plain | workflow | start | status | watch | signal | answer | update | realm | dagu_*
    )
    definition: dict[str, Any]
    target: str  # the plain tool, workflow, or workflow/update it serves

    @property
    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = self.definition["inputSchema"]
        return schema


Handler = Callable[..., Awaitable[dict[str, Any]]]


def _embed(schema: dict[str, Any], def_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move a schema under `$defs[def_name]`, hoisting its own `$defs` to the root so its
    internal `#/$defs/…` references still resolve."""
    inner = dict(schema)
    defs = dict(inner.pop("$defs", {}))
    defs[def_name] = inner
    return {"$ref": f"#/$defs/{def_name}"}, defs


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return schema if schema.get("type") == "object" else {"type": "object"}


def _workflow_tool(wf: WorkflowDef, name: str) -> Tool:
    schema = _object_schema(wf.input_schema()) if wf.takes_input else {"type": "object"}
    definition = {
        "name": name,
        "description": wf.description or f"Run the durable workflow {wf.name}.",
        "inputSchema": schema,
        "annotations": dict(MUTATING),
    }
    return Tool(name, "workflow", definition, wf.name)


def _generated(wf: WorkflowDef, *, dag: bool = False) -> list[Tool]:
    """An MCP workflow's set: start, status, watch, signal, answer, then one tool per MCP
    update. A DAG gets start, status and watch only (its gates are decided through
    dagu_execute, tasks/update or the CLI)."""
    n = wf.name
    if dag:
        return [_start_tool(wf), _status_tool(n), _watch_tool(n)]
    tools = [_start_tool(wf), _status_tool(n), _watch_tool(n), _signal_tool(n), _answer_tool(n)]
    tools.extend(_update_tool(wf.name, up) for up in wf.updates.values() if up.mcp)
    return tools


def _start_tool(wf: WorkflowDef) -> Tool:
    n = wf.name
    body, defs = _embed(wf.input_schema(), f"TetherInput_{n}")
    start_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "body": body,
            "idempotency_key": {
                "type": "string",
                "description": "Repeat a start safely: the same key returns the same run",
            },
        },
        "required": ["body"] if wf.takes_input else [],
        "$defs": defs,
    }
    definition = {
        "name": f"start_{n}",
        "description": (wf.description or f"Start workflow {n}.")
        + " Returns a durable handle (execution_id) for the other tools.",
        "inputSchema": start_schema,
        "annotations": dict(MUTATING),
    }
    return Tool(f"start_{n}", "start", definition, n)


def _status_tool(n: str) -> Tool:
    definition = {
        "name": f"{n}_status",
        "description": f"Where a {n} run stands: status, details, open waits, output.",
        "inputSchema": {
            "type": "object",
            "properties": {"handle": HANDLE},
            "required": ["handle"],
        },
        "annotations": dict(READ_ONLY),
    }
    return Tool(f"{n}_status", "status", definition, n)


def _watch_tool(n: str) -> Tool:
    definition = {
        "name": f"{n}_watch",
        "description": f"Follow a {n} run with progress notifications until it ends or "
        "stops at a wait (or the timeout passes).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "handle": HANDLE,
                "timeout_seconds": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": 300,
                    "default": 60,
                },
            },
            "required": ["handle"],
        },
        "annotations": dict(READ_ONLY),
    }
    return Tool(f"{n}_watch", "watch", definition, n)


def _signal_tool(n: str) -> Tool:
    definition = {
        "name": f"signal_{n}",
        "description": f"Send a signal to a {n} run (answers its open wait of that name, "
        "or is kept until the run waits for it).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "handle": HANDLE,
                "name": {"type": "string", "description": "Signal name"},
                "payload": {"description": "Signal payload (any JSON)"},
                "idempotency_key": {"type": "string"},
            },
            "required": ["handle", "name"],
        },
        "annotations": dict(MUTATING),
    }
    return Tool(f"signal_{n}", "signal", definition, n)


def answer_tool_name(workflow: str) -> str:
    return f"answer_{workflow}"


def _response_schema() -> dict[str, Any]:
    """The answer's shape for each kind of wait, built from the same schemas as the task's
    elicitation forms (runtime/answer_rules.py), so the tool and tasks/update ask for the same."""
    approval = answer_rules.approval_schema(())
    approval["additionalProperties"] = {"type": "string"}
    human_task = answer_rules.human_task_schema({})
    return {
        "description": (
            "The answer, shaped by the wait's kind (the status tool shows each open wait's "
            'kind and schema). approval: {"decision": "approve" | "reject" | "push_back", '
            '"reason": "...", <input>: "..."}, every required input present to approve. '
            'human_task: the form fields, with "decision": "complete" (default) or '
            '"push_back". agent_step: an object matching the step schema. signal: the '
            "payload (any JSON matching the signal's schema). remote_input: the remote "
            "tool's form, filled in."
        ),
        "anyOf": [
            {"title": "approval", **approval},
            {"title": "human_task", **human_task, "additionalProperties": True},
            {"title": "agent_step", "type": "object"},
            {"title": "remote_input", "type": "object"},
            {"title": "signal"},
        ],
    }


def _answer_tool(n: str) -> Tool:
    name = answer_tool_name(n)
    kinds = ", ".join(sorted(answer_rules.ANSWERABLE_KINDS))
    definition = {
        "name": name,
        "description": f"Answer an open wait of a {n} run ({kinds}): the same answer, "
        "with the same checks, as tasks/update. First answer wins; the same answer again "
        "is a no-op; an answer that does not fit is refused and changes nothing.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "handle": HANDLE,
                "wait": {
                    "type": "string",
                    "description": "The open wait's name (when no other open wait has it) "
                    f"or its key, as {n}_status shows them",
                },
                "response": _response_schema(),
            },
            "required": ["handle", "wait", "response"],
        },
        "annotations": dict(MUTATING),
    }
    return Tool(name, "answer", definition, n)


def _update_tool(n: str, up: UpdateDef) -> Tool:
    body, defs = _embed(up.input_schema(), f"TetherUpdate_{n}_{up.name}")
    definition = {
        "name": f"{n}_update_{up.name}",
        "description": up.description or f"Apply update {up.name} to a {n} run.",
        "inputSchema": {
            "type": "object",
            "properties": {"handle": HANDLE, "input": body},
            "required": ["handle", "input"],
            "$defs": defs,
        },
        "annotations": dict(MUTATING),
    }
    return Tool(f"{n}_update_{up.name}", "update", definition, f"{n}/{up.name}")


def _plain(app: App) -> Iterator[Tool]:
    for td in app.tools.values():
        definition: dict[str, Any] = {"name": td.name, "inputSchema": td.schema()}
        if td.title:
            definition["title"] = td.title
        if td.description:
            definition["description"] = td.description
        if td.annotations:
            definition["annotations"] = td.annotations
        if td.output_schema:
            definition["outputSchema"] = td.output_schema
        yield Tool(td.name, "plain", definition, td.name)


@dataclass(frozen=True)
class DaguNames:
    execute: str = "dagu_execute"
    read: str = "dagu_read"


#: Tool kinds that authorize per call (see Catalog.authorizes_itself).
SELF_AUTHORIZING = frozenset({"dagu_execute"})


def _dagu_tools(names: DaguNames) -> list[Tool]:
    return [
        Tool(names.execute, "dagu_execute", dagu_tools.execute_definition(names.execute), ""),
        Tool(names.read, "dagu_read", dagu_tools.read_definition(names.read), ""),
    ]


class Catalog:
    def __init__(
        self,
        tools: list[Tool],
        task_only: frozenset[str] = frozenset(),
        protocols: Mapping[str, Any] | None = None,
    ) -> None:
        self._tools = {t.name: t for t in tools}
        self._protocols = protocols  # live: create_workflow adds protocols while serving
        self._self_authorizing = frozenset(t.name for t in tools if t.kind in SELF_AUTHORIZING)
        self.listing = [t.definition for t in tools]
        self._task_workflows = task_only | {
            t.target for t in tools if t.kind in ("workflow", "start")
        }

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schema_of(self, name: str) -> dict[str, Any] | None:
        """A tool's input schema by name (the header ladder checks Mcp-Param-* against it)."""
        tool = self._tools.get(name)
        return tool.input_schema if tool is not None else None

    def answer_tool(self, workflow: str) -> str | None:
        """The name of `workflow`'s answer tool when the catalog serves it, else None."""
        tool = self._tools.get(answer_tool_name(workflow))
        return (
            tool.name
            if tool is not None and tool.kind == "answer" and tool.target == workflow
            else None
        )

    def read_only(self, name: object) -> bool:
        """Whether the tool is annotated read-only (readers may call it)."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        annotations = tool.definition.get("annotations") if tool is not None else None
        return bool(isinstance(annotations, dict) and annotations.get("readOnlyHint"))

    def authorizes_itself(self, name: object) -> bool:
        """Whether the tool checks the caller's role itself and answers a refusal as its own
        error result (dagu_execute: `unauthorized` / `unauthenticated`, as Dagu's execute-tool
        contract has it)."""
        return isinstance(name, str) and name in self._self_authorizing

    def in_catalog(self, workflow: str) -> bool:
        """Whether runs of `workflow` are served as tasks: its tools made the catalog, or it
        is registered with `expose=Exposure(tasks=True)`."""
        return workflow in self._task_workflows or (
            self._protocols is not None and workflow in self._protocols
        )

    @classmethod
    def build(cls, app: App, *, dagu: DaguNames | None = None) -> Catalog:
        """`dagu`: the names of the dagu_execute and dagu_read tools, served when the app
        has DAGs (None: not served)."""
        return cls(*collect(app, dagu))


def _inline(app: App, workflow: str) -> bool:
    entry = app.dags.get(workflow)
    return entry is not None and entry.inline


def collect(
    app: App, dagu: DaguNames | None
) -> tuple[list[Tool], frozenset[str], Mapping[str, Any] | None]:
    """The app's tools in catalog order, the workflows served as tasks without tools, and
    the app's live protocols when Realm's tools are served (create_workflow adds to them, and
    their runs are MCP tasks too). A DAG that arrived inline (dagu_execute) runs but gets no
    tools of its own."""
    tools: list[Tool] = []
    names: set[str] = set()

    def admit(group: list[Tool], owner: str) -> None:
        clash = sorted({t.name for t in group} & names)
        if clash or len({t.name for t in group}) != len(group):
            logger.warning("MCP tools of %s left out: names %s collide", owner, clash)
            return
        tools.extend(group)
        names.update(t.name for t in group)

    for tool in _plain(app):
        admit([tool], f"tool {tool.name}")
    if dagu is not None and app.dags:
        admit(_dagu_tools(dagu), "the dagu tools")
    for wf in app.workflows.values():
        if (tool_name := wf.expose.tool_name(wf.name)) is not None:
            admit([_workflow_tool(wf, tool_name)], f"workflow {wf.name}")
    for wf in app.workflows.values():
        if wf.expose.tool_set and not _inline(app, wf.name):
            admit(_generated(wf, dag=wf.name in app.dags), f"workflow {wf.name}")
    if app.protocols or app.allow_create_workflow:
        realm = [Tool(d["name"], "realm", d, d["name"]) for d in realm_definitions(app)]
        admit(realm, "Realm's step protocol")
    task_only = frozenset(w.name for w in app.workflows.values() if w.expose.tasks)
    realm_served = any(t.kind == "realm" for t in tools)
    return tools, task_only, app.protocols if realm_served else None
