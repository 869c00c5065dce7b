"""tools/list and tools/call: dispatch a call to its tool, in task mode when the request
declares the Tasks extension. Runtime errors leave through the one runtime → tool error table
(tools/errors.py). The request's headers were checked by the ladder (jsonrpc/headers.py)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tether.jsonrpc import codes, headers
from tether.jsonrpc.errors import InvalidParams, tasks_capability_required
from tether.jsonrpc.router import RequestContext, Router, parse_params
from tether.runtime import answers
from tether.runtime import errors as runtime_errors
from tether.runtime.hints import answer_hints
from tether.runtime.operations import Operations, RunView
from tether.runtime.payloads import reveals, shown_view
from tether.runtime.watching import answerable_waits, watch_stop
from tether.specs.limits import SpecLimits
from tether.tasks.service import TaskService
from tether.tools import results, state
from tether.tools.catalog import Catalog, Tool
from tether.tools.context import InputRequired, ToolContext, ToolError
from tether.tools.dagu.execute import DaguExecute
from tether.tools.dagu.reading import dagu_read
from tether.tools.errors import WorkflowProtocolError, tool_call
from tether.tools.realm.service import RealmTools

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSettings:
    state_key: bytes
    list_ttl_ms: int = 60_000
    sync_limit_s: float = 60.0  # a workflow tool called without the Tasks extension
    start_wait_s: float = 0.0  # start_<wf> without the extension: wait this long for the end
    watch_limit_s: float = 300.0
    spec_limits: SpecLimits = field(default_factory=SpecLimits)  # inline DAG specs, plans


class CallParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    inputResponses: dict[str, Any] | None = None
    requestState: str | None = None


class HandleArgs(BaseModel):
    handle: str = Field(min_length=1)


class WatchArgs(HandleArgs):
    timeout_seconds: float = Field(60.0, ge=1, le=300)


class SignalArgs(HandleArgs):
    name: str = Field(min_length=1)
    payload: Any = None
    idempotency_key: str | None = None


class AnswerArgs(HandleArgs):
    wait: str = Field(min_length=1)
    response: Any = None


class UpdateArgs(HandleArgs):
    input: Any = None


class StartArgs(BaseModel):
    body: Any = None
    idempotency_key: str | None = None


def _body_missing(workflow: str, args: dict[str, Any]) -> runtime_errors.InvalidInput:
    """A start without `body` (often the input's fields given flat, beside it): say where the
    input goes and which arguments were not it, instead of validating `null`."""
    stray = sorted(k for k in args if k != "idempotency_key")
    msg = "Field required: the workflow's input goes under 'body'"
    if stray:
        msg += f" (got {', '.join(stray)} beside it)"
    return runtime_errors.InvalidInput(
        f"invalid input for workflow {workflow!r}",
        [{"loc": ["body"], "msg": msg, "type": "missing"}],
    )


def _log_level(ctx: RequestContext) -> str | None:
    meta = ctx.params.get("_meta")
    level = meta.get(codes.META_LOG_LEVEL) if isinstance(meta, dict) else None
    if isinstance(level, str):
        return level
    return "debug" if ctx.route.era == "legacy" else None


def _idempotency_key(ctx: RequestContext, fallback: str | None = None) -> str | None:
    return headers.idempotency_key(ctx.params, ctx.headers) or fallback


class ToolService:
    def __init__(
        self, ops: Operations, catalog: Catalog, tasks: TaskService, settings: ToolSettings
    ) -> None:
        self.ops = ops
        self.catalog = catalog
        self.tasks = tasks
        self.settings = settings
        self.realm = RealmTools(ops, settings.spec_limits)
        self.dagu = DaguExecute(ops, settings.spec_limits)

    def register(self, router: Router) -> None:
        router.add("tools/list", self.list_tools, eras=("modern", "legacy"))
        router.add("tools/call", self.call, eras=("modern", "legacy"), streams=True)

    async def list_tools(self, ctx: RequestContext) -> dict[str, Any]:
        result: dict[str, Any] = {"tools": self.catalog.listing}
        if ctx.route.era == "modern":
            result["ttlMs"] = self.settings.list_ttl_ms
            result["cacheScope"] = "private"
        return result

    async def call(self, ctx: RequestContext) -> dict[str, Any]:
        params = parse_params(CallParams, ctx.params)
        tool = self.catalog.get(params.name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {params.name}")
        return await tool_call(self._dispatch(ctx, tool, params, params.arguments or {}))

    async def _dispatch(
        self, ctx: RequestContext, tool: Tool, params: CallParams, args: dict[str, Any]
    ) -> dict[str, Any]:
        if tool.kind == "plain":
            return await self._plain(ctx, tool, params, args)
        if tool.kind == "dagu_execute":
            return await self.dagu.call(args, ctx.principal, self.ops.for_principal(ctx.principal))
        if tool.kind == "dagu_read":
            return await dagu_read(self.ops.for_principal(ctx.principal), args)
        if tool.kind == "workflow":
            return await self._workflow(ctx, tool, args)
        if tool.kind == "start":
            return await self._start(ctx, tool, args)
        if tool.kind == "realm":
            ops = self.ops.for_principal(ctx.principal)
            return await self.realm.call(ops, tool.name, args, ctx.principal_name)
        handle = parse_params(HandleArgs, args).handle
        ops = self.ops.for_principal(ctx.principal)
        view = await self._resolve(ops, tool, handle)
        if view is None:
            return results.not_found(handle)
        if tool.kind == "status":
            return results.text_result(self._summary(ctx, view))
        if tool.kind == "watch":
            timeout = parse_params(WatchArgs, args).timeout_seconds
            return await self._watch(ctx, ops, view, timeout)
        by = ctx.principal_name
        if tool.kind == "answer":
            aa = parse_params(AnswerArgs, args)
            response = answers.read(answers.Value(aa.response))  # JSON: taken as it is
            answered = await ops.answer_wait(handle, aa.wait, response, by=by)
            return results.text_result(results.answered(answered))
        if tool.kind == "signal":
            sa = parse_params(SignalArgs, args)
            res = await ops.signal(
                handle, sa.name, sa.payload, idempotency_key=sa.idempotency_key, by=by
            )
            return results.text_result({"status": res.status, "execution_id": res.execution_id})
        ua = parse_params(UpdateArgs, args)
        _, update_name = tool.target.split("/", 1)
        output = await ops.update(handle, update_name, ua.input, by=by)
        return results.text_result({"execution_id": view.current.id, "output": output})

    def _summary(self, ctx: RequestContext, view: RunView) -> dict[str, Any]:
        return results.summary(
            shown_view(view, reveals(ctx.principal)),
            answer_tool=self.catalog.answer_tool(view.current.workflow),
            tasks_update=ctx.route.declares_tasks(),
        )

    async def _resolve(self, ops: Operations, tool: Tool, handle: str) -> RunView | None:
        """A handle of another workflow, or another tenant's, is refused like an unknown one
        (no existence oracle)."""
        workflow = tool.target.split("/", 1)[0]
        try:
            view = await ops.get(handle)
        except runtime_errors.ExecutionNotFound:
            return None
        return view if view.requested.workflow == workflow else None

    # --- workflows ------------------------------------------------------------------------------

    async def _start_run(
        self, ctx: RequestContext, workflow: str, body: Any, key: str | None
    ) -> Any:
        """Start a run in the caller's tenant (its principal's; none for an unbound one)."""
        return await self.ops.for_principal(ctx.principal).start(
            workflow, body, idempotency_key=_idempotency_key(ctx, key), by=ctx.principal_name
        )

    async def _workflow(
        self, ctx: RequestContext, tool: Tool, args: dict[str, Any]
    ) -> dict[str, Any]:
        wf = self.ops.workflow(tool.target)
        if ctx.route.declares_tasks():
            started = await self._start_run(ctx, wf.name, args, None)
            return self.tasks.created(started.execution)
        if wf.expose.task_support == "required":
            raise tasks_capability_required(f"tool {tool.name!r} runs only as a task")
        started = await self._start_run(ctx, wf.name, args, None)
        ops = self.ops.for_principal(ctx.principal)
        # Until the run ends, or waits for an answer only the caller can give: waiting on past
        # that would hold the call for the sync limit while the run could not move.
        view = await ops.wait_until(
            started.execution.id,
            lambda row: watch_stop(row) is not None,
            timeout=self.settings.sync_limit_s,
        )
        return self._final_result(shown_view(view, reveals(ctx.principal)), tool.name)

    def _final_result(self, view: RunView, tool_name: str) -> dict[str, Any]:
        if watch_stop(view.current) == "needs_answer":
            return self._needs_answer(view)
        task = self.tasks.render(view, elicitation=False)
        if task["status"] == "completed":
            result: dict[str, Any] = task["result"]
            return result
        if task["status"] == "failed":
            err = task["error"]
            raise WorkflowProtocolError(err["code"], err["message"], err.get("data"))
        if task["status"] == "cancelled":
            return results.tool_error(
                "cancelled", "the run was cancelled", execution_id=view.current.id
            )
        return results.tool_error(
            "still_running",
            f"the run did not finish within {self.settings.sync_limit_s:g}s; it goes on. "
            "Declare the io.modelcontextprotocol/tasks extension to get a task instead.",
            execution_id=view.current.id,
        )

    def _needs_answer(self, view: RunView) -> dict[str, Any]:
        """A workflow tool's run that waits for the caller: the tool error `input_required`
        with the handle, each open wait, and the calls that answer it (the workflow's answer
        tool; without one, the command a person runs)."""
        run = view.current
        answer_tool = self.catalog.answer_tool(run.workflow)
        shown = results.summary(view, answer_tool=answer_tool)
        waits = answerable_waits(run)
        ways = [
            line
            for w in waits
            for line in answer_hints(run, w, tool=answer_tool, cli=answer_tool is None)
        ]
        where = "" if answer_tool is None else f"; then follow it with {run.workflow}_watch"
        return results.tool_error(
            "input_required",
            f"the run waits for an answer: {'; '.join(ways)}{where}",
            execution_id=run.id,
            handle=view.requested.id,
            waits=shown.get("waits"),
        )

    async def _start(self, ctx: RequestContext, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        sa = parse_params(StartArgs, args)
        if "body" not in args and self.ops.workflow(tool.target).takes_input:
            raise _body_missing(tool.target, args)
        started = await self._start_run(ctx, tool.target, sa.body, sa.idempotency_key)
        if ctx.route.declares_tasks():
            return self.tasks.created(started.execution)
        ops = self.ops.for_principal(ctx.principal)
        view = await ops.get(started.execution.id)
        if self.settings.start_wait_s > 0:
            view = await ops.wait_for_end(view.requested.id, timeout=self.settings.start_wait_s)
        out = self._summary(ctx, view)
        out["deduped"] = started.deduped
        return results.text_result(out)

    async def _watch(
        self, ctx: RequestContext, ops: Operations, view: RunView, timeout: float
    ) -> dict[str, Any]:
        """Progress notifications on every visible change of a live run, across sleeps,
        retries and continue-as-new, until the run ends or waits for the caller
        (runtime/watching.py); the last frame then names the wait and how to answer it. As
        in Harvest, the end is the result alone (`{state, output, error}` and Tether's
        fields), never a progress frame: an already ended run yields the result at once."""
        progress = 0
        last: tuple[str, str, str | None, int] | None = None
        tasks_update = ctx.route.declares_tasks()

        async def emit(v: RunView) -> None:
            nonlocal progress, last
            row = v.current
            marker = (row.id, row.status, row.details, row.version if row.waits else 0)
            if marker == last or ctx.progress_token is None or watch_stop(row) == "ended":
                return
            last = marker
            progress += 1
            await ctx.notify(
                "notifications/progress",
                {
                    "progressToken": ctx.progress_token,
                    "progress": progress,
                    "message": _frame(v, self.catalog.answer_tool(row.workflow), tasks_update),
                },
            )

        deadline = asyncio.get_running_loop().time() + min(timeout, self.settings.watch_limit_s)
        current = view
        await emit(current)
        while watch_stop(current.current) is None:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            seen = (current.current.id, current.current.version)

            def changed(row: Any, seen: tuple[str, int] = seen) -> bool:
                return (row.id, row.version) != seen

            current = await ops.wait_until(view.requested.id, changed, timeout=remaining)
            await emit(current)
        out = self._summary(ctx, current)
        stop = watch_stop(current.current)
        out["completed"] = stop == "ended"
        out["stopped"] = stop or "timeout"
        return results.text_result(out)

    # --- plain tools -------------------------------------------------------------------------

    async def _plain(
        self, ctx: RequestContext, tool: Tool, params: CallParams, args: dict[str, Any]
    ) -> dict[str, Any]:
        td = self.ops.app.tools[tool.target]
        request_state = None
        if params.requestState is not None:
            try:
                request_state = state.unseal(self.settings.state_key, params.requestState)
            except ValueError as exc:
                raise InvalidParams(f"invalid requestState: {exc}") from exc
            if not isinstance(request_state, dict) or request_state.get("tool") != tool.name:
                raise InvalidParams("requestState was issued for another tool")
            request_state = request_state.get("state")

        async def start_task(workflow: str, input_: Any) -> dict[str, Any]:
            if not ctx.route.declares_tasks():
                raise tasks_capability_required()
            if not self.catalog.in_catalog(workflow):
                raise ValueError(
                    f"workflow {workflow!r} is not served as MCP tasks; register it with "
                    "expose=Exposure(tasks=True)"
                )
            started = await self._start_run(ctx, workflow, input_, None)
            return self.tasks.created(started.execution)

        tctx = ToolContext(
            name=tool.name,
            route=ctx.route,
            principal=ctx.principal,
            input_responses=params.inputResponses or {},
            request_state=request_state,
            progress_token=ctx.progress_token,
            log_level=_log_level(ctx),
            _notify=ctx.notify,
            _start_task=start_task,
        )
        try:
            if td.takes_input:
                value = await td.fn(tctx, td.input_adapter.validate_python(args))
            else:
                value = await td.fn(tctx)
        except InputRequired as need:
            if ctx.route.era != "modern":
                return results.tool_error(
                    "input_required", "this tool needs input that only 2026-07-28 clients can give"
                )
            out: dict[str, Any] = {"resultType": "input_required", "inputRequests": need.requests}
            if need.state is not None:
                out["requestState"] = state.seal(
                    self.settings.state_key, {"tool": tool.name, "state": need.state}
                )
            return out
        except ToolError as exc:
            return results.tool_error("tool_error", exc.message, **(exc.structured or {}))
        if isinstance(value, dict) and ("content" in value or "resultType" in value):
            return value
        return results.text_result(value)


def _frame(view: RunView, answer_tool: str | None, tasks_update: bool) -> str:
    """A watch frame's words: the run's status and details, or the wait and how to answer."""
    row = view.current
    waits = answerable_waits(row) if watch_stop(row) == "needs_answer" else []
    if not waits:
        return row.details or row.status
    named = "; ".join(
        f"waiting for {w.get('kind')} {w.get('name')!r}: "
        + " | ".join(answer_hints(row, w, tool=answer_tool, tasks_update=tasks_update))
        for w in waits
    )
    return f"{row.details} — {named}" if row.details else named
