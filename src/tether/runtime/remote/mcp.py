"""MCP as a remote protocol: `mcp-tasks` (2026-07-28 with the Tasks extension: the call is a
remote task, polled with `tasks/get`, answered with `tasks/update`, stopped with
`tasks/cancel`) and `mcp` (plain `tools/call`: the answer is the result).

The mapping from the wire to `Snapshot` and to the call's value is pure (`created_of`,
`snapshot_of`, `outcome_of`). A remote that asks for input must use form elicitation, the only
kind the client declares (`CAPABILITIES`); any other request fails the call. It may ask while
its task runs (`input_required`, answered with `tasks/update`) or before it creates one (the
create answered with an `InputRequiredResult`: the create is sent again with the answers and
the `requestState`).

The create mirrors the arguments the tool's input schema marks (`x-mcp-header`) into
`Mcp-Param-*` headers, from the remote's `tools/list` as this process knows it (tool_lists.py);
a remote that refuses the create for a header (`HeaderMismatch`: it was refused before it ran)
has its list read again and the create sent again, once, under the same key.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final, cast

from tether.runtime.remote import spec
from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import (
    RemoteCancelled,
    RemoteError,
    RemoteProtocolError,
    RemoteTaskLost,
    RemoteToolError,
    Transient,
)
from tether.runtime.remote.headers import param_headers
from tether.runtime.remote.protocol import Ask, Created, Reply, Snapshot, Status
from tether.runtime.remote.tool_lists import MAX_PAGES, ToolLists
from tether.runtime.remote.transport import Rpc, Transport

#: What a task-mode call declares: the Tasks extension, and form elicitation (the remote's
#: questions become waits of the run, answered by a person through Tether).
CAPABILITIES: Final[Mapping[str, Any]] = {
    "elicitation": {"form": {}},
    "extensions": {spec.TASKS: {}},
}
#: A plain call declares nothing optional: it cannot relay input.
PLAIN: Final[Mapping[str, Any]] = {}


def _refused(remote: str, tool: str, why: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"remote {remote!r}: {why}", remote=remote, tool=tool)


def _positive_ms(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _asks(requests: Any, remote: str, tool: str) -> tuple[Ask, ...]:
    """The task's `inputRequests` as questions; a request this client cannot relay (not a form
    elicitation) fails the call."""
    if not isinstance(requests, dict):
        raise _refused(remote, tool, "an input_required task without inputRequests")
    asks = []
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        params = request.get("params") if isinstance(request, dict) else None
        if method != spec.ELICITATION or not isinstance(params, dict):
            raise _refused(remote, tool, f"asked for {method!r}, which this client cannot relay")
        mode = params.get("mode", "form")
        schema = params.get("requestedSchema")
        if mode != "form" or not isinstance(schema, dict):
            raise _refused(remote, tool, f"asked for a {mode!r} elicitation, not a form")
        asks.append(Ask(str(key), str(params.get("message") or ""), schema))
    return tuple(asks)


def snapshot_of(result: Mapping[str, Any], remote: str, tool: str) -> Snapshot:
    """A `tasks/get` result (a DetailedTask) as a Snapshot.

    Raises:
        RemoteProtocolError: not a task this client can read.
    """
    status = result.get("status")
    if status not in spec.TASK_STATUSES:
        raise _refused(remote, tool, f"a task with status {status!r}")
    message = result.get("statusMessage")
    base: dict[str, Any] = {
        "status": cast(Status, status),
        "poll_ms": _positive_ms(result.get("pollIntervalMs")),
        "message": message if isinstance(message, str) else None,
    }
    if status == "input_required":
        return Snapshot(**base, asks=_asks(result.get("inputRequests"), remote, tool))
    if status == "completed":
        inner = result.get("result")
        if not isinstance(inner, dict):
            raise _refused(remote, tool, "a completed task without its result")
        return Snapshot(**base, result=inner)
    if status == "failed":
        error = result.get("error")
        return Snapshot(**base, error=error if isinstance(error, dict) else {})
    return Snapshot(**base)


def created_of(result: Mapping[str, Any], remote: str, tool: str, *, tasks: bool) -> Created:
    """A `tools/call` result: a task (`resultType: task`, only when `tasks` was declared),
    the tool's result at once, or (when `tasks`) the questions asked before anything is
    created (`input_required`: no task, the questions and the `requestState`).

    Raises:
        RemoteProtocolError: anything else (a task not asked for, input asked of a plain
            call or asking for nothing, an unknown result type).
    """
    kind = result.get("resultType", spec.RESULT_COMPLETE)  # an older server omits it
    if kind == spec.RESULT_TASK and tasks:
        task = result.get("taskId")
        if not isinstance(task, str) or not task:
            raise _refused(remote, tool, "a CreateTaskResult without a taskId")
        status = result.get("status", "working")
        first = Snapshot(
            status=status if status in ("working", "input_required") else "working",
            poll_ms=_positive_ms(result.get("pollIntervalMs")),
        )
        return Created(task, first)
    if kind == spec.RESULT_COMPLETE:
        return Created(None, Snapshot(status="completed", result=dict(result)))
    if kind == spec.RESULT_INPUT_REQUIRED and tasks:
        return _asked_first(result, remote, tool)
    if kind == spec.RESULT_INPUT_REQUIRED:
        raise _refused(remote, tool, "asked for input, which a plain call cannot relay")
    raise _refused(remote, tool, f"a tools/call result of type {kind!r}")


def _asked_first(result: Mapping[str, Any], remote: str, tool: str) -> Created:
    """An `InputRequiredResult` to a create: the questions asked before any task, and the
    `requestState` to carry back with their answers (a result with neither is refused:
    sending it again would be answered the same way)."""
    requests = result.get("inputRequests")
    state = result.get("requestState")
    state = state if isinstance(state, str) else None
    asks = _asks(requests, remote, tool) if requests is not None else ()
    if not asks and state is None:
        raise _refused(remote, tool, "an input_required result that asks for nothing")
    return Created(None, Snapshot(status="input_required", asks=asks), state=state)


def _responses(answers: Mapping[str, Any]) -> dict[str, Any]:
    """Form answers as the `inputResponses` that carry them (each an accepting ElicitResult)."""
    return {key: {"action": "accept", "content": value} for key, value in answers.items()}


def _text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    items = content if isinstance(content, list) else []
    return "\n".join(
        str(c.get("text", "")) for c in items if isinstance(c, dict) and c.get("type") == "text"
    )


def outcome_of(snapshot: Snapshot, remote: str, tool: str) -> Any:
    """An ended task's value: the tool's `structuredContent`, else its text.

    Raises:
        RemoteToolError: the result has `isError: true`.
        RemoteProtocolError: the task `failed` (its JSON-RPC error).
        RemoteCancelled: the task was cancelled.
    """
    if snapshot.status == "cancelled":
        message = snapshot.message or "the remote task was cancelled"
        raise RemoteCancelled(message, remote=remote, tool=tool)
    if snapshot.status == "failed":
        error = dict(snapshot.error or {})
        code = error.get("code")
        raise RemoteProtocolError(
            str(error.get("message") or snapshot.message or "the remote task failed"),
            remote=remote,
            tool=tool,
            code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            data=error.get("data"),
        )
    result = snapshot.result if isinstance(snapshot.result, dict) else {}
    if result.get("isError") is True:
        raise RemoteToolError(
            _text(result) or "the remote tool reported an error",
            remote=remote,
            tool=tool,
            result={k: v for k, v in result.items() if k not in ("_meta", "resultType")},
        )
    structured = result.get("structuredContent")
    return structured if structured is not None else _text(result)


class McpTasks:
    """`mcp-tasks`: the call is a task on the remote (module docstring)."""

    tasks: bool = True

    def __init__(
        self,
        remote: Remote,
        transport: Transport,
        tool: str,
        arguments: Mapping[str, Any],
        timeout_s: float | None,
    ) -> None:
        self.remote = remote
        self.transport = transport
        self.tool = tool
        self.arguments = dict(arguments)
        self.timeout_s = timeout_s

    async def create(self, key: str, reply: Reply | None = None) -> Created:
        call = functools.partial(self._call, key, reply)
        try:
            result = await self.transport.request(call(await self._param_headers()))
        except RemoteProtocolError as exc:
            lists = self.transport.tool_lists
            if exc.code != spec.HEADER_MISMATCH or lists is None:
                raise
            if not lists.expire(self.remote.name):
                raise
            # Refused before it ran (the same key goes again): the tool's schema may have
            # changed since its list was read. Read it again, once.
            result = await self.transport.request(call(await self._param_headers(strict=True)))
        return created_of(result, self.remote.name, self.tool, tasks=self.tasks)

    def _call(self, key: str, reply: Reply | None, headers: Mapping[str, str]) -> Rpc:
        params: dict[str, Any] = {"name": self.tool, "arguments": self.arguments}
        if reply is not None:  # a create sent again with the answers to what it asked
            params["inputResponses"] = _responses(reply.answers)
            if reply.state is not None:
                params["requestState"] = reply.state
        return Rpc(
            spec.TOOLS_CALL,
            params,
            name=self.tool,
            capabilities=CAPABILITIES if self.tasks else PLAIN,
            headers={**headers, spec.IDEMPOTENCY_HEADER: key},
            timeout_s=self._create_timeout(),
        )

    async def _param_headers(self, *, strict: bool = False) -> dict[str, str]:
        """The call's `Mcp-Param-*` headers, from the tool's schema in the remote's tool list
        (read first when this process does not know it fresh). `strict`: a transient failure
        to read the list is raised, else the call goes without them (and is not refused for
        it unless the remote wants one).

        Raises:
            Transient: `strict`, and the list could not be read for now.
        """
        lists = self.transport.tool_lists
        if lists is None:
            return {}
        fresh, schema = lists.schema(self.remote.name, self.tool)
        if not fresh:
            async with lists.lock(self.remote.name):
                fresh, schema = lists.schema(self.remote.name, self.tool)
                if not fresh:
                    schema = (await self._read_tools(lists, strict=strict)).get(self.tool)
        return param_headers(schema, self.arguments)

    async def _read_tools(
        self, lists: ToolLists, *, strict: bool
    ) -> Mapping[str, Mapping[str, Any]]:
        """The remote's tools (every page of `tools/list`, up to MAX_PAGES), kept in `lists`;
        a remote that refuses the list has none (kept so for a while)."""
        tools: list[Mapping[str, Any]] = []
        ttl_ms: int | None = None
        cursor: Any = None
        try:
            for _ in range(MAX_PAGES):
                params = {"cursor": cursor} if cursor else {}
                page = await self.transport.request(
                    Rpc(spec.TOOLS_LIST, params, capabilities=PLAIN)
                )
                listed = page.get("tools")
                tools += (
                    [t for t in listed if isinstance(t, dict)] if isinstance(listed, list) else []
                )
                if ttl_ms is None:
                    ttl_ms = _positive_ms(page.get("ttlMs"))
                cursor = page.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
        except Transient:
            if strict:
                raise
            return {}
        except RemoteError:
            lists.missing(self.remote.name)
            return {}
        return lists.store(self.remote.name, tools, ttl_ms)

    def _create_timeout(self) -> float | None:
        return None

    async def poll(self, task: str) -> Snapshot:
        result = await self._task_request(spec.TASKS_GET, task, {})
        return snapshot_of(result, self.remote.name, self.tool)

    async def answer(self, task: str, answers: Mapping[str, Any]) -> None:
        responses = _responses(answers)
        await self._task_request(spec.TASKS_UPDATE, task, {"inputResponses": responses})

    async def cancel(self, task: str) -> None:
        await self._task_request(spec.TASKS_CANCEL, task, {})

    def outcome(self, snapshot: Snapshot) -> Any:
        return outcome_of(snapshot, self.remote.name, self.tool)

    async def _task_request(
        self, method: str, task: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A `tasks/*` request; an unknown or expired task id (-32602) is a lost task."""
        rpc = Rpc(method, {"taskId": task, **params}, name=task, capabilities=CAPABILITIES)
        try:
            return await self.transport.request(rpc)
        except RemoteProtocolError as exc:
            if exc.code == spec.INVALID_PARAMS:
                raise RemoteTaskLost(
                    f"remote {self.remote.name!r} no longer knows the task: {exc}",
                    remote=self.remote.name,
                    tool=self.tool,
                ) from exc
            raise


class McpPlain(McpTasks):
    """`mcp`: a plain `tools/call`, answered with the result; it waits up to the call's
    timeout (else the remote's request timeout). There is never a task to poll."""

    tasks = False

    def _create_timeout(self) -> float | None:
        return self.timeout_s

    async def poll(self, task: str) -> Snapshot:
        raise AssertionError("a plain MCP call has no task")  # create never returns one
