"""server/discover, initialize (2025 revisions), prompts, resources and completion."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from tether import __version__
from tether.jsonrpc import codes
from tether.jsonrpc.errors import InvalidParams
from tether.jsonrpc.headers import Era
from tether.jsonrpc.router import RequestContext, Router, parse_params
from tether.runtime import errors as runtime_errors
from tether.runtime.mcp_primitives import ResourceDef
from tether.runtime.operations import Operations
from tether.runtime.payloads import reveals, shown
from tether.runtime.registry import App
from tether.tools.context import InputRequired
from tether.tools.dagu.reading import DaguResources
from tether.wire.errors import jsonrpc_errors
from tether.wire.timestamps import iso

RUN_URI = re.compile(r"^tether://runs/(?P<id>[A-Za-z0-9_]+)(?P<part>/history|/log)?$")


@dataclass(frozen=True)
class ServerInfo:
    name: str = "tether"
    version: str = __version__
    instructions: str | None = None
    discover_ttl_ms: int = 60_000
    # the tool list may change while serving (DAG files reloaded) and a listen stream says so
    tools_list_changed: bool = False

    def implementation(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


class PromptGet(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: dict[str, str] | None = None


class ResourceRead(BaseModel):
    model_config = ConfigDict(extra="allow")
    uri: str = Field(min_length=1)


class CompleteParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    ref: dict[str, Any]
    argument: dict[str, Any]


def capabilities(app: App, *, modern: bool, tools_list_changed: bool = False) -> dict[str, Any]:
    """`tools_list_changed`: the server tells of tool list changes — on a 2026-07-28
    `subscriptions/listen` stream only (a 2025 client has no stream to receive them on: this
    server answers GET with 405), so a 2025 client is told `listChanged: false`.

    Resources: a 2026-07-28 client may follow a resource with `resourceSubscriptions` on
    `subscriptions/listen` (`subscribe: true`); a 2025 client could only use
    `resources/subscribe`, which this server does not serve. The resource lists never change
    while the server runs, so `listChanged` is false for both."""
    listed = tools_list_changed and modern
    caps: dict[str, Any] = {
        "tools": {"listChanged": listed},
        "resources": {"subscribe": modern, "listChanged": False},
        "prompts": {},
    }
    if any(p.completions for p in app.prompts.values()):
        caps["completions"] = {}
    if modern:
        caps["extensions"] = {codes.TASKS_EXTENSION: {}}
    return caps


def _template_match(template: str, uri: str) -> dict[str, str] | None:
    pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
    m = re.match(pattern, uri)
    return m.groupdict() if m else None


class McpServer:
    def __init__(
        self, app: App, ops: Operations, info: ServerInfo, *, dagu: DaguResources | None = None
    ) -> None:
        self.app = app
        self.ops = ops
        self.info = info
        self.dagu = dagu  # dagu:// run and DAG resources (served when the app has DAGs)

    def register(self, router: Router) -> None:
        both: tuple[Era, ...] = ("modern", "legacy")
        router.add("server/discover", self.discover)
        router.add("initialize", self.initialize, eras=("legacy",))
        router.add("ping", self.ping, eras=("legacy",))
        router.add("logging/setLevel", self.ping, eras=("legacy",))
        router.add("prompts/list", self.prompts_list, eras=both)
        router.add("prompts/get", self.prompts_get, eras=both)
        router.add("resources/list", self.resources_list, eras=both)
        router.add("resources/templates/list", self.templates_list, eras=both)
        router.add("resources/read", self.resources_read, eras=both)
        if any(p.completions for p in self.app.prompts.values()):
            router.add("completion/complete", self.complete, eras=both)
        router.notification("notifications/initialized", self._ignore)
        router.notification("notifications/cancelled", self._ignore)

    async def _ignore(self, ctx: RequestContext) -> None:
        return None

    def _cacheable(self, ctx: RequestContext, result: dict[str, Any]) -> dict[str, Any]:
        if ctx.route.era == "modern":
            result["ttlMs"] = self.info.discover_ttl_ms
            result["cacheScope"] = "private"
        return result

    async def discover(self, ctx: RequestContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": [codes.MODERN_VERSION],
            "capabilities": capabilities(
                self.app, modern=True, tools_list_changed=self.info.tools_list_changed
            ),
            "ttlMs": self.info.discover_ttl_ms,
            "cacheScope": "private",
        }
        if self.info.instructions:
            result["instructions"] = self.info.instructions
        return result

    async def initialize(self, ctx: RequestContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": ctx.route.version,
            "capabilities": capabilities(self.app, modern=False),
            "serverInfo": self.info.implementation(),
        }
        if self.info.instructions:
            result["instructions"] = self.info.instructions
        return result

    async def ping(self, ctx: RequestContext) -> dict[str, Any]:
        return {}

    # --- prompts ----------------------------------------------------------------------------------

    async def prompts_list(self, ctx: RequestContext) -> dict[str, Any]:
        prompts = []
        for p in self.app.prompts.values():
            entry: dict[str, Any] = {"name": p.name}
            if p.description:
                entry["description"] = p.description
            if p.arguments:
                entry["arguments"] = list(p.arguments)
            prompts.append(entry)
        return self._cacheable(ctx, {"prompts": prompts})

    async def prompts_get(self, ctx: RequestContext) -> dict[str, Any]:
        params = parse_params(PromptGet, ctx.params)
        prompt = self.app.prompts.get(params.name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {params.name}")
        args = params.arguments or {}
        missing = [
            a["name"] for a in prompt.arguments if a.get("required") and a["name"] not in args
        ]
        if missing:
            raise InvalidParams(f"missing required arguments: {missing}")
        try:
            return await prompt.fn(ctx, args)
        except InputRequired as need:
            if ctx.route.era != "modern":
                raise InvalidParams(
                    "this prompt needs input only 2026-07-28 clients can give"
                ) from None
            return {"resultType": "input_required", "inputRequests": need.requests}

    async def complete(self, ctx: RequestContext) -> dict[str, Any]:
        params = parse_params(CompleteParams, ctx.params)
        values: tuple[str, ...] = ()
        if params.ref.get("type") == "ref/prompt":
            prompt = self.app.prompts.get(str(params.ref.get("name")))
            if prompt is None:
                raise InvalidParams(f"Unknown prompt: {params.ref.get('name')}")
            values = prompt.completions.get(str(params.argument.get("name")), ())
        prefix = str(params.argument.get("value", ""))
        found = [v for v in values if v.startswith(prefix)]
        return {
            "completion": {"values": found[:100], "total": len(found), "hasMore": len(found) > 100}
        }

    # --- resources --------------------------------------------------------------------------------

    def _entry(self, r: ResourceDef) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": r.name}
        entry["uriTemplate" if r.template else "uri"] = r.uri
        if r.description:
            entry["description"] = r.description
        if r.mime_type:
            entry["mimeType"] = r.mime_type
        return entry

    async def resources_list(self, ctx: RequestContext) -> dict[str, Any]:
        listed = [self._entry(r) for r in self.app.resources.values() if not r.template]
        return self._cacheable(ctx, {"resources": listed})

    async def templates_list(self, ctx: RequestContext) -> dict[str, Any]:
        templates = [self._entry(r) for r in self.app.resources.values() if r.template]
        templates += [
            {
                "uriTemplate": "tether://runs/{id}",
                "name": "run",
                "description": "A run: status, details, open waits, output",
                "mimeType": "application/json",
            },
            {
                "uriTemplate": "tether://runs/{id}/history",
                "name": "run history",
                "description": "A run's events",
                "mimeType": "application/json",
            },
            {
                "uriTemplate": "tether://runs/{id}/log",
                "name": "run log",
                "description": "A run's recorded steps, as text",
                "mimeType": "text/plain",
            },
        ]
        if self.dagu is not None:
            templates += self.dagu.templates()
        return self._cacheable(ctx, {"resourceTemplates": templates})

    async def resources_read(self, ctx: RequestContext) -> dict[str, Any]:
        uri = parse_params(ResourceRead, ctx.params).uri
        run = RUN_URI.match(uri)
        if self.dagu is not None and uri.startswith("dagu://"):
            with jsonrpc_errors():
                found = await self.dagu.read(uri, self.ops.for_principal(ctx.principal))
            if found is not None:
                return self._cacheable(ctx, {"contents": found})
        elif run:
            with jsonrpc_errors():
                ops = self.ops.for_principal(ctx.principal)
                reveal = reveals(ctx.principal)
                contents = await self._run_resource(
                    ops, uri, run.group("id"), run.group("part"), reveal
                )
            if contents is not None:
                return self._cacheable(ctx, {"contents": contents})
        else:
            for r in self.app.resources.values():
                parts = (
                    _template_match(r.uri, uri) if r.template else ({} if r.uri == uri else None)
                )
                if parts is not None:
                    return self._cacheable(ctx, {"contents": await r.fn(ctx, uri, **parts)})
        raise InvalidParams("Resource not found", {"uri": uri})

    async def _run_resource(
        self, ops: Operations, uri: str, run_id: str, part: str | None, reveal: bool
    ) -> list[dict[str, Any]] | None:
        """A run as a resource; None when there is no such run, it went away meanwhile, or it
        is outside the caller's tenant (answered alike: no existence oracle). Its output is
        decoded only when the read gate admits the caller (`reveal`)."""
        try:
            return await self._run_contents(ops, uri, run_id, part, reveal)
        except runtime_errors.ExecutionNotFound:
            return None  # a lookup's outcome: answered like any unknown URI

    async def _run_contents(
        self, ops: Operations, uri: str, run_id: str, part: str | None, reveal: bool
    ) -> list[dict[str, Any]]:
        view = await ops.get(run_id)
        if part == "/history":
            events = await ops.history(run_id)
            body: Any = [
                {"event_id": h.event_id, "type": h.type, "data": h.data, "at": iso(h.at)}
                for h in events
            ]
        elif part == "/log":
            steps = await ops.steps(run_id)
            lines = [f"#{s.seq} {s.kind} {s.name} {'done' if s.done else 'open'}" for s in steps]
            return [{"uri": uri, "mimeType": "text/plain", "text": "\n".join(lines)}]
        else:
            row = shown(view.current, reveal)
            body = {
                "id": row.id,
                "workflow": row.workflow,
                "status": row.status,
                "details": row.details,
                "waits": row.waits,
                "output": row.output,
                "error": row.error,
                "created_at": iso(row.created_at),
                "ended_at": iso(row.ended_at) if row.ended_at else None,
                "handle": view.requested.id,
            }
        return [{"uri": uri, "mimeType": "application/json", "text": orjson.dumps(body).decode()}]
