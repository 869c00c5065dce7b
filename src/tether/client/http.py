"""The HTTP transport: MCP 2026-07-28 to a running Tether server's endpoint (`/mcp`), as any
client of the Tasks extension would speak it. Every request declares the extension and form
elicitation, so the server answers with tasks and shows open waits as input requests.

- start: `tools/call` of the workflow's `start_<name>` tool, in task mode, with an
  `Idempotency-Key` header (or `_meta` `dev.tether/idempotencyKey` for a key no header can
  carry unchanged);
- read: `tasks/get`;
- answer: `tasks/update`, an elicitation `accept` with the form's fields under the wait's key
  (a name is resolved to its key with a `tasks/get` first);
- cancel: `tasks/cancel`;
- follow: `subscriptions/listen` (SSE), or polling `tasks/get` every `pollIntervalMs` when the
  server serves no stream to this client.

A bearer token, when given, goes with every request.

Errors cross this boundary through two tables: `_FROM_HTTPX` for the HTTP library's
exceptions (the exchange failed), applied by `_httpx_errors()` around every request,
and `_FROM_WIRE` for what the server answered (a JSON-RPC error code, or the code of a tool
error result), applied by `_wire_error`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from importlib import metadata
from types import MappingProxyType
from typing import Any, Final

import httpx
import orjson

from tether import sse
from tether.client import errors
from tether.client.snapshots import Answered, OpenWait, RunSnapshot, from_task
from tether.client.transport import Kind
from tether.jsonrpc import codes
from tether.jsonrpc.headers import IDEMPOTENCY_HEADER, IDEMPOTENCY_META, JSON, SSE
from tether.tasks.views import PAYLOAD_FIELD, is_payload_form

# --- protocol facts (a test holds each to the server's) -----------------------------------------
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"
#: The task-mode start tool the server generates for a workflow served with its tool set.
START_TOOL_PREFIX: Final = "start_"

#: What every request declares: the Tasks extension, and form elicitation (so a run that
#: waits reads `input_required` with its input requests).
CAPABILITIES: Final[dict[str, Any]] = {"elicitation": {}, "extensions": {codes.TASKS_EXTENSION: {}}}


def _version() -> str:
    """The installed distribution's version (the root package is not imported: it names every
    public layer, server surfaces included)."""
    try:
        return metadata.version("tether")
    except metadata.PackageNotFoundError:
        return "unknown"


CLIENT_INFO: Final[dict[str, str]] = {"name": "tether.client", "version": _version()}
#: A listen stream silent this long is opened again (the server then sends the current view).
LISTEN_IDLE_S: Final = 300.0
#: How often to poll when the server suggests no interval.
DEFAULT_POLL_S: Final = 5.0
#: JSON-RPC errors to a listen request that mean "no stream for you here": poll instead.
_NO_STREAM: Final = frozenset({codes.METHOD_NOT_FOUND, codes.LIMIT_REACHED})


# --- errors -------------------------------------------------------------------------------------

#: The HTTP library's exceptions: each means the exchange with the server failed (it could not
#: be reached, timed out, broke off, or sent what is not HTTP), never a server's answer.
_FROM_HTTPX: Final[
    Mapping[type[httpx.HTTPError], Callable[[httpx.HTTPError], errors.ClientError]]
] = MappingProxyType(
    {
        httpx.TimeoutException: lambda e: errors.TransportError(
            f"the server did not answer in time ({type(e).__name__})"
        ),
        httpx.HTTPError: lambda e: errors.TransportError(
            f"no answer from the server: {type(e).__name__}: {e}"
        ),
    }
)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    """The HTTP library's errors of the block leave as the client's (`_FROM_HTTPX`)."""
    try:
        yield
    except httpx.HTTPError as exc:
        build = next(_FROM_HTTPX[c] for c in type(exc).__mro__ if c in _FROM_HTTPX)
        raise build(exc) from exc


def _invalid_params(method: str, message: str, data: Any) -> errors.ClientError:
    """-32602 means what was named does not exist, or (tasks/update) the answer was refused."""
    if method == codes.TOOLS_CALL:
        return errors.WorkflowNotFound(message)  # our arguments are well-formed: the tool is not
    if method == TASKS_UPDATE:
        found = data.get("errors") if isinstance(data, dict) else None
        return errors.AnswerRefused(message, violations=found if isinstance(found, list) else ())
    return errors.RunNotFound(message)


def _violations(data: Any) -> list[Any]:
    found = data.get("violations") if isinstance(data, dict) else None
    return found if isinstance(found, list) else []


#: What the server answered → the client error it stands for: a JSON-RPC error by its code
#: (int), or a tool error result by its `structuredContent.error.code` (str). Each builder
#: takes (method, message, data).
_FROM_WIRE: Final[Mapping[int | str, Callable[[str, str, Any], errors.ClientError]]] = (
    MappingProxyType(
        {
            codes.UNAUTHENTICATED: lambda m, msg, d: errors.NotAuthorized(msg),
            codes.UNAUTHORIZED: lambda m, msg, d: errors.NotAuthorized(msg),
            codes.INVALID_PARAMS: _invalid_params,
            codes.UNAVAILABLE: lambda m, msg, d: errors.TransportError(msg),
            codes.RATE_LIMITED: lambda m, msg, d: errors.TransportError(msg),
            codes.LIMIT_REACHED: lambda m, msg, d: errors.TransportError(msg),
            "resource_not_found": lambda m, msg, d: errors.WorkflowNotFound(msg),
            "invalid_tool_input": lambda m, msg, d: errors.InvalidInput(msg, _violations(d)),
            "conflict": lambda m, msg, d: errors.StartConflict(msg),
        }
    )
)


def _wire_error(method: str, error: Mapping[str, Any]) -> errors.ClientError:
    """The client error for a JSON-RPC error object or a tool error (`code`, `message`)."""
    code = error.get("code")
    message = str(error.get("message") or f"error {code!r}")
    build = _FROM_WIRE.get(code) if isinstance(code, int | str) else None
    if build is not None:
        # a JSON-RPC error carries its details in `data`; a tool error beside its code
        return build(method, message, error.get("data", error))
    return errors.TransportError(f"{method}: the server answered {code!r}: {message}")


# --- the wire -----------------------------------------------------------------------------------


def header_value(value: str) -> str:
    """`value` as an `Mcp-Name` header: as it is when safe, else in the Base64 sentinel form."""
    safe = all(0x20 <= ord(c) < 0x7F for c in value) and value == value.strip(" \t")
    if safe and not (value.startswith(codes.BASE64_PREFIX) and value.endswith(codes.BASE64_SUFFIX)):
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{codes.BASE64_PREFIX}{encoded}{codes.BASE64_SUFFIX}"


def _plain_header(value: str) -> bool:
    """Whether `value` travels unchanged as a header value (printable ASCII, no edge spaces)."""
    return all(0x20 <= ord(c) < 0x7F for c in value) and value == value.strip(" \t")


class _NoStream(Exception):
    """The server serves no listen stream to this client now: poll instead."""


class _StreamDropped(Exception):
    """A listen stream that was open broke off: listen again."""


class HttpTransport:
    """Runs by id over MCP; one connection pool, closed by `aclose`."""

    kind: Kind = "http"

    def __init__(self, url: str, *, token: str | None, timeout: float) -> None:
        if token is not None and (not token or not _plain_header(token)):
            raise ValueError("token must be printable ASCII without surrounding spaces")
        self.url = url
        self._timeout = timeout
        auth = {"authorization": f"Bearer {token}"} if token is not None else {}
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout), headers=auth)
        self._ids = itertools.count(1)

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- requests -------------------------------------------------------------------------

    def _envelope(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        name: str | None = None,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        request_id = next(self._ids)
        full_meta = {
            codes.META_PROTOCOL_VERSION: codes.MODERN_VERSION,
            codes.META_CLIENT_CAPABILITIES: CAPABILITIES,
            codes.META_CLIENT_INFO: CLIENT_INFO,
            **(meta or {}),
        }
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": full_meta},
        }
        sent = {
            "content-type": JSON,
            "accept": f"{JSON}, {SSE}",
            codes.H_PROTOCOL_VERSION: codes.MODERN_VERSION,
            codes.H_METHOD: method,
            **(headers or {}),
        }
        if name is not None:
            sent[codes.H_NAME] = header_value(name)
        return request_id, orjson.dumps(body), sent

    async def _call(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        name: str | None = None,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request; its result. Raises the client error the answer stands for."""
        request_id, body, sent = self._envelope(
            method, params, name=name, meta=meta, headers=headers
        )
        with _httpx_errors():
            response = await self._http.post(self.url, content=body, headers=sent)
        reply = _reply(response, request_id, method)
        error = reply.get("error")
        if error is not None:
            raise _wire_error(method, error if isinstance(error, dict) else {})
        result = reply.get("result")
        if not isinstance(result, dict):
            raise errors.TransportError(f"{method}: the server's result is not an object")
        return result

    # --- operations -----------------------------------------------------------------------

    async def start(self, workflow: str, input: Any, *, idempotency_key: str | None) -> str:
        tool = START_TOOL_PREFIX + workflow
        arguments = {} if input is None else {"body": input}
        headers: dict[str, str] = {}
        meta: dict[str, Any] = {}
        if idempotency_key is not None:
            if idempotency_key and _plain_header(idempotency_key):
                headers[IDEMPOTENCY_HEADER] = idempotency_key
            else:  # a header would lose it (trimmed, or not ASCII): the `_meta` form keeps it
                meta[IDEMPOTENCY_META] = idempotency_key
        result = await self._call(
            codes.TOOLS_CALL,
            {"name": tool, "arguments": arguments},
            name=tool,
            meta=meta,
            headers=headers,
        )
        task_id = result.get("taskId")
        if result.get("resultType") == "task" and isinstance(task_id, str):
            return task_id
        if result.get("isError") is True:
            structured = result.get("structuredContent")
            error = structured.get("error") if isinstance(structured, dict) else None
            raise _wire_error(codes.TOOLS_CALL, error if isinstance(error, dict) else {})
        raise errors.TransportError(f"{tool} did not create a task")

    async def get(self, run_id: str) -> RunSnapshot:
        return _snapshot(await self._call(TASKS_GET, {"taskId": run_id}, name=run_id))

    async def answer(self, run_id: str, wait: str, values: Any) -> Answered:
        target = _resolve(await self.get(run_id), wait)
        content = (
            {PAYLOAD_FIELD: orjson.dumps(values).decode()}
            if is_payload_form(target.form)
            else values
        )
        response = {"action": "accept", "content": content}
        await self._call(
            TASKS_UPDATE,
            {"taskId": run_id, "inputResponses": {target.key: response}},
            name=run_id,
        )
        return Answered(target.key)

    async def cancel(self, run_id: str) -> None:
        await self._call(TASKS_CANCEL, {"taskId": run_id}, name=run_id)

    async def changes(self, run_id: str) -> AsyncGenerator[RunSnapshot, None]:
        last: RunSnapshot | None = None
        streaming = True
        while True:
            fresh = False
            if streaming:
                try:
                    async for snapshot in self._listen(run_id):
                        if snapshot != last:
                            last, fresh = snapshot, True
                            yield snapshot
                        if snapshot.ended:
                            return
                except _NoStream:
                    streaming = False
                except _StreamDropped:
                    pass
                if streaming and fresh:
                    continue  # the stream broke off after news: listen again at once
            snapshot = await self.get(run_id)
            if snapshot != last:
                last = snapshot
                yield snapshot
            if snapshot.ended:
                return
            await asyncio.sleep(snapshot.poll_interval or DEFAULT_POLL_S)

    async def _listen(self, run_id: str) -> AsyncIterator[RunSnapshot]:
        """The run's views on one `subscriptions/listen` stream: the current one first, then
        each change, until the server ends the stream. Raises _NoStream when the server
        serves none to this client, _StreamDropped when an open stream breaks off."""
        request_id, body, sent = self._envelope(
            codes.LISTEN, {"notifications": {"taskIds": [run_id]}}
        )
        timeout = httpx.Timeout(self._timeout, read=LISTEN_IDLE_S)
        opened = False
        try:
            async with self._http.stream(
                "POST", self.url, content=body, headers=sent, timeout=timeout
            ) as response:
                opened = True
                if _content_type(response) != SSE:
                    await response.aread()
                    reply = _reply(response, request_id, codes.LISTEN)
                    error = reply.get("error")
                    code = error.get("code") if isinstance(error, dict) else None
                    if code in _NO_STREAM:
                        raise _NoStream()
                    raise _wire_error(codes.LISTEN, error if isinstance(error, dict) else {})
                messages = sse.stream(response.aiter_bytes())
                async with aclosing(messages):
                    async for message in messages:
                        method = message.get("method")
                        params = message.get("params")
                        params = params if isinstance(params, dict) else {}
                        if method == codes.LISTEN_ACKNOWLEDGED:
                            agreed = (params.get("notifications") or {}).get("taskIds") or []
                            if run_id not in agreed:
                                raise errors.RunNotFound(f"no run {run_id!r} to follow")
                        elif method == codes.TASK_NOTIFICATION and params.get("taskId") == run_id:
                            yield _snapshot(params)
                        elif message.get("id") == request_id:
                            error = message.get("error")
                            if isinstance(error, dict):
                                raise _wire_error(codes.LISTEN, error)
                            return
        except httpx.HTTPError as exc:
            if opened:
                raise _StreamDropped() from exc
            with _httpx_errors():
                raise


