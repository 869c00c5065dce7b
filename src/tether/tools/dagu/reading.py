"""Reading `dagu://` URIs: the DAG list, a DAG's spec, a run's detail, its logs and one step's
log. Shared by `resources/read` and the `dagu_read` tool."""

from __future__ import annotations

from typing import Any, Final

import orjson

from tether.runtime.operations import Operations
from tether.tools.dagu import resolve
from tether.tools.dagu.detail import run_detail, run_logs, step_log
from tether.tools.dagu.results import (
    INVALID_TOOL_INPUT,
    RESOURCE_NOT_FOUND,
    DaguError,
    error_result,
)
from tether.tools.dagu.uris import parse_dag_uri, parse_run_uri

TEMPLATES: Final = (
    {
        "uriTemplate": "dagu://runs/{name}/{dagRunId}",
        "name": "dag_run",
        "description": "A DAG-run: status, attemptId, steps with statuses, errors, prompts, forms",
        "mimeType": "application/json",
    },
    {
        "uriTemplate": "dagu://runs/{name}/{dagRunId}/logs",
        "name": "dag_run_logs",
        "description": "A DAG-run's per-step output (stdout, stderr, exit code)",
        "mimeType": "application/json",
    },
    {
        "uriTemplate": "dagu://runs/{name}/{dagRunId}/steps/{stepName}/logs",
        "name": "dag_run_step_log",
        "description": "One step's output",
        "mimeType": "application/json",
    },
    {
        "uriTemplate": "dagu://dags/{name}",
        "name": "dag",
        "description": "A DAG's spec",
        "mimeType": "application/json",
    },
)


async def read_uri(ops: Operations, uri: str) -> Any:
    """The JSON body a `dagu://` URI names; None when it names nothing."""
    dag = parse_dag_uri(uri)
    if dag is not None:
        return _dag_list(ops) if dag[1] is None else _dag_spec(ops, dag[1])
    ref = parse_run_uri(uri)
    if ref is None:
        return None
    read = await resolve.read(ops, ref.name, ref.dag_run_id)
    if read is None:
        return None
    if ref.part is None:
        return run_detail(read)
    if ref.part == "logs":
        return run_logs(read)
    step = next((s for s in read.status.steps if s.name == ref.step), None)
    return None if step is None else step_log(read, step)


def _dag_list(ops: Operations) -> dict[str, Any]:
    return {
        "dags": [
            {
                "name": name,
                "description": entry.spec.description,
                "steps": [s.name for s in entry.spec.steps],
                "labels": [str(label) for label in entry.spec.labels],
                "uri": f"dagu://dags/{name}",
            }
            for name, entry in sorted(ops.app.dags.items())
            if not entry.inline  # an inline run is no DAG definition (Dagu)
        ]
    }


def _dag_spec(ops: Operations, name: str) -> dict[str, Any] | None:
    entry = ops.app.dags.get(name)
    if entry is None or entry.inline:
        return None
    spec = entry.spec
    return {
        "name": spec.name,
        "description": spec.description,
        "type": spec.type,
        "params": [{"name": p.name, "default": p.default} for p in spec.params],
        "steps": [{"name": s.name, "id": s.id, "depends": list(s.depends)} for s in spec.steps],
        "spec": entry.text,
    }


class DaguResources:
    """`dagu://` resources for `resources/read` and `resources/templates/list`."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def templates(self) -> list[dict[str, Any]]:
        return [dict(t) for t in TEMPLATES]

    async def read(self, uri: str, ops: Operations | None = None) -> list[dict[str, Any]] | None:
        """The resource contents, or None when the URI names nothing (or a run outside the
        caller's tenant: `ops` are the operations the caller may use)."""
        body = await read_uri(self.ops if ops is None else ops, uri)
        if body is None:
            return None
        return [{"uri": uri, "mimeType": "application/json", "text": orjson.dumps(body).decode()}]


async def dagu_read(ops: Operations, args: dict[str, Any]) -> dict[str, Any]:
    """The `dagu_read` tool: `{uri}` → the JSON body, or a `resource_not_found` error."""
    uri = args.get("uri")
    extra = sorted(set(args) - {"uri"})
    if extra or not isinstance(uri, str) or not uri.strip():
        field = extra[0] if extra else "uri"
        err = DaguError(INVALID_TOOL_INPUT, "dagu_read takes one string field, uri", field=field)
        return error_result(err, {})
    body = await read_uri(ops, uri.strip())
    if body is None:
        return error_result(DaguError(RESOURCE_NOT_FOUND, f"nothing at {uri.strip()!r}"), {})
    return {
        "content": [{"type": "text", "text": orjson.dumps(body).decode()}],
        "structuredContent": body,
        "isError": False,
    }
