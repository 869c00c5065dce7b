"""The server conformance checklist (tests/conformance/CHECKLIST.md, sections A-J and M),
black-box over real HTTP against the fixture tools of tests/apps/mcp_fixtures.py.

Every test names its checklist items in the docstring. Each test starts one server and groups
the items that share a setup. Every reply any test receives also passes the error-code hygiene
checks of section M (and item 54) in `CheckedClient.post`, so those hold suite-wide.
Proved elsewhere: K (130, 131: tests/e2e/test_auth.py and tests/e2e/test_security_matrix.py,
where a reader or another tenant is refused every tasks/* call and no table changes; 132 is
here) and L (133-135: tests/e2e/test_push.py, the ack first, frames equal to tasks/get, and
nothing but notifications/tasks on the stream).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import string
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any

import httpx
import orjson
import pytest

from tests.apps.mcp_fixtures import PROTOCOL_ERROR_CODE, app
from tests.e2e.conftest import ServeFn
from tests.mcp_client import TASKS, VERSION, McpClient, meta
from tether.conformance.spec import TASK_STATUSES, TERMINAL
from tether.jsonrpc import codes

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

M0: dict[str, Any] = {}
MT: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}
TASKS_ONLY: dict[str, Any] = {"extensions": {TASKS: {}}}
LEGACY_TASKS_CAP: dict[str, Any] = {"tasks": {"requests": {"tools": {"call": {}}}}}
TASK_FIELDS = {"taskId", "status", "result", "error", "inputRequests"}
INPUT_METHODS = {"elicitation/create", "sampling/createMessage", "roots/list"}
SSE = "text/event-stream"
FORBIDDEN_CODES = {-32001, -32002, -32003, -32004, -32042}
SPEC_CODES = {
    codes.HEADER_MISMATCH,
    codes.MISSING_REQUIRED_CLIENT_CAPABILITY,
    codes.UNSUPPORTED_PROTOCOL_VERSION,
}


# --- a client that checks every reply (section M, item 54) --------------------------------------


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body."""
    out = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")]
        if data:
            out.append(orjson.loads("\n".join(data)))
    return out


def _header(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def _valid_request(sent: Any) -> dict[str, Any] | None:
    if not isinstance(sent, dict) or sent.get("jsonrpc") != "2.0":
        return None
    rid = sent.get("id")
    if not isinstance(sent.get("method"), str) or isinstance(rid, bool):
        return None
    return sent if isinstance(rid, str | int) else None


def check_error(error: dict[str, Any], status: int | None) -> None:
    """Items 136-139: only spec codes in the MCP range, the right data and HTTP status."""
    code = error["code"]
    assert isinstance(code, int) and not isinstance(code, bool), error
    assert isinstance(error["message"], str), error
    assert code not in FORBIDDEN_CODES, error
    assert not -32019 <= code <= -32000, f"legacy code {error}"
    assert not (-32099 <= code <= -32020) or code in SPEC_CODES, f"undefined MCP code {error}"
    if code == codes.MISSING_REQUIRED_CLIENT_CAPABILITY:
        assert isinstance(error["data"]["requiredCapabilities"], dict), error
    if code == codes.UNSUPPORTED_PROTOCOL_VERSION:
        supported = error["data"]["supported"]
        assert isinstance(supported, list) and supported, error
        assert all(isinstance(v, str) for v in supported), error
        assert isinstance(error["data"]["requested"], str), error
    if status is not None and code in SPEC_CODES:
        assert status == 400, (status, error)
    if status is not None and code == codes.METHOD_NOT_FOUND:
        assert status == 404, (status, error)


def check_reply(sent: Any, headers: dict[str, str], resp: httpx.Response) -> None:
    """Checks that hold for every reply in this suite."""
    assert resp.status_code < 500, (resp.status_code, resp.text)
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        messages, status = sse_messages(resp.text), None
    elif ctype.startswith("application/json") and resp.content:
        messages, status = [resp.json()], resp.status_code
    else:
        return
    request = _valid_request(sent)
    modern = (_header(headers, codes.H_PROTOCOL_VERSION) or "").strip() == VERSION
    for m in messages:
        assert not ("method" in m and "id" in m), f"the server sent a request: {m}"  # item 14
        if "method" in m:
            continue  # a notification on the stream
        if "error" in m:
            check_error(m["error"], status)
        if "result" in m and modern:
            assert isinstance(m["result"].get("resultType"), str), m  # item 54
            if request is not None and str(request["method"]).startswith("tasks/"):
                assert m["result"]["resultType"] == "complete", m  # item 94
        if request is not None and resp.status_code != 403:  # 403 MAY be id-less (transport)
            assert m["id"] == request["id"], (m, request)  # item 11
            assert type(m["id"]) is type(request["id"]), (m, request)


class CheckedClient(McpClient):
    """McpClient whose every reply is checked by `check_reply`, with a choosable request id."""

    async def post(self, body: Any, headers: dict[str, str]) -> httpx.Response:
        resp = await super().post(body, headers)
        sent = orjson.loads(body) if isinstance(body, bytes) and _is_json(body) else body
        check_reply(sent, headers, resp)
        return resp

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        headers: Mapping[str, str | None] | None = None,
        request_id: str | int | None = None,
    ) -> httpx.Response:
        p = dict(params or {})
        p.setdefault("_meta", meta(capabilities))
        h: dict[str, str] = self.headers(method, p)
        for k, v in (headers or {}).items():
            for existing in [x for x in h if x.lower() == k.lower()]:
                h.pop(existing)
            if v is not None:
                h[k] = v
        rid = next(self._ids) if request_id is None else request_id
        return await self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": p}, h)


def _is_json(body: bytes) -> bool:
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return True


Connect = Callable[..., contextlib.AbstractAsyncContextManager[CheckedClient]]


@pytest.fixture
def server(mcp_server: ServeFn) -> Connect:
    """`async with server(**settings) as c:` — the fixtures app served, and a checked client."""

    @contextlib.asynccontextmanager
    async def start(**settings: Any) -> AsyncIterator[CheckedClient]:
        async with mcp_server(app, **settings) as url:
            c = CheckedClient(url)
            try:
                yield c
            finally:
                await c.aclose()

    return start


# --- helpers --------------------------------------------------------------------------------------