def _content_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.split(";")[0].strip().lower()


def _reply(response: httpx.Response, request_id: int, method: str) -> dict[str, Any]:
    """The JSON-RPC response to request `request_id` in a JSON or SSE body. Raises
    NotAuthorized (401/403 without one), TransportError (anything else that is not one)."""
    reply: Any = None
    if _content_type(response) == SSE:
        found = [m for m in sse.messages(response.content) if m.get("id") == request_id]
        reply = found[-1] if found else None
    else:
        try:
            reply = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            reply = None
    if isinstance(reply, dict) and ("result" in reply or "error" in reply):
        return reply
    if response.status_code in (401, 403):
        raise errors.NotAuthorized(f"{method}: HTTP {response.status_code}")
    raise errors.TransportError(
        f"{method}: the server's answer is not a JSON-RPC response (HTTP {response.status_code})"
    )


def _snapshot(task: Mapping[str, Any]) -> RunSnapshot:
    try:
        return from_task(task)
    except ValueError as exc:
        raise errors.TransportError(
            f"the server sent a task this client cannot read: {exc}"
        ) from exc


def _resolve(snapshot: RunSnapshot, ref: str) -> OpenWait:
    """The one open wait with key or name `ref`. Raises AnswerRefused (naming the open
    waits) when none or several match, as the runtime refuses such an answer."""
    found = snapshot.find_wait(ref)
    if len(found) == 1:
        return found[0]
    keys = [w.key for w in snapshot.waits]
    if found:
        message = f"{len(found)} open waits are named {ref!r}: answer with the key"
    elif keys:
        message = f"no open wait is named {ref!r}; open now: {', '.join(keys)}"
    elif snapshot.ended:
        message = f"no open wait is named {ref!r}; the run has ended ({snapshot.status})"
    else:
        message = f"no open wait is named {ref!r}; the run has no open wait now"
    raise errors.AnswerRefused(message, open_waits=keys)
