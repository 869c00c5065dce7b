"""A scripted MCP 2026-07-28 + Tasks server, mounted with respx, for the harness's own tests.

With no faults it passes every check of the harness; each name in `faults` breaks one rule
(`test_harness_negative.FAULTS` maps each fault to the checks it must make fail). The HTTP
ladder follows the transport page's server validation, in Tether's order (`jsonrpc/headers.py`);
the tasks side lives in `fake_tasks`.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.conformance.fake_tasks import RpcError, Tasks, invalid, needs_tasks, text
from tether.conformance import spec

URL = "http://fake.test/mcp"
SERVER_INFO = {"name": "fake", "version": "1.0"}
LEGACY = "2025-11-25"
TOOLS: list[dict[str, Any]] = [
    {"name": n, "inputSchema": {"type": "object"}}
    for n in (
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
        "test_missing_capability",
        "test_tool_with_progress",
    )
] + [
    {
        "name": "test_headers",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
            },
        },
    }
]
REMOVED = {
    "ping": "ping-ok",
    "initialize": "initialize-ok",
    "logging/setLevel": "logging-ok",
    "resources/subscribe": "subscribe-ok",
    "resources/unsubscribe": "subscribe-ok",
    "tasks/result": "tasks-result-ok",
    "tasks/list": "tasks-list-ok",
    "completion/complete": "completion-ok",
}


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    sse: list[dict[str, Any]] | None = None

    def response(self) -> httpx.Response:
        if self.sse is not None:
            text = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in self.sse)
            hdrs = {"content-type": spec.SSE, **self.headers}
            return httpx.Response(self.status, headers=hdrs, text=text)
        if self.body is None:
            return httpx.Response(self.status, headers=self.headers)
        return httpx.Response(self.status, headers=self.headers, json=self.body)


def decode(value: str, faults: Collection[str]) -> str:
    prefix = "=?base64?"
    if "base64-case-insensitive" in faults and value.lower().startswith(prefix):
        value = prefix + value[len(prefix) :]
    if "no-base64-decode" in faults or not (value.startswith(prefix) and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[len(prefix) : -2], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        if "base64-error-500" in faults:
            raise RpcError(spec.INTERNAL_ERROR, "cannot decode", status=500) from exc
        raise RpcError(spec.HEADER_MISMATCH, "bad Base64 header value") from exc


class Fake:
    """`respx_mock.route(...).mock(side_effect=Fake(faults))`."""

    def __init__(self, faults: Collection[str] = ()) -> None:
        self.f = frozenset(faults)
        self.tasks = Tasks(self.f)
        self.calls = 0
        self.listings = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return self.handle(request).response()

    def header(self, request: httpx.Request, name: str) -> str | None:
        if "header-names-case-sensitive" in self.f:
            raw = {k.decode(): v.decode() for k, v in request.headers.raw}
            value = raw.get(name)
        else:
            value = request.headers.get(name)
        if value is None:
            return None
        return value if "no-trim" in self.f else value.strip()

    def handle(self, request: httpx.Request) -> Reply:
        f = self.f
        origin = request.headers.get("origin")
        if origin is not None:
            foreign = origin != "http://fake.test"
            if (foreign and "no-origin-check" not in f) or (
                not foreign and "local-origin-403" in f
            ):
                return Reply(
                    403, {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Origin"}}
                )
        if "last-event-id-error" in f and "last-event-id" in request.headers:
            return Reply(
                400, {"jsonrpc": "2.0", "error": {"code": -32600, "message": "no resuming"}}
            )
        if request.method in ("GET", "DELETE"):
            return Reply(200 if f"{request.method.lower()}-200" in f else 405)
        ctype = request.headers.get("content-type", "")
        if not ctype.startswith(spec.JSON) and "text-plain-ok" not in f:
            return Reply(415)
        if "accept-500" in f and spec.SSE not in request.headers.get("accept", ""):
            return Reply(500)
        try:
            body = json.loads(request.content)
        except ValueError:
            if "parse-error-200" in f:
                return Reply(200, {"jsonrpc": "2.0", "id": None, "result": {}})
            return self.error(None, RpcError(spec.PARSE_ERROR, "Parse error"), 400)
        if isinstance(body, list):
            return Reply(200 if "batch-ok" in f else 400, self.envelope(None, spec.INVALID_REQUEST))
        if not isinstance(body, dict) or not isinstance(body.get("method"), str):
            return Reply(
                202 if "response-ok" in f else 400, self.envelope(None, spec.INVALID_REQUEST)
            )
        if "id" not in body:
            return self.notification(body)
        rid = body["id"]
        if rid is None:
            if "null-id-ok" in f:
                return Reply(
                    200, {"jsonrpc": "2.0", "id": None, "result": {"resultType": "complete"}}
                )
            return Reply(400, self.envelope(None, spec.INVALID_REQUEST))
        try:
            result = self.request(rid, body, request)
        except RpcError as exc:
            return self.error(rid, exc)
        if isinstance(result, Reply):
            return result
        headers = {"mcp-session-id": "s-1"} if "session-id" in f else {}
        return Reply(200, {"jsonrpc": "2.0", "id": rid, "result": result}, headers)

    def envelope(
        self, rid: Any, code: int, message: str = "Invalid Request", data: Any = None
    ) -> dict[str, Any]:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        if "error-id-string" in self.f and rid is not None:
            rid = str(rid)
        return {"jsonrpc": "2.0", "id": rid, "error": error}

    def error(self, rid: Any, exc: RpcError, status: int | None = None) -> Reply:
        code = exc.code
        if code == spec.HEADER_MISMATCH and "header-mismatch-legacy-code" in self.f:
            code = -32001
        status = status or exc.status or spec.HTTP_STATUS.get(exc.code, 200)
        if exc.code == spec.METHOD_NOT_FOUND and "unknown-method-400" in self.f:
            status = 400
        if exc.code == spec.UNSUPPORTED_PROTOCOL_VERSION and "version-status-200" in self.f:
            status = 200
        return Reply(status, self.envelope(rid, code, exc.message, exc.data))

    def notification(self, body: dict[str, Any]) -> Reply:
        params = body.get("params") or {}
        if body["method"] == "notifications/cancelled" and "notification-cancels-task" in self.f:
            tid = self.tasks.by_request.get(params.get("requestId"))
            if tid is not None:
                self.tasks.end(self.tasks.tasks[tid], "cancelled")
        if "notification-body" in self.f:
            return Reply(202, {"jsonrpc": "2.0", "result": {}})
        return Reply(202)

    # --- the validation ladder --------------------------------------------------------------------
    def request(
        self, rid: Any, body: dict[str, Any], request: httpx.Request
    ) -> dict[str, Any] | Reply:
        f = self.f
        method: str = body["method"]
        params = body.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        meta_version = meta.get(spec.META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        version = self.header(request, spec.H_PROTOCOL_VERSION)
        if meta_version is None and (
            version == LEGACY or (version is None and method == "initialize")
        ):
            return self.legacy(method, params if isinstance(params, dict) else {})
        if version is None:
            if "version-header-optional" not in f:
                raise RpcError(spec.HEADER_MISMATCH, "MCP-Protocol-Version is required")
            version = spec.VERSION
        if (
            meta_version is not None
            and meta_version != version
            and "version-mismatch-ignored" not in f
        ):
            raise RpcError(spec.HEADER_MISMATCH, "MCP-Protocol-Version differs from _meta")
        if version != spec.VERSION and not (version == LEGACY and "legacy-version-accepted" in f):
            supported = [spec.VERSION, "2024-01-01"] if "supported-extra" in f else [spec.VERSION]
            data = (
                {"supported": supported}
                if "version-data-missing" in f
                else {"supported": supported, "requested": version}
            )
            raise RpcError(spec.UNSUPPORTED_PROTOCOL_VERSION, "unsupported version", data)
        params, caps = self.envelope_params(params)
        self.routing(method, params, request)
        return self.dispatch(rid, method, params, caps, request)

    def envelope_params(self, params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        f = self.f
        default = {spec.META_PROTOCOL_VERSION: spec.VERSION, spec.META_CLIENT_CAPABILITIES: {}}
        if not isinstance(params, dict):
            if "params-optional" not in f:
                raise RpcError(spec.INVALID_PARAMS, "params are required", status=400)
            params = {"_meta": default}
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            if "meta-optional" not in f:
                raise RpcError(spec.INVALID_PARAMS, "_meta is required", status=400)
            meta = default
        if spec.META_PROTOCOL_VERSION not in meta and "meta-version-optional" not in f:
            raise RpcError(spec.INVALID_PARAMS, "_meta lacks protocolVersion", status=400)
        caps = meta.get(spec.META_CLIENT_CAPABILITIES)
        if caps is None and "meta-caps-optional" not in f:
            raise RpcError(spec.INVALID_PARAMS, "_meta lacks clientCapabilities", status=400)
        if caps is not None and not isinstance(caps, dict) and "caps-any-type" not in f:
            raise RpcError(spec.INVALID_PARAMS, "clientCapabilities must be an object", status=400)
        if spec.META_CLIENT_INFO not in meta and "client-info-required" in f:
            raise RpcError(spec.INVALID_PARAMS, "clientInfo is required", status=400)
        return params, caps if isinstance(caps, dict) else {}

    def routing(self, method: str, params: dict[str, Any], request: httpx.Request) -> None:
        f = self.f
        header_method = self.header(request, spec.H_METHOD)
        if header_method is None and "method-header-optional" not in f:
            raise RpcError(spec.HEADER_MISMATCH, "Mcp-Method is required")
        same = header_method == method or (
            "method-header-case-insensitive" in f
            and (header_method or "").lower() == method.lower()
        )
        tolerated = {"method-header-ignored", "method-header-wins"} & f
        if header_method is not None and not same and not tolerated:
            raise RpcError(spec.HEADER_MISMATCH, "Mcp-Method differs from the body")
        name_field = spec.NAME_FIELDS.get(method)
        if name_field is None:
            return
        name = self.header(request, spec.H_NAME)
        tasks = method.startswith("tasks/")
        if name is None:
            if (not tasks and "name-optional" not in f) or (tasks and "task-name-required" in f):
                raise RpcError(spec.HEADER_MISMATCH, "Mcp-Name is required")
            if tasks and "task-name-missing-breaks" in f:
                raise invalid("no Mcp-Name")
            return
        if tasks and "task-name-always-mismatch" in f:
            raise RpcError(spec.HEADER_MISMATCH, "Mcp-Name mismatch")
        ignored = {"tools/call": "name-mismatch-ignored"}.get(method, f"{method}-name-ignored")
        if decode(name, f) != params.get(name_field) and ignored not in f:
            raise RpcError(spec.HEADER_MISMATCH, "Mcp-Name differs from the body")

    # --- methods ----------------------------------------------------------------------------------
    def dispatch(
        self,
        rid: Any,
        method: str,
        params: dict[str, Any],
        caps: dict[str, Any],
        request: httpx.Request,
    ) -> dict[str, Any] | Reply:
        f = self.f
        if "method-header-wins" in f:
            method = self.header(request, spec.H_METHOD) or method
        if method in REMOVED:
            if REMOVED[method] in f:
                return {"resultType": "complete"}
            raise RpcError(spec.METHOD_NOT_FOUND, f"Method not found: {method}; use {spec.VERSION}")
        if method == "server/discover":
            return self.discover(caps)
        if method == "tools/list":
            return self.tools_list(params)
        if method == "tools/call":
            return self.tools_call(rid, params, caps, request)
        if method == "prompts/list":
            return {
                "resultType": "complete",
                "prompts": [{"name": "simple"}],
                "ttlMs": 0,
                "cacheScope": "public",
            }
        if method == "prompts/get":
            if "prompt-task" in f:
                return {"resultType": "task", "taskId": "tk-prompt", "status": "working"}
            return {"resultType": "complete", "messages": []}
        if method == "resources/list":
            return {
                "resultType": "complete",
                "resources": [{"uri": "test://static-text", "name": "t"}],
                "ttlMs": 0,
                "cacheScope": "public",
            }
        if method == "resources/read":
            return {"resultType": "complete", "contents": [], "ttlMs": 0, "cacheScope": "public"}
        if method.startswith("tasks/") and method in ("tasks/get", "tasks/update", "tasks/cancel"):
            return self.task_method(method, params, caps)
        if method == "subscriptions/listen":
            return self.listen(rid, params, caps)
        raise RpcError(spec.METHOD_NOT_FOUND, f"Method not found: {method}")

    def listen(
        self, rid: Any, params: dict[str, Any], caps: dict[str, Any]
    ) -> dict[str, Any] | Reply:
        """Task notifications: the ack, each task's view now and at its end, the result."""
        f = self.f
        wanted = (params.get("notifications") or {}).get("taskIds")
        if "listen-ok" in f:
            return {"resultType": "complete"}
        if wanted is not None and spec.TASKS_EXTENSION not in (caps.get("extensions") or {}):
            raise needs_tasks()
        ids = [i for i in wanted or [] if i in self.tasks.tasks]
        sub = {spec.META_SUBSCRIPTION_ID: rid}
        agreed = [*ids, "tk-unrequested"] if "listen-ack-extra-ids" in f else ids
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": sub, "notifications": {"taskIds": agreed}}}  # fmt: skip
        frames: list[dict[str, Any]] = []
        for tid in ids:
            task = self.tasks.tasks[tid]
            for _ in range(2):
                view = self.tasks.shape(task, caps=caps)
                if "listen-view-result-type" not in f:
                    del view["resultType"]
                if "listen-view-differs" in f and task.ended:
                    view["statusMessage"] = "not what tasks/get says"
                frames.append({"jsonrpc": "2.0", "method": "notifications/tasks",
                               "params": {**view, "_meta": sub}})  # fmt: skip
                task.ends = min(task.ends or 0.0, time.time())
                self.tasks.advance(task)
        if "listen-progress" in f:
            frames.append({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": rid, "progress": 1}})  # fmt: skip
        if "listen-unrequested" in f:
            frames.append({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                           "params": {"_meta": sub}})  # fmt: skip
        done = {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "_meta": sub}}
        messages = [*frames[:1], ack, *frames[1:]] if "listen-ack-late" in f else [ack, *frames]
        return Reply(200, sse=[*messages, done], headers={"x-accel-buffering": "no"})

    def discover(self, caps: dict[str, Any]) -> dict[str, Any] | Reply:
        f = self.f
        capabilities: dict[str, Any] = {"tools": {}, "prompts": {}, "resources": {}}
        capabilities["extensions"] = {
            spec.TASKS_EXTENSION: {"x": 1} if "discover-ext-settings" in f else {}
        }
        if "discover-legacy-tasks" in f:
            capabilities["tasks"] = {"list": {}}
        if "discover-caps-vary" in f and caps.get("extensions"):
            capabilities["logging"] = {}
        result: dict[str, Any] = {
            "resultType": "task" if "discover-type-task" in f else "complete",
            "supportedVersions": [] if "discover-no-version" in f else [spec.VERSION],
            "capabilities": capabilities,
            "ttlMs": 60000,
            "cacheScope": "private",
            "_meta": {} if "discover-no-server-info" in f else {spec.META_SERVER_INFO: SERVER_INFO},
        }
        if "discover-no-ttl" in f:
            del result["ttlMs"]
        if "discover-text-plain" in f:
            return Reply(200, None, {"content-type": "text/plain"})
        return result

    def tools_list(self, params: dict[str, Any]) -> dict[str, Any]:
        f = self.f
        self.listings += "cursor" not in params
        tools = list(TOOLS)
        if "list-changes-after-call" in f and self.calls:
            tools.append({"name": "extra_tool", "inputSchema": {"type": "object"}})
        if "list-order-varies" in f and self.listings % 2 == 0:
            tools.reverse()
        second = params.get("cursor") == "p2"
        page = tools[len(tools) // 2 :] if second else tools[: len(tools) // 2]
        result: dict[str, Any] = {
            "resultType": "complete",
            "tools": page,
            "ttlMs": 1000,
            "cacheScope": "private",
        }
        if second and "list-page-scope" in f:
            result["cacheScope"] = "public"
        if not second:
            result["nextCursor"] = "p2"
        if "list-no-cache" in f:
            del result["ttlMs"]
        if "result-type-missing" in f:
            del result["resultType"]
        return result

    def tools_call(
        self, rid: Any, params: dict[str, Any], caps: dict[str, Any], request: httpx.Request
    ) -> dict[str, Any] | Reply:
        f = self.f
        self.calls += 1
        name, args = params.get("name"), params.get("arguments") or {}
        if name not in {t["name"] for t in TOOLS}:
            if "unknown-tool-result" in f:
                return {**text("no such tool"), "isError": True}
            raise invalid(f"Unknown tool: {name}")
        if name == "test_headers":
            for arg, header in (("region", "Region"), ("count", "Count")):
                if arg not in args:
                    continue
                got = self.header(request, spec.H_PARAM_PREFIX + header)
                if got is None:
                    if "param-optional" not in f:
                        raise RpcError(spec.HEADER_MISMATCH, f"Mcp-Param-{header} is required")
                    continue
                value = got if "param-no-base64" in f else decode(got, f)
                if value != str(args[arg]) and "param-mismatch-ignored" not in f:
                    raise RpcError(spec.HEADER_MISMATCH, f"Mcp-Param-{header} differs")
            return text(f"region={args.get('region')}")
        if name == "test_tool_with_progress":
            token = (params.get("_meta") or {}).get("progressToken")
            final = {"jsonrpc": "2.0", "id": rid, "result": text("done")}
            if token is None:
                return text("done")
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1},
            }
            messages = [note, final]
            if "sse-request" in f:
                messages.insert(
                    0, {"jsonrpc": "2.0", "id": 99, "method": "roots/list", "params": {}}
                )
            hdrs = {} if "sse-buffered" in f else {"x-accel-buffering": "no"}
            return Reply(200, headers=hdrs, sse=messages)
        return self.tasks.call(str(name), args, caps, params, rid)

    def task_method(
        self, method: str, params: dict[str, Any], caps: dict[str, Any]
    ) -> dict[str, Any]:
        f = self.f
        ext = spec.TASKS_EXTENSION in (caps.get("extensions") or {})
        tid = params.get("taskId")
        sticky = "caps-sticky" in f and tid in self.tasks.tasks
        if "gate-after-lookup" in f:
            self.tasks.find(tid)
        gate_off = {
            "tasks/get": "tasks-get-no-gate",
            "tasks/update": "tasks-update-no-gate",
            "tasks/cancel": "tasks-cancel-no-gate",
        }[method]
        if not ext and not sticky and gate_off not in f:
            raise needs_tasks()
        if method == "tasks/get":
            return self.tasks.get(params, caps)
        if method == "tasks/update":
            return self.tasks.update(params)
        return self.tasks.cancel(params)

    def legacy(self, method: str, params: dict[str, Any]) -> dict[str, Any] | Reply:
        if method == "initialize":
            return {
                "protocolVersion": LEGACY,
                "capabilities": {"tools": {}},
                "serverInfo": SERVER_INFO,
            }
        if method == "tools/call":
            if "legacy-era-task" in self.f:
                return {"task": {"taskId": "tk-legacy", "status": "working"}}
            return {"content": [{"type": "text", "text": "legacy"}]}
        raise RpcError(spec.METHOD_NOT_FOUND, f"Method not found: {method}")