def error_of(resp: httpx.Response, code: int, status: int) -> dict[str, Any]:
    """The JSON-RPC error of a reply, after checking its code and HTTP status."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    body: dict[str, Any] = resp.json()
    assert "error" in body, body
    assert body["error"]["code"] == code, body
    return body


def result_of(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, (resp.status_code, resp.text)
    body: dict[str, Any] = resp.json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def ack_only(result: dict[str, Any]) -> None:
    """An empty acknowledgement: `{"resultType": "complete"}` plus an optional `_meta`."""
    assert result["resultType"] == "complete"
    assert set(result) <= {"resultType", "_meta"}, result


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def create(
    c: CheckedClient, tool: str, arguments: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    """tools/call that must return a CreateTaskResult."""
    created = await c.result("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)
    assert created["resultType"] == "task", created
    return created


async def run_status(c: CheckedClient, task_id: str) -> str:
    """The run's own status through its resource (lets a test see a parked run without a
    tasks/get that could show input requests)."""
    uri = f"tether://runs/{task_id}"
    res = await c.result("resources/read", {"uri": uri})
    status: str = orjson.loads(res["contents"][0]["text"])["status"]
    return status


async def wait_run(c: CheckedClient, task_id: str, status: str, timeout: float = 10) -> None:
    """Poll the run resource until the run has `status` (polling is the protocol)."""
    async with asyncio.timeout(timeout):
        while True:
            if await run_status(c, task_id) == status:
                return
            await asyncio.sleep(0.02)


async def raw_post(url: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
    """POST over a bare socket, for header values httpx refuses to send (surrounding spaces:
    HTTP parsing trims them, RFC 9110 §5.5). Returns the status and the JSON body."""
    u = httpx.URL(url)
    payload = orjson.dumps(body)
    lines = [f"POST {u.raw_path.decode()} HTTP/1.1", f"Host: {u.host}:{u.port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines += [f"Content-Length: {len(payload)}", "Connection: close", "", ""]
    reader, writer = await asyncio.open_connection(u.host, u.port)
    try:
        writer.write("\r\n".join(lines).encode() + payload)
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, content = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, orjson.loads(content)


def key_for(task: dict[str, Any], field: str) -> str:
    """The inputRequests key whose form asks for `field`."""
    key: str
    (key,) = [
        k
        for k, r in task["inputRequests"].items()
        if field in r["params"]["requestedSchema"]["properties"]
    ]
    return key


async def wait_key_taken(c: CheckedClient, task_id: str, key: str) -> dict[str, Any]:
    """Poll until the task asks for input again without `key` (the answer was taken); the
    task may show `working` meanwhile but never ends."""
    async with asyncio.timeout(10):
        while True:
            task = await c.result("tasks/get", {"taskId": task_id})
            assert task["status"] in {"working", "input_required"}, task
            if task["status"] == "input_required" and key not in task["inputRequests"]:
                return task
            await asyncio.sleep(0.02)


def sync_call_result(result: dict[str, Any]) -> dict[str, Any]:
    """A CallToolResult without the envelope additions (resultType, _meta serverInfo)."""
    return {k: v for k, v in result.items() if k not in ("resultType", "_meta")}


# --- A. HTTP transport basics ---------------------------------------------------------------------


async def test_the_endpoint_serves_post_only_checks_origin_and_ignores_session_headers(
    server: Connect,
) -> None:
    """Checklist 1, 2, 3, 4, 5, 12, 13, 14: server/discover is 200 JSON with the request id;
    GET and DELETE are 405; a foreign Origin is 403, no Origin or a loopback one is not;
    Mcp-Session-Id and Last-Event-ID are ignored and no session id is minted; an SSE reply has
    `X-Accel-Buffering: no` and carries only notifications and the final response."""
    async with server() as c:
        resp = await c.request("server/discover", capabilities=M0, request_id="d-1")
        assert resp.status_code == 200  # 1
        assert resp.headers["content-type"].split(";")[0] in ("application/json", SSE)
        assert resp.json()["id"] == "d-1" and "result" in resp.json()

        assert (await c.http.get(c.url)).status_code == 405  # 2
        assert (await c.http.delete(c.url)).status_code == 405  # 3

        for origin in ("http://evil.example", "https://127.0.0.1.evil.example", "null"):  # 4
            resp = await c.request("server/discover", headers={"Origin": origin})
            assert resp.status_code == 403, origin
        port = httpx.URL(c.url).port
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):  # 5
            resp = await c.request("server/discover", headers={"Origin": origin})
            assert resp.status_code == 200, origin

        resp = await c.request("server/discover", headers={"Mcp-Session-Id": "s-123"})  # 12
        assert resp.status_code == 200 and "result" in resp.json()
        assert "mcp-session-id" not in resp.headers

        resp = await c.request("server/discover", headers={"Last-Event-ID": "evt-9"})  # 13
        assert resp.status_code == 200 and "result" in resp.json()

        m = meta(M0, progressToken="p-1")  # 14
        call = {"name": "sync_tool", "arguments": {"text": "hi"}, "_meta": m}
        resp = await c.request("tools/call", call, request_id=41)
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith(SSE)
        assert resp.headers["x-accel-buffering"] == "no"
        *notes, final = sse_messages(resp.text)
        assert all("id" not in n and n["method"].startswith("notifications/") for n in notes)
        assert [n["params"]["progressToken"] for n in notes] == ["p-1"]
        assert final["id"] == 41
        assert final["result"]["structuredContent"] == {"echo": "hi"}


async def test_bad_bodies_are_400_notifications_202_and_errors_keep_the_id(
    server: Connect,
) -> None:
    """Checklist 6, 7, 8, 9, 10, 11: not JSON → -32700; a batch, a null id, a posted response
    → -32600; all 400 without an id (the response's own id is readable); an accepted
    notification → 202 with no body; error replies keep the request id and its JSON type."""
    async with server() as c:
        h = c.headers("server/discover", {})
        one = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}}
        body = error_of(await c.post(b"{not json", h), codes.PARSE_ERROR, 400)  # 6
        assert body.get("id") is None
        body = error_of(await c.post([one], h), codes.INVALID_REQUEST, 400)  # 7
        assert body.get("id") is None
        body = error_of(await c.post({**one, "id": None}, h), codes.INVALID_REQUEST, 400)  # 8
        assert body.get("id") is None
        response = {"jsonrpc": "2.0", "id": 5, "result": {"resultType": "complete"}}
        error_of(await c.post(response, h), codes.INVALID_REQUEST, 400)  # 9

        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 99, "reason": "user", "_meta": meta()},
        }
        resp = await c.post(note, c.headers("notifications/cancelled", {}))
        assert (resp.status_code, resp.content) == (202, b"")  # 10

        for rid in ("7", 7, "", 0, "x-y"):  # 11
            replies = [
                error_of(await c.request("foo/bar", request_id=rid), codes.METHOD_NOT_FOUND, 404),
                error_of(
                    await c.request("tools/list", request_id=rid, headers={"Mcp-Method": None}),
                    codes.HEADER_MISMATCH,
                    400,
                ),
                error_of(
                    await c.request("tools/call", {"name": "nope"}, request_id=rid),
                    codes.INVALID_PARAMS,
                    200,
                ),
            ]
            for body in replies:
                assert body["id"] == rid and type(body["id"]) is type(rid)


async def test_errors_raised_before_any_progress_keep_their_http_status(
    server: Connect,
) -> None:
    """Checklist 139 (with 44 and 68): a request that may stream (it carries a progressToken)
    but fails before any notification is sent still gets HTTP 400 for -32021 and -32020."""
    async with server() as c:
        resp = await c.request(
            "tools/call",
            {"name": "required_task_tool", "arguments": {}, "_meta": meta(M0, progressToken=1)},
        )
        error_of(resp, codes.MISSING_REQUIRED_CLIENT_CAPABILITY, 400)
        resp = await c.request(
            "tools/call",
            {"name": "region_tool", "arguments": {"region": "eu"}, "_meta": meta(progressToken=2)},
        )
        error_of(resp, codes.HEADER_MISMATCH, 400)


# --- B. Protocol version and required _meta -------------------------------------------------------


async def test_version_and_meta_faults_are_refused_with_their_codes(server: Connect) -> None:
    """Checklist 15-25: missing version header → -32020; header ≠ `_meta` → -32020; both
    unserved → -32022 with `supported` ⊆ discover's `supportedVersions` and `requested`;
    missing params/`_meta`/protocolVersion/clientCapabilities or non-object capabilities →
    -32602/400; no clientInfo → served."""
    async with server() as c:
        discover = await c.result("server/discover", capabilities=M0)

        resp = await c.request("server/discover", headers={"MCP-Protocol-Version": None})
        error_of(resp, codes.HEADER_MISMATCH, 400)  # 15

        m = meta(M0)
        m[codes.META_PROTOCOL_VERSION] = "2099-01-01"
        resp = await c.request("server/discover", {"_meta": m})
        error_of(resp, codes.HEADER_MISMATCH, 400)  # 16

        for version in ("1900-01-01", "2025-11-25"):  # 17, 18, 19
            m = meta(M0)
            m[codes.META_PROTOCOL_VERSION] = version
            resp = await c.request(
                "server/discover", {"_meta": m}, headers={"MCP-Protocol-Version": version}
            )
            data = error_of(resp, codes.UNSUPPORTED_PROTOCOL_VERSION, 400)["error"]["data"]
            assert data["requested"] == version
            assert VERSION in data["supported"]
            assert set(data["supported"]) <= set(discover["supportedVersions"])

        h = c.headers("server/discover", {})
        bare = {"jsonrpc": "2.0", "id": 20, "method": "server/discover"}
        error_of(await c.post(bare, h), codes.INVALID_PARAMS, 400)  # 20
        error_of(await c.post({**bare, "params": {}}, h), codes.INVALID_PARAMS, 400)  # 21

        for drop in (codes.META_PROTOCOL_VERSION, codes.META_CLIENT_CAPABILITIES):  # 22, 23
            m = meta(M0)
            del m[drop]
            error_of(await c.request("server/discover", {"_meta": m}), codes.INVALID_PARAMS, 400)

        m = meta(M0)
        del m[codes.META_CLIENT_INFO]
        assert (await c.result("server/discover", {"_meta": m}))["resultType"] == "complete"  # 24

        m = meta(M0)
        m[codes.META_CLIENT_CAPABILITIES] = "x"
        resp = await c.request("server/discover", {"_meta": m})
        error_of(resp, codes.INVALID_PARAMS, 400)  # 25


# --- C. Routing headers ---------------------------------------------------------------------------


async def test_mcp_method_and_mcp_name_must_mirror_the_body(server: Connect) -> None:
    """Checklist 27-37: Mcp-Method missing, different or differently cased → -32020; header
    names in any case are fine; Mcp-Name missing or different on tools/call → -32020; a Base64
    sentinel is decoded first; bad padding, bad characters and an uppercase marker → -32020;
    surrounding whitespace is trimmed."""
    async with server() as c:
        error_of(
            await c.request("tools/list", headers={"Mcp-Method": None}), codes.HEADER_MISMATCH, 400
        )
        error_of(
            await c.request("server/discover", headers={"Mcp-Method": "tools/list"}),
            codes.HEADER_MISMATCH,
            400,
        )
        error_of(
            await c.request("tools/list", headers={"Mcp-Method": "TOOLS/LIST"}),
            codes.HEADER_MISMATCH,
            400,
        )
        for name in ("mcp-method", "MCP-METHOD"):  # 30
            resp = await c.request("tools/list", headers={"Mcp-Method": None, name: "tools/list"})
            assert resp.status_code == 200, name

        call = {"name": "sync_tool", "arguments": {}}
        refused = {
            "missing": None,
            "other": "other",
            "bad padding": "=?base64?SGVsbG8?=",
            "bad alphabet": "=?base64?SGVs!!!bG8=?=",
            "uppercase marker": "=?BASE64?c3luY190b29s?=",
        }
        for label, value in refused.items():  # 31, 32, 34, 35, 36
            resp = await c.request("tools/call", call, headers={"Mcp-Name": value})
            assert resp.status_code == 400, label
            error_of(resp, codes.HEADER_MISMATCH, 400)

        res = result_of(await c.request("tools/call", call, headers={"Mcp-Name": b64("sync_tool")}))
        assert res["structuredContent"] == {"echo": "hello"}  # 33

        body = {
            "jsonrpc": "2.0",
            "id": 37,
            "method": "tools/call",
            "params": {**call, "_meta": meta()},
        }
        hdrs = {**c.headers("tools/call", call), "Mcp-Name": "   sync_tool  "}
        status, reply = await raw_post(c.url, hdrs, body)
        assert status == 200, reply
        assert reply["result"]["structuredContent"] == {"echo": "hello"}  # 37


async def test_task_routing_headers_must_name_the_task(server: Connect) -> None:
    """Checklist 38-43: tasks/get with a matching Mcp-Name works; a different Mcp-Name on
    tasks/get, tasks/update or tasks/cancel → -32020; a missing one on tasks/get is accepted
    (Tether's interop choice); a tasks/get body sent as `Mcp-Method: tasks/cancel` → -32020
    and the task is not cancelled."""
    async with server() as c:
        task_id = (await create(c, "task_tool", {"long": True}))["taskId"]
        got = await c.result("tasks/get", {"taskId": task_id})  # 38
        assert got["taskId"] == task_id

        extra: dict[str, Any]
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ):  # 39, 40, 41
            resp = await c.request(
                method, {"taskId": task_id, **extra}, headers={"Mcp-Name": "ex_other"}
            )
            error_of(resp, codes.HEADER_MISMATCH, 400)

        got = result_of(
            await c.request("tasks/get", {"taskId": task_id}, headers={"Mcp-Name": None})
        )
        assert got["taskId"] == task_id  # 42

        resp = await c.request(
            "tasks/get", {"taskId": task_id}, headers={"Mcp-Method": "tasks/cancel"}
        )
        error_of(resp, codes.HEADER_MISMATCH, 400)  # 43
        assert (await c.result("tasks/get", {"taskId": task_id}))["status"] == "working"
        assert await run_status(c, task_id) not in ("cancelled",)


async def test_x_mcp_header_arguments_must_travel_as_mcp_param_headers(server: Connect) -> None:
    """Checklist 44, 45: an `x-mcp-header` argument without its Mcp-Param header, or with a
    different value → -32020; a matching plain, Base64 or numerically equal value → served."""
    async with server() as c:
        tools = (await c.result("tools/list"))["tools"]
        region = next(t for t in tools if t["name"] == "region_tool")
        assert region["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"

        call = {"name": "region_tool", "arguments": {"region": "eu-west-1", "count": 3}}
        both = {"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Count": "3"}
        for label, hdrs in {
            "no Region": {"Mcp-Param-Count": "3"},
            "no Count": {"Mcp-Param-Region": "eu-west-1"},
            "other Region": {**both, "Mcp-Param-Region": "us-east-1"},
            "other Count": {**both, "Mcp-Param-Count": "4"},
            "bad Base64": {**both, "Mcp-Param-Region": "=?base64?ZXU?=="},
        }.items():
            resp = await c.request("tools/call", call, headers=hdrs)
            assert resp.status_code == 400, label
            error_of(resp, codes.HEADER_MISMATCH, 400)

        for hdrs in (
            both,
            {"Mcp-Param-Region": b64("eu-west-1"), "Mcp-Param-Count": "3.0"},
            {"mcp-param-region": "eu-west-1", "MCP-PARAM-COUNT": "3"},
        ):
            res = result_of(await c.request("tools/call", call, headers=hdrs))
            assert res["structuredContent"] == {"region": "eu-west-1", "count": 3}, hdrs

        body = {
            "jsonrpc": "2.0",
            "id": 45,
            "method": "tools/call",
            "params": {**call, "_meta": meta()},
        }
        hdrs = {
            **c.headers("tools/call", call),
            "Mcp-Param-Region": "  eu-west-1 ",
            "Mcp-Param-Count": "3",
        }
        status, reply = await raw_post(c.url, hdrs, body)
        assert status == 200, reply
        assert reply["result"]["structuredContent"] == {"region": "eu-west-1", "count": 3}

        # An absent argument must not have its header (and needs none).
        res = result_of(
            await c.request(
                "tools/call",
                {"name": "region_tool", "arguments": {}},
            )
        )
        assert res["structuredContent"] == {"region": None, "count": None}


# --- D. Method routing and resultType -------------------------------------------------------------


async def test_unknown_removed_and_unadvertised_methods_are_not_found(server: Connect) -> None:
    """Checklist 46-53, 78, 132: foo/bar, initialize (2026 envelope), ping, logging/setLevel,
    resources/(un)subscribe, tasks/result, tasks/list, subscriptions/listen and a method whose
    capability is not advertised (completion/complete) → -32601 with HTTP 404."""
    async with server() as c:
        discover = await c.result("server/discover")
        assert "completions" not in discover["capabilities"]
        task_id = (await create(c, "task_tool", {"long": True}))["taskId"]
        calls: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
            ("foo/bar", {}, None),
            (
                "initialize",
                {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t"}},
                None,
            ),
            ("ping", {}, None),
            ("logging/setLevel", {"level": "debug"}, None),
            ("resources/subscribe", {"uri": "fixture://hello"}, None),
            ("resources/unsubscribe", {"uri": "fixture://hello"}, None),
            ("tasks/result", {"taskId": task_id}, MT),
            ("tasks/list", {}, MT),
            (
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": "greeting"},
                    "argument": {"name": "who", "value": "w"},
                },
                None,
            ),
        ]
        for method, params, caps in calls:
            resp = await c.request(method, params, capabilities=caps)
            assert resp.status_code == 404, (method, resp.text)
            error_of(resp, codes.METHOD_NOT_FOUND, 404)
        # subscriptions/listen is served: taskIds without the extension is -32021.
        listen = {"notifications": {"taskIds": [task_id]}}
        resp = await c.request("subscriptions/listen", listen, capabilities=M0)
        error_of(resp, codes.MISSING_REQUIRED_CLIENT_CAPABILITY, 400)


async def test_a_modern_initialize_is_told_which_versions_are_served(server: Connect) -> None:
    """Checklist 47 [SHOULD]: the -32601 for a 2026-style `initialize` names the supported
    versions, so the client can tell it must use server/discover."""
    async with server() as c:
        params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t"}}
        error = error_of(await c.request("initialize", params), codes.METHOD_NOT_FOUND, 404)[
            "error"
        ]
        assert VERSION in error["message"] or VERSION in orjson.dumps(error.get("data")).decode()


async def test_a_legacy_initialize_is_answered_the_legacy_way(server: Connect) -> None:
    """Checklist 47: without the 2026 header or `_meta`, `initialize` at 2025-06-18 or
    2025-11-25 is answered with that version and no `resultType`."""
    async with server() as c:
        for version in ("2025-06-18", "2025-11-25"):
            body = {
                "jsonrpc": "2.0",
                "id": f"init-{version}",
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "legacy", "version": "1"},
                },
            }
            hdrs = {"Content-Type": "application/json", "Accept": f"application/json, {SSE}"}
            res = result_of(await c.post(body, hdrs))
            assert res["protocolVersion"] == version
            assert "resultType" not in res
            assert "tasks" not in res["capabilities"]
            assert "extensions" not in res["capabilities"]


async def test_legacy_task_requests_are_told_tasks_need_the_extension(server: Connect) -> None:
    """Our reading of the Tasks extension's backward compatibility (context for checklist 79):
    under 2025-11-25 the extension does not exist, so tasks/get is handled as non-declaring →
    -32021/400."""
    async with server() as c:
        body = {"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {"taskId": "ex_x"}}
        hdrs = {
            "Content-Type": "application/json",
            "Accept": f"application/json, {SSE}",
            "MCP-Protocol-Version": "2025-11-25",
        }
        error_of(await c.post(body, hdrs), codes.MISSING_REQUIRED_CLIENT_CAPABILITY, 400)


# --- E. server/discover, tools/list, caching ------------------------------------------------------


async def test_discover_advertises_the_version_the_extension_and_cache_hints(
    server: Connect,
) -> None:
    """Checklist 55-60: resultType complete, supportedVersions with 2026-07-28, the tasks
    extension as `{}`, no legacy `tasks` capability, integer ttlMs ≥ 0 and a valid cacheScope,
    serverInfo in `_meta`, and the same capabilities whatever the caller declares."""
    async with server() as c:
        d0 = await c.result("server/discover", capabilities=M0)
        dt = await c.result("server/discover", capabilities=MT)
        for d in (d0, dt):
            assert d["resultType"] == "complete"
            assert VERSION in d["supportedVersions"]
            assert d["capabilities"]["extensions"][TASKS] == {}
            assert "tasks" not in d["capabilities"]
            assert isinstance(d["ttlMs"], int) and not isinstance(d["ttlMs"], bool)
            assert d["ttlMs"] >= 0
            assert d["cacheScope"] in ("public", "private")
            info = d["_meta"][codes.META_SERVER_INFO]
            assert isinstance(info["name"], str) and isinstance(info["version"], str)
        assert d0["capabilities"] == dt["capabilities"]


async def test_tools_list_is_cacheable_stable_and_unknown_tools_are_invalid_params(
    server: Connect,
) -> None:
    """Checklist 61-66: tools/list has resultType, tools, ttlMs and cacheScope on every page,
    the same order twice and the same set after a tools/call; an unknown tool → -32602; a sync
    tool called with the extension is complete with content and no taskId."""
    async with server() as c:

        async def all_tools() -> list[dict[str, Any]]:
            tools: list[dict[str, Any]] = []
            scopes: set[str] = set()
            params: dict[str, Any] = {}
            while True:
                page = await c.result("tools/list", params)
                assert page["resultType"] == "complete"
                assert isinstance(page["tools"], list)
                assert isinstance(page["ttlMs"], int) and page["ttlMs"] >= 0
                assert page["cacheScope"] in ("public", "private")
                scopes.add(page["cacheScope"])
                tools += page["tools"]
                if not page.get("nextCursor"):
                    break
                params = {"cursor": page["nextCursor"]}
            assert len(scopes) == 1  # 62
            return tools

        first = await all_tools()
        second = await all_tools()
        assert [t["name"] for t in first] == [t["name"] for t in second]  # 63
        assert {"sync_tool", "task_tool", "required_task_tool", "input_tool"} <= {
            t["name"] for t in first
        }

        sync = await c.result("tools/call", {"name": "sync_tool", "arguments": {"text": "x"}})
        assert sync["resultType"] == "complete"  # 66
        assert isinstance(sync["content"], list) and sync["content"]
        assert "taskId" not in sync
        assert await all_tools() == first  # 64

        resp = await c.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert "result" not in resp.json()
        error_of(resp, codes.INVALID_PARAMS, 200)  # 65


async def test_arguments_failing_a_tools_own_validator_are_invalid_params(
    server: Connect,
) -> None:
    """Spec error codes, checklist 136: bad tool arguments → a JSON-RPC -32602 reply, never a
    transport failure."""
    async with server() as c:
        resp = await c.request("tools/call", {"name": "sync_tool", "arguments": {"text": " "}})
        error_of(resp, codes.INVALID_PARAMS, 200)


# --- F. Task capability negotiation ---------------------------------------------------------------


async def test_only_a_request_declaring_the_extension_gets_a_task(server: Connect) -> None:
    """Checklist 67, 68, 69, 74, 75, 76: task_tool without the extension (or with only the
    legacy `tasks` capability, or the legacy `task` param) runs to a sync result;
    required_task_tool without it → -32021/400 naming the extension; task_tool with it →
    a task; sync_tool with the legacy `task` param → content, no task."""
    async with server() as c:
        for caps, extra in ((M0, {}), (LEGACY_TASKS_CAP, {}), (M0, {"task": {"ttl": 60000}})):
            res = await c.result(
                "tools/call", {"name": "task_tool", "arguments": {}, **extra}, capabilities=caps
            )
            assert res["resultType"] == "complete", (caps, extra)  # 67, 74, 76
            assert "taskId" not in res
            assert res["structuredContent"] == {"slept": 0.3}

        resp = await c.request(
            "tools/call", {"name": "required_task_tool", "arguments": {}}, capabilities=M0
        )
        data = error_of(resp, codes.MISSING_REQUIRED_CLIENT_CAPABILITY, 400)["error"]["data"]
        assert data["requiredCapabilities"]["extensions"][TASKS] == {}  # 68

        created = await create(c, "task_tool")  # 69
        assert created["resultType"] == "task"
        created = await create(c, "required_task_tool")
        assert created["resultType"] == "task"

        res = await c.result(
            "tools/call", {"name": "sync_tool", "arguments": {}, "task": {"ttl": 60000}}
        )
        assert res["resultType"] == "complete" and res["content"]  # 75
        assert "taskId" not in res


async def test_tasks_methods_need_the_extension_on_their_own_request(server: Connect) -> None:
    """Checklist 26, 70, 71, 72, 73: a task created with the extension cannot be read,
    updated or cancelled by a request that does not declare it (-32021/400, checked before the
    lookup); the refused cancel does not cancel."""
    async with server() as c:
        task_id = (await create(c, "task_tool", {"long": True}))["taskId"]
        extra: dict[str, Any]
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ):
            for tid in (task_id, "ex_unknown"):
                resp = await c.request(method, {"taskId": tid, **extra}, capabilities=M0)
                data = error_of(resp, codes.MISSING_REQUIRED_CLIENT_CAPABILITY, 400)["error"]
                assert data["data"]["requiredCapabilities"]["extensions"][TASKS] == {}
        assert (await c.result("tasks/get", {"taskId": task_id}))["status"] == "working"  # 72


async def test_prompts_resources_and_legacy_requests_never_return_a_task(
    server: Connect,
) -> None:
    """Checklist 77, 79: prompts/get and resources/read with the extension are complete
    results; a legacy (2025-11-25) tools/call declaring the extension is not a task."""
    async with server() as c:
        prompt = await c.result("prompts/get", {"name": "greeting", "arguments": {"who": "x"}})
        assert prompt["resultType"] == "complete" and prompt["messages"]
        res = await c.result("resources/read", {"uri": "fixture://hello"})
        assert res["resultType"] == "complete" and res["contents"][0]["text"] == "hello"

        legacy_meta = {codes.META_CLIENT_CAPABILITIES: MT}
        body = {
            "jsonrpc": "2.0",
            "id": 79,
            "method": "tools/call",
            "params": {"name": "task_tool", "arguments": {}, "_meta": legacy_meta},
        }
        hdrs = {
            "Content-Type": "application/json",
            "Accept": f"application/json, {SSE}",
            "MCP-Protocol-Version": "2025-11-25",
        }
        res = result_of(await c.post(body, hdrs))
        assert res.get("resultType") != "task"
        assert "taskId" not in res and "task" not in res
        assert res["structuredContent"] == {"slept": 0.3}


# --- G. CreateTaskResult --------------------------------------------------------------------------


async def test_a_create_task_result_is_flat_and_readable_at_once(server: Connect) -> None:
    """Checklist 80-88, 90: resultType task; a top-level non-empty taskId (no nested `task`);
    status working; ISO 8601 times; ttlMs present (positive integer or null); pollIntervalMs a
    positive integer; no legacy keys; no result/error/inputRequests/requestState; tasks/get
    right away succeeds; the id is printable ASCII without surrounding spaces."""
    async with server() as c:
        for tool in ("task_tool", "input_tool", "required_task_tool"):
            created = await create(c, tool)
            task_id = created["taskId"]
            assert isinstance(task_id, str) and task_id  # 81
            assert "task" not in created
            assert created["status"] in TASK_STATUSES and created["status"] == "working"  # 82
            assert ts(created["lastUpdatedAt"]) >= ts(created["createdAt"])  # 83
            assert "ttlMs" in created  # 84
            ttl = created["ttlMs"]
            assert ttl is None or (isinstance(ttl, int) and ttl > 0)
            poll = created.get("pollIntervalMs")
            assert poll is None or (isinstance(poll, int) and poll > 0)  # 85
            assert not {"ttl", "pollInterval"} & set(created)  # 86
            assert not {"result", "error", "inputRequests", "requestState"} & set(created)  # 87
            got = await c.result("tasks/get", {"taskId": task_id})  # 88
            assert got["taskId"] == task_id
            assert set(task_id) <= set(string.printable) - set(string.whitespace)  # 90
            assert task_id == task_id.strip()


async def test_two_hundred_creations_give_two_hundred_unguessable_ids(server: Connect) -> None:
    """Checklist 89: 200 task ids are distinct and high-entropy (no shared counter part, and
    ids created back to back differ in most positions)."""
    async with server() as c:
        ids: list[str] = []
        for _ in range(10):
            batch = await asyncio.gather(
                *(create(c, "required_task_tool", {"long": True}) for _ in range(20))
            )
            ids += [t["taskId"] for t in batch]
        assert len(set(ids)) == 200
        prefix = len(_common_prefix(ids))
        suffixes = [i[prefix:] for i in ids]
        assert min(len(s) for s in suffixes) >= 20  # ≥ 100 bits of base32
        for a, b in itertools.pairwise(suffixes):
            same = sum(x == y for x, y in zip(a, b, strict=False))
            assert same < len(a) // 2, (a, b)


def _common_prefix(values: list[str]) -> str:
    first, last = min(values), max(values)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


async def test_input_gathered_before_a_task_stays_out_of_the_task(server: Connect) -> None:
    """Checklist 91: a tool that first answers InputRequiredResult has no taskId in round 1;
    the retry with inputResponses returns a task with no requestState."""
    async with server() as c:
        first = await c.result("tools/call", {"name": "mrtr_task_tool", "arguments": {}})
        assert first["resultType"] == "input_required"
        assert "taskId" not in first and first["inputRequests"]
        (key,) = first["inputRequests"]
        retry = await c.result(
            "tools/call",
            {
                "name": "mrtr_task_tool",
                "arguments": {},
                "inputResponses": {key: {"action": "accept", "content": {"ok": True}}},
                "requestState": first["requestState"],
            },
        )
        assert retry["resultType"] == "task"
        assert "requestState" not in retry and "inputRequests" not in retry
        done = await c.wait_task(retry["taskId"], TERMINAL)
        assert done["status"] == "completed"


# --- H. tasks/get ---------------------------------------------------------------------------------


async def test_a_task_is_polled_from_working_to_a_stable_completed_result(
    server: Connect,
) -> None:
    """Checklist 92, 93, 94, 97, 103, 104, 105, 106: a running task is `working` with its
    times and ttlMs and none of result/error/inputRequests; once done it is `completed` with
    the sync call's result; five later polls (over ≥ 500 ms) give the same result; no
    related-task `_meta`; lastUpdatedAt ≥ createdAt and moves with the status."""
    async with server() as c:
        long_id = (await create(c, "task_tool", {"long": True}))["taskId"]
        working = await c.result("tasks/get", {"taskId": long_id})
        assert working["resultType"] == "complete"  # 92, 94
        assert (working["taskId"], working["status"]) == (long_id, "working")
        assert {"createdAt", "lastUpdatedAt", "ttlMs"} <= set(working)
        assert not {"result", "error", "inputRequests"} & set(working)  # 93

        sync = await c.result("tools/call", {"name": "task_tool", "arguments": {}}, capabilities=M0)
        task_id = (await create(c, "task_tool"))["taskId"]
        first = await c.result("tasks/get", {"taskId": task_id})
        done = await c.wait_task(task_id, TERMINAL)
        assert done["status"] == "completed"  # 97
        assert done["result"]["content"]
        assert sync_call_result(done["result"]) == sync_call_result(sync)
        assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})  # 105

        assert ts(done["lastUpdatedAt"]) >= ts(done["createdAt"])  # 106
        if first["status"] != done["status"]:
            assert done["lastUpdatedAt"] != first["lastUpdatedAt"]

        loop = asyncio.get_running_loop()
        until = loop.time() + 0.5
        polls = 0
        while polls < 5 or loop.time() < until:  # 103, 104
            again = await c.result("tasks/get", {"taskId": task_id})
            assert again["status"] == "completed"
            assert again["result"] == done["result"]
            polls += 1
            await asyncio.sleep(0.05)  # time is the subject: still readable 500 ms later


async def test_tool_errors_complete_and_protocol_errors_fail(server: Connect) -> None:
    """Checklist 98, 99, 100: a tool error ends `completed` with `isError: true`, never
    `failed`; a JSON-RPC error ends `failed` with an integer code, a string message, a
    statusMessage and no result."""
    async with server() as c:
        tool_error = (await create(c, "tool_error_tool"))["taskId"]
        protocol_error = (await create(c, "protocol_error_tool"))["taskId"]
        done = await c.wait_task(tool_error, TERMINAL)
        assert done["status"] == "completed"
        assert done["result"]["isError"] is True

        failed = await c.wait_task(protocol_error, TERMINAL)
        assert failed["status"] == "failed"
        error = failed["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str)
        assert error["code"] == PROTOCOL_ERROR_CODE
        assert "result" not in failed
        assert isinstance(failed.get("statusMessage"), str) and failed["statusMessage"]


async def test_pending_input_is_listed_identically_on_every_poll(server: Connect) -> None:
    """Checklist 101, 102, 123: an input_tool task reaches `input_required` with a non-empty
    inputRequests map of form elicitations (never `url` mode); two polls list the same keys
    with identical bodies."""
    async with server() as c:
        task_id = (await create(c, "input_tool"))["taskId"]
        first = await c.wait_task(task_id, {"input_required"})
        assert first["inputRequests"]
        for request in first["inputRequests"].values():
            assert request["method"] in INPUT_METHODS
            assert isinstance(request["params"], dict)
            assert request["params"].get("mode", "form") == "form"
        second = await c.result("tasks/get", {"taskId": task_id})
        assert second["status"] == "input_required"
        assert second["inputRequests"] == first["inputRequests"]


async def test_unknown_missing_and_purged_task_ids_are_invalid_params(server: Connect) -> None:
    """Checklist 95, 96, 107, 108: tasks/get for an unknown id → -32602 with HTTP 200; without
    a taskId → an error (-32602, or -32020 with an Mcp-Name header); a task purged after its
    retention → -32602."""
    async with server(janitor_interval_s=0.2) as c:
        error_of(
            await c.request("tasks/get", {"taskId": "ex_doesnotexist"}), codes.INVALID_PARAMS, 200
        )
        resp = await c.request("tasks/get", {})
        assert "result" not in resp.json()
        error_of(resp, codes.INVALID_PARAMS, 200)
        resp = await c.request("tasks/get", {}, headers={"Mcp-Name": "ex_abc"})
        assert resp.json()["error"]["code"] in (codes.INVALID_PARAMS, codes.HEADER_MISMATCH)

        task_id = (await create(c, "ephemeral_tool"))["taskId"]
        done = await c.wait_task(task_id, TERMINAL)
        assert done["status"] == "completed" and isinstance(done["ttlMs"], int)
        async with asyncio.timeout(10):
            while True:
                resp = await c.request("tasks/get", {"taskId": task_id})
                if "error" in resp.json():
                    break
                await asyncio.sleep(0.1)
        error_of(resp, codes.INVALID_PARAMS, 200)


# --- I. tasks/update ------------------------------------------------------------------------------


async def test_answers_reach_the_task_once_and_keys_are_never_reused(server: Connect) -> None:
    """Checklist 109-114, 116, 118, 120: an accepted answer is acked with an empty result; the
    answered key never shows again; a second question gets a new key; an unknown key, an empty
    map or a resent answer is acked without effect; the final result holds the answers; an
    update to a terminal task is acked and changes nothing."""
    async with server() as c:
        task_id = (await create(c, "input_tool", {"rounds": 2}))["taskId"]
        first = await c.wait_task(task_id, {"input_required"})
        (key1,) = first["inputRequests"]

        ack = await c.result(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {"unknown-key": {"action": "accept", "content": {"text": "x"}}},
            },
        )
        ack_only(ack)  # 113
        still = await c.result("tasks/get", {"taskId": task_id})
        assert still["status"] == "input_required" and set(still["inputRequests"]) == {key1}
        ack_only(await c.result("tasks/update", {"taskId": task_id, "inputResponses": {}}))

        answer = {"action": "accept", "content": {"text": "first"}}
        ack = await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key1: answer}})
        ack_only(ack)  # 109, 110
        assert not TASK_FIELDS & set(ack)

        task = await wait_key_taken(c, task_id, key1)  # 111, 116
        (key2,) = task["inputRequests"]
        assert key2 != key1

        resent = {"action": "accept", "content": {"text": "again"}}
        ack_only(
            await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key1: resent}})
        )  # 114
        still = await c.result("tasks/get", {"taskId": task_id})
        assert still["status"] == "input_required" and set(still["inputRequests"]) == {key2}

        second = {"action": "accept", "content": {"text": "second"}}
        ack_only(
            await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key2: second}})
        )
        done = await c.wait_task(task_id, TERMINAL)
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"] == {"answers": ["first", "second"]}  # 112

        late = {key2: {"action": "accept", "content": {"text": "late"}}}
        ack_only(await c.result("tasks/update", {"taskId": task_id, "inputResponses": late}))
        after = await c.result("tasks/get", {"taskId": task_id})
        assert (after["status"], after["result"]) == ("completed", done["result"])  # 118


async def test_updates_that_cannot_be_used_are_refused_or_ignored(server: Connect) -> None:
    """Checklist 117, 118, 119, 121: an unknown taskId → -32602; no inputResponses → -32602; a
    `decline` or `cancel` answer → -32602 and the wait stays open with the same key (the task
    never fails for it); an update to a working task is acked and changes nothing."""
    async with server() as c:
        resp = await c.request("tasks/update", {"taskId": "ex_nope", "inputResponses": {}})
        error_of(resp, codes.INVALID_PARAMS, 200)  # 117

        working = (await create(c, "task_tool", {"long": True}))["taskId"]
        error_of(
            await c.request("tasks/update", {"taskId": working}), codes.INVALID_PARAMS, 200
        )  # 119
        late = {"k": {"action": "accept", "content": {"text": "x"}}}
        ack_only(await c.result("tasks/update", {"taskId": working, "inputResponses": late}))
        assert (await c.result("tasks/get", {"taskId": working}))["status"] == "working"  # 118

        task_id = (await create(c, "input_tool"))["taskId"]
        pending = await c.wait_task(task_id, {"input_required"})
        (key,) = pending["inputRequests"]
        for action in ("decline", "cancel"):  # 121
            resp = await c.request(
                "tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": action}}}
            )
            error_of(resp, codes.INVALID_PARAMS, 200)
            again = await c.result("tasks/get", {"taskId": task_id})
            assert again["status"] == "input_required"
            assert set(again["inputRequests"]) == {key}


async def test_answering_one_of_two_questions_leaves_only_the_other_open(
    server: Connect,
) -> None:
    """Checklist 115: multi_input_tool asks two questions at once; answering one is acked and
    tasks/get then lists only the unanswered key (the same key the client was given)."""
    async with server() as c:
        task_id = (await create(c, "multi_input_tool"))["taskId"]
        task = await c.wait_task(task_id, {"input_required"})
        assert len(task["inputRequests"]) == 2
        first_key, second_key = key_for(task, "first"), key_for(task, "second")
        answer = {first_key: {"action": "accept", "content": {"first": "one"}}}
        ack_only(await c.result("tasks/update", {"taskId": task_id, "inputResponses": answer}))
        task = await wait_key_taken(c, task_id, first_key)
        assert set(task["inputRequests"]) == {second_key}


async def test_the_second_of_two_keys_still_answers_after_the_first_was_taken(
    server: Connect,
) -> None:
    """Checklist 111, 115: a client answers the first of the two keys it was shown, polls until
    that answer has been taken, then answers the second key it was shown; the task completes
    with both answers (no acked answer is silently dropped)."""
    async with server() as c:
        task_id = (await create(c, "multi_input_tool"))["taskId"]
        task = await c.wait_task(task_id, {"input_required"})
        first_key, second_key = key_for(task, "first"), key_for(task, "second")
        answer = {first_key: {"action": "accept", "content": {"first": "one"}}}
        ack_only(await c.result("tasks/update", {"taskId": task_id, "inputResponses": answer}))
        await wait_key_taken(c, task_id, first_key)

        answer = {second_key: {"action": "accept", "content": {"second": "two"}}}
        ack_only(await c.result("tasks/update", {"taskId": task_id, "inputResponses": answer}))
        done = await c.wait_task(task_id, TERMINAL, timeout=3)
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"] == {"first": "one", "second": "two"}


async def test_a_task_created_without_elicitation_never_asks_for_it(server: Connect) -> None:
    """Checklist 122: an input_tool task created (and polled) by requests without
    `elicitation` shows no elicitation/create request while it waits; it stays `working`.
    (Tether judges each poll by its own capabilities, where the spec leaves the choice open.)"""
    async with server() as c:
        task_id = (await create(c, "input_tool", capabilities=TASKS_ONLY))["taskId"]
        await wait_run(c, task_id, "waiting")
        task = await c.result("tasks/get", {"taskId": task_id}, capabilities=TASKS_ONLY)
        assert task["status"] == "working"
        assert "inputRequests" not in task


# --- J. tasks/cancel ------------------------------------------------------------------------------


async def test_cancel_is_acked_and_the_task_ends_and_stays_ended(server: Connect) -> None:
    """Checklist 124, 125, 126, 127, 128, 129: cancelling a running task is acked with an
    empty result; polling reaches a terminal status and never leaves it; cancelling a
    completed task is acked and keeps its result; an unknown id → -32602; a
    notifications/cancelled for the creating call id changes nothing."""
    async with server() as c:
        resp = await c.request(
            "tools/call", {"name": "task_tool", "arguments": {"long": True}}, request_id="create-1"
        )
        running = result_of(resp)["taskId"]
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "create-1", "reason": "bored", "_meta": meta()},
        }
        resp = await c.post(note, c.headers("notifications/cancelled", {}))
        assert resp.status_code == 202 or 400 <= resp.status_code < 500  # 129
        assert (await c.result("tasks/get", {"taskId": running}))["status"] == "working"

        ack = await c.result("tasks/cancel", {"taskId": running})
        ack_only(ack)  # 124
        assert not TASK_FIELDS & set(ack)
        seen: list[str] = []
        async with asyncio.timeout(10):  # 125
            while not seen or seen[-1] not in TERMINAL:
                seen.append((await c.result("tasks/get", {"taskId": running}))["status"])
                await asyncio.sleep(0.02)
        assert seen[-1] == "cancelled"
        for _ in range(5):  # 128
            assert (await c.result("tasks/get", {"taskId": running}))["status"] == "cancelled"
        ack_only(await c.result("tasks/cancel", {"taskId": running}))
        assert (await c.result("tasks/get", {"taskId": running}))["status"] == "cancelled"

        done_id = (await create(c, "task_tool"))["taskId"]
        done = await c.wait_task(done_id, TERMINAL)
        ack_only(await c.result("tasks/cancel", {"taskId": done_id}))  # 126
        after = await c.result("tasks/get", {"taskId": done_id})
        assert (after["status"], after["result"]) == ("completed", done["result"])

        error_of(
            await c.request("tasks/cancel", {"taskId": "ex_unknown"}), codes.INVALID_PARAMS, 200
        )  # 127


# --- M. Error-code hygiene ------------------------------------------------------------------------


async def test_every_error_reply_uses_only_spec_codes_with_their_statuses(
    server: Connect,
) -> None:
    """Checklist 136-139 (and 54): a sweep of faulty requests; `check_reply` asserts on each
    that no forbidden or undefined code appears, -32021 carries requiredCapabilities as an
    object, -32022 carries supported/requested, -32020/-32021/-32022 are 400 and -32601 is
    404; every success has a string resultType."""
    async with server() as c:
        await c.request("server/discover", headers={"MCP-Protocol-Version": None})
        await c.request("server/discover", headers={"MCP-Protocol-Version": "1900-01-01"})
        m = meta(M0)
        m[codes.META_PROTOCOL_VERSION] = "1900-01-01"
        await c.request(
            "server/discover", {"_meta": m}, headers={"MCP-Protocol-Version": "1900-01-01"}
        )
        await c.request("tasks/get", {"taskId": "ex_x"}, capabilities=M0)
        await c.request("tools/call", {"name": "required_task_tool"}, capabilities=M0)
        await c.request("tools/call", {"name": "sync_tool"}, headers={"Mcp-Name": "x"})
        await c.request("nope/nope")
        await c.request("tasks/get", {"taskId": "ex_x"})
        await c.request("tools/call", {"name": "nope"})
        await c.request("tools/list")
        await c.request("prompts/list")
        await c.request("resources/list")
        await c.request("resources/templates/list")
        await c.request("prompts/get", {"name": "nope"})
        await c.request("resources/read", {"uri": "fixture://nope"})
        await c.request("resources/read", {"uri": "tether://runs/ex_nope"})
        task_id = (await create(c, "protocol_error_tool"))["taskId"]
        await c.wait_task(task_id, TERMINAL)
        resp = await c.request(
            "tools/call", {"name": "protocol_error_tool", "arguments": {}}, capabilities=M0
        )
        assert resp.json()["error"]["code"] == PROTOCOL_ERROR_CODE
