"""Hypothesis fuzzing of the MCP endpoint over real HTTP (one server on loopback per test).

Random bodies (bytes, JSON values, near-valid JSON-RPC envelopes), random routing headers
(MCP-Protocol-Version, Mcp-Method, Mcp-Name with Base64 sentinels, Mcp-Param-*, Content-Type,
Accept, Origin) and random params for tools/call and tasks/* (with the ids and input keys of
real runs). Properties (the spec's error codes, Streamable HTTP transport and Tasks extension;
our rule that bad input gets a clear error and changes nothing):

* never a 5xx, never an Internal error (-32603) or a code the spec does not define;
* every answer but 202 is one JSON-RPC response (JSON, or an SSE stream ending in one) with
  either `result` or `error`, under the request's id when it could be read;
* an error's HTTP status is the one codes.HTTP_STATUS gives its code (-32602 is 400 only for a
  malformed `_meta`, else 200), and a stream never hides a 4xx error;
* a 2026-07-28 result carries a `resultType`; `"task"` only on a tools/call that declared the
  Tasks extension;
* a refused request (an error, a 4xx, or a tool error that started nothing) changes no row.

Two product bugs the fuzzer found (a NUL character reaching PostgreSQL; a refused tasks/update
that had delivered part of its answers) are pinned by regression tests at the end of this file.

Hypothesis runs in a worker thread; each example's HTTP and SQL run on the test's event loop
(the one serving the app) through `run_coroutine_threadsafe`.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from tests.conftest import direct_url
from tests.e2e.conftest import ServeFn
from tests.mcp_client import CAPS_TASKS, TASKS, VERSION, McpClient
from tether.jsonrpc import codes
from tether.testing import conformance
from tether.tools.catalog import Catalog

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

T = TypeVar("T")

EXAMPLES = int(os.environ.get("TETHER_FUZZ_EXAMPLES", "600"))  # ~10 s here; more to hunt
PV = codes.META_PROTOCOL_VERSION
CC = codes.META_CLIENT_CAPABILITIES
CI = codes.META_CLIENT_INFO
TOOLS = [t["name"] for t in Catalog.build(conformance.app).listing]
# The tools with the most to get wrong (header mirrors, runs, waits, streams) come up more often.
FUZZ_TOOLS = (
    TOOLS
    + [
        "test_headers",
        "confirm_delete",
        "multi_input",
        "slow_compute",
        "test_tool_with_task",
        "test_tool_with_progress",
    ]
    * 3
)
PROMPTS = sorted(conformance.app.prompts)
METHODS = [
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tools/list",
    "server/discover",
    "prompts/get",
    "prompts/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "completion/complete",
    "initialize",
    "ping",
    "logging/setLevel",
    "tasks/result",
    "tasks/list",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
]
DEFINED_CODES = frozenset(
    {
        codes.PARSE_ERROR,
        codes.INVALID_REQUEST,
        codes.METHOD_NOT_FOUND,
        codes.INVALID_PARAMS,
        codes.HEADER_MISMATCH,
        codes.MISSING_REQUIRED_CLIENT_CAPABILITY,
        codes.UNSUPPORTED_PROTOCOL_VERSION,
        codes.UNAUTHORIZED,
    }
)

SNAPSHOT = """
SELECT coalesce(
         (SELECT json_agg(json_build_array(id, version, status, waits) ORDER BY id)
            FROM executions), '[]')::text AS runs,
       (SELECT count(*) FROM history) AS history,
       (SELECT count(*) FROM signals) AS signals,
       (SELECT count(*) FROM updates) AS updates,
       (SELECT count(*) FROM steps) AS steps
"""
# Runs a worker is about to touch: the state is not settled while any exist.
UNSETTLED = """
SELECT count(*) FROM executions
 WHERE status IN ('pending', 'running')
    OR (status = 'waiting' AND wake_at IS NOT NULL AND wake_at < now() + interval '60 seconds')
