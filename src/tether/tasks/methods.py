"""Registers tasks/get, tasks/update and tasks/cancel on a Router. Domain errors leave through
the runtime → JSON-RPC table with the task service's errors added (tasks/errors.py). Every
method needs the Tasks extension declared on its own request, checked before anything is
looked up."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tether.jsonrpc.errors import tasks_capability_required
from tether.jsonrpc.headers import Era
from tether.jsonrpc.router import RequestContext, Router, parse_params
from tether.runtime.payloads import reveals
from tether.tasks.errors import jsonrpc_errors
from tether.tasks.service import TaskService


class TaskParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    taskId: str = Field(min_length=1)


class UpdateParams(TaskParams):
    inputResponses: dict[str, Any]


def _task_id(params: dict[str, Any]) -> str:
    """params.taskId; a valid one without building the model (tasks/get is the hot path)."""
    task_id = params.get("taskId")
    if isinstance(task_id, str) and task_id:
        return task_id
    return parse_params(TaskParams, params).taskId  # raises InvalidParams naming the field


def register(router: Router, service: TaskService) -> None:
    def gate(ctx: RequestContext) -> None:
        if not ctx.route.declares_tasks():
            raise tasks_capability_required(f"{ctx.method} needs the tasks extension declared")

    async def get(ctx: RequestContext) -> dict[str, Any]:
        gate(ctx)
        task_id = _task_id(ctx.params)
        with jsonrpc_errors():
            return await service.get(
                task_id,
                elicitation="form" in ctx.route.elicitation_modes(),
                principal=ctx.principal,
                reveal=reveals(ctx.principal),
            )

    async def update(ctx: RequestContext) -> dict[str, Any]:
        gate(ctx)
        params = parse_params(UpdateParams, ctx.params)
        with jsonrpc_errors():
            await service.update(
                params.taskId,
                params.inputResponses,
                by=ctx.principal_name,
                principal=ctx.principal,
            )
        return {}

    async def cancel(ctx: RequestContext) -> dict[str, Any]:
        gate(ctx)
        params = parse_params(TaskParams, ctx.params)
        with jsonrpc_errors():
            await service.cancel(params.taskId, by=ctx.principal_name, principal=ctx.principal)
        return {}

    # Registered for the 2025 revisions too, so their tasks/* calls get the -32021 of the
    # capability gate (older clients never get tasks) rather than -32601.
    both: tuple[Era, ...] = ("modern", "legacy")
    router.add("tasks/get", get, eras=both)
    router.add("tasks/update", update, eras=both)
    router.add("tasks/cancel", cancel, eras=both)