"""
FOCUS = """
SELECT id FROM executions
 WHERE workflow = $1 AND status = 'waiting' AND jsonb_array_length(waits) = $2
 ORDER BY created_at DESC LIMIT 1
"""
PARKED = """
SELECT id, workflow, waits FROM executions WHERE status = 'waiting' AND waits <> '[]'::jsonb
"""

# --- strategies --------------------------------------------------------------------------------
# Hypothesis shrinks integer draws toward 0, so option 0 is always the ordinary, well-formed
# choice and the damaged ones sit above it: a minimal failing example stays close to valid.


def weighted(draw: st.DrawFn, *options: tuple[int, st.SearchStrategy[Any]]) -> Any:
    """Draw from one of `options` with probability proportional to its weight."""
    index = draw(st.integers(0, sum(w for w, _ in options) - 1))
    for weight, strategy in options:
        if index < weight:
            return draw(strategy)
        index -= weight
    raise AssertionError("unreachable")


def rarely(draw: st.DrawFn, n: int) -> bool:
    """True about once in `n` draws (False is the shrink target)."""
    return bool(draw(st.integers(0, n - 1)) == n - 1)


# Strings that have broken servers before: NUL (PostgreSQL text cannot hold it), separators,
# astral characters, a byte-order mark, a sentinel look-alike, a long one, an id look-alike.
NASTY = [
    "",
    "\x00",
    "a\x00b",
    " ",
    "\u2028",
    "é",
    "\U0001f600",
    "\ufeff",
    "=?base64?eA==?=",
    "x" * 300,
    "ex_" + "a" * 32,
    "%00",
    "null",
]


def texts(max_size: int) -> st.SearchStrategy[str]:
    """Random text, a quarter of the time one of the NASTY strings."""
    plain = st.text(max_size=max_size)
    return st.one_of(plain, plain, plain, st.sampled_from(NASTY))


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts(12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(8), inner, max_size=3),
    max_leaves=8,
)
# Values h11 lets a client send: no control characters, no surrounding whitespace; Latin-1, so
# obs-text bytes reach the server too.
header_text = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=24
).map(lambda v: v.strip(" \t"))
request_ids = st.integers(-(2**63), 2**63 - 1) | texts(8)
bad_ids = (  # integers within JSON-encodable range: orjson refuses wider ones client-side
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2)
)


def b64(value: str) -> str:
    return codes.BASE64_PREFIX + base64.b64encode(value.encode()).decode() + codes.BASE64_SUFFIX


GOOD_CAPABILITIES = [
    CAPS_TASKS,
    CAPS_TASKS,
    {"extensions": {TASKS: {}}},
    {},
    {"elicitation": {}},
    {"elicitation": {"form": {}}, "sampling": {}, "roots": {}, "extensions": {TASKS: {}}},
]
ODD_CAPABILITIES = [
    {"extensions": {TASKS: True}},
    {"extensions": []},
    {"tasks": {"requests": {"tools": {"call": {}}}}},
    {"elicitation": "yes", "extensions": {TASKS: {}}},
]


@st.composite
def metas(draw: st.DrawFn, faults: frozenset[str]) -> Any:
    caps = draw(st.sampled_from(GOOD_CAPABILITIES))
    if "capabilities" in faults:
        caps = draw(st.sampled_from(ODD_CAPABILITIES) | json_values)
    meta: dict[str, Any] = {PV: VERSION, CC: caps}
    if draw(st.booleans()):
        meta[CI] = {"name": "fuzz", "version": "0"}
    if rarely(draw, 3):
        meta["progressToken"] = draw(texts(4) | st.integers(0, 99))
    if rarely(draw, 8):
        meta[codes.META_LOG_LEVEL] = draw(st.sampled_from(["info", "debug"]) | json_values)
    if rarely(draw, 8):
        meta["dev.tether/idempotencyKey"] = draw(texts(6))
    if "legacy" in faults:  # an initialize-era request: no 2026 version in _meta
        meta.pop(PV, None)
    if "meta" in faults:
        damage = draw(st.integers(0, 3))
        if damage == 0:
            meta.pop(draw(st.sampled_from([PV, CC])), None)
        elif damage == 1:
            meta[draw(st.sampled_from([PV, CC]))] = draw(json_values)
        elif damage == 2:
            meta[PV] = draw(st.sampled_from([*codes.LEGACY_VERSIONS, "2024-11-05", "2099-01-01"]))
        else:
            return draw(json_values)
    return meta


@dataclass
class World:
    """What exists on the server when an example is drawn (never empty: see `world()`)."""

    ids: list[str]  # every run
    open_keys: dict[str, list[str]]  # parked run → its open input keys
    focus: list[str]  # a run parked on one input and one parked on two


def pick(draw: st.DrawFn, known: list[Any], other: st.SearchStrategy[Any]) -> Any:
    """Mostly one of the `known` values (never empty), sometimes anything `other` draws.

    The server's state changes between examples, so no draw may depend on it: Hypothesis
    replays choice sequences and needs each choice to be drawn the same way. Hence an index
    from a fixed range rather than `sampled_from(known)`."""
    odd = rarely(draw, 4)
    index = draw(st.integers(0, 255))
    return draw(other) if odd else known[index % len(known)]


@st.composite
def elicit_results(draw: st.DrawFn) -> Any:
    """An ElicitResult, mostly an accept whose content may or may not fit the form."""
    if rarely(draw, 10):
        return draw(json_values)
    action = weighted(
        draw, (6, st.just("accept")), (2, st.sampled_from(["decline", "cancel"])), (1, json_scalars)
    )
    result: dict[str, Any] = {"action": action}
    if not rarely(draw, 6):
        result["content"] = weighted(
            draw,
            (3, st.fixed_dictionaries({"name": texts(6), "confirm": st.booleans()})),  # fits
            (
                3,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "confirm": st.booleans() | json_scalars,
                        "name": texts(6) | json_scalars,
                        "payload": texts(8),
                    },
                ),
            ),
            (1, json_values),
        )
    return result


def tool_arguments(draw: st.DrawFn, tool: Any) -> Any:
    if rarely(draw, 10):
        return draw(json_values)  # mostly not an object
    args: dict[str, Any] = {}
    if rarely(draw, 3):
        args.update(draw(st.dictionaries(texts(6), json_values, max_size=2)))
    if tool == "slow_compute":  # never a short sleep: the state must settle between examples
        args["seconds"] = draw(st.sampled_from([0, 3600, -1, "x", None, 1e9]))
        if draw(st.booleans()):
            args["label"] = draw(texts(8))
    elif tool == "confirm_delete" and draw(st.booleans()):
        args["filename"] = draw(texts(8) | json_scalars)
    elif tool == "test_headers":
        for name, values in (
            ("region", texts(8) | json_scalars),
            ("count", st.integers(-5, 5) | st.floats(-5, 5) | json_scalars),
            ("verbose", st.booleans() | json_scalars),
            ("message", texts(8)),
        ):
            if draw(st.booleans()):
                args[name] = draw(values)
    return args


@st.composite
def method_params(draw: st.DrawFn, method: str, world: World) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if method == "tools/call":
        params["name"] = pick(draw, FUZZ_TOOLS, texts(8) | json_scalars)
        params["arguments"] = tool_arguments(draw, params["name"])
        if rarely(draw, 5):
            mrtr_keys = st.sampled_from(["user_name", "confirm", "x"])
            params["inputResponses"] = draw(
                st.dictionaries(mrtr_keys, elicit_results(), max_size=2)
            )
        if rarely(draw, 8):
            params["requestState"] = draw(json_scalars)
    elif method in ("tasks/get", "tasks/cancel", "tasks/update"):
        source = draw(st.integers(0, 7))
        index = draw(st.integers(0, 255))
        pools = [world.focus] * 4 + [list(world.open_keys)] * 2 + [world.ids]
        task_id: Any
        if source < len(pools):
            task_id = pools[source][index % len(pools[source])]
        else:
            task_id = draw(texts(12) | json_values)
        params["taskId"] = task_id
        if method == "tasks/update":
            keys = world.open_keys.get(task_id, []) if isinstance(task_id, str) else []
            all_keys = [k for ks in world.open_keys.values() for k in ks]
            entries = draw(st.lists(st.tuples(st.integers(0, 7), elicit_results()), max_size=4))
            responses = {keys[i % len(keys)]: r for i, r in entries} if keys else {}
            if rarely(draw, 4):  # a key of another task
                responses[pick(draw, all_keys, texts(10))] = draw(elicit_results())
            if rarely(draw, 4):  # a key nobody issued
                responses[draw(texts(10))] = draw(elicit_results())
            if not rarely(draw, 10):
                params["inputResponses"] = responses
            elif draw(st.booleans()):
                params["inputResponses"] = draw(json_values)
    elif method == "prompts/get":
        params["name"] = pick(draw, PROMPTS, texts(8) | json_scalars)
        params["arguments"] = draw(
            st.dictionaries(st.sampled_from(["arg1", "arg2", "resourceUri", "x"]), json_values)
        )
    elif method == "resources/read":
        runs = [f"tether://runs/{i}" for i in world.ids[:3]]
        params["uri"] = pick(
            draw,
            ["test://static-text", "test://template/7/data", *runs],
            texts(12) | json_scalars,
        )
    elif method == "initialize":
        params["protocolVersion"] = draw(
            st.sampled_from([*codes.LEGACY_VERSIONS, VERSION, "2024-11-05"]) | json_scalars
        )
        params["capabilities"] = draw(st.sampled_from(GOOD_CAPABILITIES) | json_values)
        params["clientInfo"] = {"name": "fuzz", "version": "0"}
    elif method == "completion/complete":
        params["ref"] = draw(
            st.fixed_dictionaries({"type": st.just("ref/prompt"), "name": st.sampled_from(PROMPTS)})
            | json_values
        )
        params["argument"] = draw(
            st.fixed_dictionaries({"name": st.just("arg1"), "value": texts(3)}) | json_values
        )
    elif rarely(draw, 2):
        params.update(draw(st.dictionaries(texts(6), json_values, max_size=2)))
    return params


@dataclass
class Probe:
    """One request as sent, and what the oracles need to know about it."""

    body: bytes
    headers: dict[str, str]
    message: Any = None  # the decoded body, when it is JSON


def header_value(value: Any) -> str:
    """A body value as a conforming client sends it in a header (the transport's value encoding)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
    unsafe = any(not " " <= ch <= "~" for ch in text) or text != text.strip(" \t")
    sentinel = text.startswith(codes.BASE64_PREFIX) and text.endswith(codes.BASE64_SUFFIX)
    return b64(text) if unsafe or sentinel else text


BAD_SENTINELS = [
    "=?base64?SGVsbG8?=",
    "=?base64?***?=",
    "=?BASE64?eA==?=",
    "=?base64?",
    "=?base64?/w==?=",
]


@st.composite
def headers_for(draw: st.DrawFn, message: Any, faults: frozenset[str]) -> dict[str, str]:
    """The headers a conforming client sends for `message`, with the header `faults`."""
    method = message.get("method") if isinstance(message, dict) else None
    params = message.get("params") if isinstance(message, dict) else None
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta_version = meta.get(PV) if isinstance(meta, dict) else None
    h: dict[str, str] = {
        "Content-Type": draw(
            st.sampled_from(["application/json", "application/json; charset=utf-8"])
        )
    }
    if "content_type" in faults:
        h["Content-Type"] = draw(
            st.sampled_from(["text/plain", "application/jsonx", "", "APPLICATION/JSON"])
            | header_text
        )
    accept = draw(st.sampled_from(["application/json, text/event-stream", "application/json", ""]))
    if accept:
        h["Accept"] = accept
    h["MCP-Protocol-Version"] = header_value(
        meta_version if isinstance(meta_version, str) else VERSION
    )
    if "legacy" in faults:
        h["MCP-Protocol-Version"] = draw(st.sampled_from(codes.LEGACY_VERSIONS))
        if method == "initialize" and draw(st.booleans()):
            h.pop("MCP-Protocol-Version", None)
    if "version_header" in faults:
        if draw(st.booleans()):
            h.pop("MCP-Protocol-Version", None)
        else:
            h["MCP-Protocol-Version"] = draw(
                st.sampled_from([*codes.LEGACY_VERSIONS, VERSION.upper(), VERSION + "x"])
                | header_text
            )
    if isinstance(method, str):
        h["Mcp-Method"] = b64(method) if rarely(draw, 8) else header_value(method)
    if "method_header" in faults:
        if "Mcp-Method" in h and draw(st.booleans()):
            del h["Mcp-Method"]
        else:
            h["Mcp-Method"] = draw(header_text | st.sampled_from(["TOOLS/CALL", "tasks/get"]))
    field_name = codes.NAME_FIELDS.get(method) if isinstance(method, str) else None
    body_value = params.get(field_name) if field_name else None
    if body_value is not None and not (method in codes.NAME_OPTIONAL and rarely(draw, 5)):
        text = header_value(body_value)
        h["Mcp-Name"] = b64(text) if rarely(draw, 6) else text  # a needless sentinel is fine
    if "name_header" in faults:
        h["Mcp-Name"] = weighted(
            draw,
            (1, st.sampled_from(BAD_SENTINELS)),
            (1, texts(8).map(b64)),
            (2, header_text),
        )
        if "Mcp-Name" in h and rarely(draw, 4):
            del h["Mcp-Name"]
    raw_arguments = params.get("arguments")
    arguments: dict[str, Any] = raw_arguments if isinstance(raw_arguments, dict) else {}
    for header, arg in (("Region", "region"), ("Count", "count"), ("Verbose", "verbose")):
        if arg in arguments and arguments[arg] is not None:
            text = header_value(arguments[arg])
            h[f"Mcp-Param-{header}"] = b64(text) if rarely(draw, 6) else text
        if "param_header" in faults and draw(st.booleans()):
            if draw(st.booleans()):
                h.pop(f"Mcp-Param-{header}", None)
            else:
                h[f"Mcp-Param-{header}"] = draw(header_text | st.sampled_from(BAD_SENTINELS))
    if rarely(draw, 12):  # a browser on loopback
        h["Origin"] = draw(
            st.sampled_from(["http://127.0.0.1", "http://localhost:9", "http://[::1]:8"])
        )
    if "origin" in faults:
        h["Origin"] = draw(
            st.sampled_from(["https://evil.example", "null", "file://", "http://127.0.0.2"])
            | header_text
        )
    if rarely(draw, 10):
        name = draw(st.sampled_from(["Idempotency-Key", "Mcp-Session-Id", "Last-Event-ID"]))
        h[name] = draw(header_text)
    return h


FAULTS = [
    "raw_bytes",
    "json_value",
    "content_type",
    "version_header",
    "method_header",
    "name_header",
    "param_header",
    "origin",
    "meta",
    "capabilities",
    "params",
    "envelope",
    "legacy",
]


@st.composite
def fault_sets(draw: st.DrawFn) -> frozenset[str]:
    """Mostly none; often one; sometimes a few at once (the order of checks matters then)."""
    kind = draw(st.integers(0, 19))
    if kind < 11:
        return frozenset()
    if kind < 18:
        return frozenset({draw(st.sampled_from(FAULTS))})
    return frozenset(draw(st.lists(st.sampled_from(FAULTS), min_size=2, max_size=4)))


@st.composite
def probes(draw: st.DrawFn, world: World) -> Probe:
    faults = draw(fault_sets())
    if "raw_bytes" in faults:
        return Probe(draw(st.binary(max_size=64)), draw(headers_for(None, faults)))
    if "json_value" in faults:
        value = draw(json_values)
        return Probe(orjson.dumps(value), draw(headers_for(value, faults)), value)
    method = weighted(
        draw,
        (4, st.just("tools/call")),
        (3, st.just("tasks/update")),
        (2, st.sampled_from(["tasks/get", "tasks/cancel"])),
        (3, st.sampled_from(METHODS)),
        (1, texts(10)),
    )
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    params: Any = draw(method_params(method, world))
    params["_meta"] = draw(metas(faults))
    if "params" in faults:
        shape = draw(st.integers(0, 2))
        if shape == 0:
            del params["_meta"]
        elif shape == 1:
            params = draw(json_values)
    if not ("params" in faults and rarely(draw, 4)):
        message["params"] = params
    if not method.startswith("notifications/") or rarely(draw, 4):
        message["id"] = draw(request_ids)
    if "envelope" in faults:
        shape = draw(st.integers(0, 4))
        if shape == 0:
            message["jsonrpc"] = draw(json_values)
        elif shape == 1:
            message["id"] = draw(bad_ids)
        elif shape == 2:
            message["method"] = draw(json_values)
        elif shape == 3:
            message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
        else:
            del message["jsonrpc"]
    return Probe(orjson.dumps(message), draw(headers_for(message, faults)), message)


# --- oracles -------------------------------------------------------------------------------------


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def meta_ok(message: Any) -> bool:
    """Whether the request's params carry the `_meta` keys every 2026-07-28 request needs."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return (
        isinstance(meta, dict) and isinstance(meta.get(PV), str) and isinstance(meta.get(CC), dict)
    )


def declares_tasks(message: Any) -> bool:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(CC) if isinstance(meta, dict) else None
    ext = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(ext, dict) and isinstance(ext.get(TASKS), dict)


def started_something(result: dict[str, Any]) -> bool:
    """A tool error that reports a run it started (a synchronous call that did not finish)."""
    structured = result.get("structuredContent")
    error = structured.get("error") if isinstance(structured, dict) else None
    return isinstance(error, dict) and ("execution_id" in error or "status" in error)


def sse_response(text: str) -> Any:
    """The JSON-RPC response that ends an SSE stream (the last `data:` event with an id)."""
    events = [
        orjson.loads(line[len("data:") :]) for line in text.splitlines() if line.startswith("data:")
    ]
    assert events, f"empty event stream: {text!r}"
    for event in events[:-1]:
        assert "id" not in event and isinstance(event.get("method"), str), events
    return events[-1]


@dataclass(frozen=True)
class Verdict:
    refused: bool  # an error, a 4xx, or a tool error that started nothing: no row may change


def check_response(probe: Probe, resp: httpx.Response) -> Verdict:
    """Assert the properties of one answer."""
    status = resp.status_code
    note(f"-> {status} {resp.headers.get('content-type')} {resp.content[:400]!r}")
    message = probe.message
    if status == 202:
        assert resp.content == b""
        assert isinstance(message, dict) and "id" not in message, "202 for a request"
        return Verdict(refused=False)
    if status == 415:  # transport refusal before JSON-RPC (only JSON bodies are served)
        content_type = probe.headers.get("Content-Type", "")
        assert content_type.split(";")[0].strip().lower() != "application/json"
        return Verdict(refused=True)
    media = resp.headers.get("content-type", "").split(";")[0].strip()
    if media == "text/event-stream":
        assert status == 200
        body = sse_response(resp.text)
        streamed = True
    else:
        assert media == "application/json", media
        body = orjson.loads(resp.content)
        streamed = False
    assert status < 500, "a 5xx"
    assert isinstance(body, dict) and body.get("jsonrpc") == "2.0", body
    assert ("result" in body) != ("error" in body), body
    if status != 403:  # a refused Origin MAY answer id-less (the Streamable HTTP transport)
        readable = isinstance(message, dict) and _valid_id(message.get("id"))
        assert body.get("id") == (message["id"] if readable else None), "wrong id"
    if "error" in body:
        error = body["error"]
        code = error.get("code")
        assert isinstance(code, int) and isinstance(error.get("message"), str), error
        assert code in DEFINED_CODES, f"code {code} (internal or undefined)"
        if streamed:
            assert codes.HTTP_STATUS.get(code, 200) == 200, "a 4xx error hidden in a stream"
        elif code == codes.INVALID_PARAMS:
            assert status in (200, 400), status
            if status == 400:
                assert not meta_ok(message), "-32602/400 with a well-formed _meta"
        else:
            assert status == codes.HTTP_STATUS.get(code, 200), (code, status)
        return Verdict(refused=True)
    assert status == 200, status
    result = body["result"]
    assert isinstance(result, dict), result
    version = probe.headers.get("MCP-Protocol-Version", "").strip()
    method = message.get("method") if isinstance(message, dict) else None
    if version == VERSION:
        assert result.get("resultType") in ("complete", "input_required", "task"), result
    if result.get("resultType") == "task":
        assert method == "tools/call" and declares_tasks(message), "a task nobody asked for"
    if isinstance(method, str) and method.startswith("tasks/"):
        assert declares_tasks(message), "tasks/* served without the extension"
    return Verdict(refused=result.get("isError") is True and not started_something(result))


# --- the test ------------------------------------------------------------------------------------


async def test_the_endpoint_answers_any_input_with_a_json_rpc_response_and_no_side_effect(
    mcp_server: ServeFn, db_url: str
) -> None:
    """Fuzzed bodies, headers and params: no 5xx, well-formed answers, refusals change no row."""
    async with (
        mcp_server(conformance.app, sync_limit_s=0.05, start_wait_s=0.0) as url,
        httpx.AsyncClient(timeout=15.0) as http,
    ):
        db = await asyncpg.connect(direct_url(db_url))
        setup = McpClient(url, timeout=15.0)
        loop = asyncio.get_running_loop()

        def run(make: Callable[[], Awaitable[T]]) -> T:
            async def wrapped() -> T:
                return await make()

            return asyncio.run_coroutine_threadsafe(wrapped(), loop).result(timeout=60)

        async def settle() -> None:
            """Wait (bounded) until no worker is about to touch a run: a fair snapshot."""
            async with asyncio.timeout(15):
                while True:
                    if not await db.fetchval(UNSETTLED):
                        return
                    await asyncio.sleep(0.01)

        async def world() -> World:
            """Keep a run parked on one input and one parked on two; describe what exists."""
            focus: list[str] = []
            for tool, n_keys in (("confirm_delete", 1), ("multi_input", 2)):
                found = await db.fetchval(FOCUS, tool, n_keys)
                if found is None:
                    created = await setup.result("tools/call", {"name": tool, "arguments": {}})
                    await settle()
                    found = created["taskId"]
                focus.append(found)
            parked = await db.fetch(PARKED)
            ids = [r["id"] for r in await db.fetch("SELECT id FROM executions ORDER BY id")]
            keys = {r["id"]: [w["key"] for w in orjson.loads(r["waits"])] for r in parked}
            assert all(f in keys for f in focus), "a seeded run did not park"
            return World(ids, keys, focus)

        async def exchange(probe: Probe) -> tuple[httpx.Response, Any, Any]:
            await settle()
            before = await db.fetchrow(SNAPSHOT)
            raw = [(k.encode(), v.encode("latin-1")) for k, v in probe.headers.items()]
            resp = await http.post(url, content=probe.body, headers=raw)
            await resp.aread()
            after = await db.fetchrow(SNAPSHOT)
            assert before is not None and after is not None
            return resp, dict(before), dict(after)

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.data())
        def fuzz(data: st.DataObject) -> None:
            current = run(world)
            probe = data.draw(probes(current), label="probe")
            note(f"headers={probe.headers} body={probe.body!r}")
            resp, before, after = run(lambda: exchange(probe))
            verdict = check_response(probe, resp)
            if verdict.refused:
                assert after == before, "a refused request changed rows"

        try:
            await asyncio.to_thread(fuzz)
        finally:
            await setup.aclose()
            await db.close()


# --- what the fuzzer found: minimal examples, kept as regression tests ------------------------


async def snapshot(db_url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        row = await conn.fetchrow(SNAPSHOT)
        assert row is not None
        return dict(row)
    finally:
        await conn.close()


async def test_a_nul_in_a_task_id_is_task_not_found(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """tasks/get of "\\u0000" is -32602 Task not found, never a 5xx (the extension's tasks/get)."""
    async with mcp_server(conformance.app) as url:
        resp = await client(url).request(
            "tasks/get", {"taskId": "\x00"}, headers={"Mcp-Name": b64("\x00")}
        )
    assert resp.status_code == 200
    assert resp.json()["error"]["code"] == codes.INVALID_PARAMS


async def test_a_nul_in_an_answer_is_refused_and_changes_nothing(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db_url: str
) -> None:
    """tasks/update whose accepted content holds "\\u0000" is -32602; the wait stays open."""
    async with mcp_server(conformance.app) as url:
        c = client(url)
        created = await c.result("tools/call", {"name": "confirm_delete", "arguments": {}})
        task = await c.wait_task(created["taskId"], {"input_required"})
        (key,) = task["inputRequests"]
        before = await snapshot(db_url)
        answer = {"action": "accept", "content": {"confirm": True, "note": "\x00"}}
        resp = await c.request(
            "tasks/update", {"taskId": task["taskId"], "inputResponses": {key: answer}}
        )
        assert resp.status_code < 500, resp.text
        assert resp.json()["error"]["code"] == codes.INVALID_PARAMS
        assert await snapshot(db_url) == before


async def test_a_nul_in_a_workflow_argument_is_a_tool_error_and_starts_nothing(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db_url: str
) -> None:
    """tools/call of slow_compute with label "\\u0000" is refused as bad input, no run created."""
    async with mcp_server(conformance.app) as url:
        before = await snapshot(db_url)
        resp = await client(url).request(
            "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "\x00"}}
        )
        assert resp.status_code < 500, resp.text
        body = resp.json()
        assert body.get("result", {}).get("isError") is True or (
            body.get("error", {}).get("code") == codes.INVALID_PARAMS
        ), body
        assert await snapshot(db_url) == before


async def test_a_refused_tasks_update_delivers_none_of_its_answers(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db_url: str
) -> None:
    """A -32602 tasks/update changes nothing; both keys stay open."""
    async with mcp_server(conformance.app) as url:
        c = client(url)
        created = await c.result("tools/call", {"name": "multi_input", "arguments": {}})
        task = await c.wait_task(created["taskId"], {"input_required"})
        first, second = sorted(task["inputRequests"])  # ...:signal:first:n, ...:signal:second:n
        before = await snapshot(db_url)
        body = await c.call(
            "tasks/update",
            {
                "taskId": task["taskId"],
                "inputResponses": {
                    first: {"action": "accept", "content": {"name": "ok"}},
                    second: {"action": "accept", "content": {"name": 5}},  # not a string
                },
            },
        )
        assert body["error"]["code"] == codes.INVALID_PARAMS
        assert await snapshot(db_url) == before
        again = await c.result("tasks/get", {"taskId": task["taskId"]})
        assert sorted(again["inputRequests"]) == [first, second]
