"""Registers tasks/get, tasks/update and tasks/cancel on a Router; maps domain errors to
JSON-RPC errors (the only place that does). Every method needs the Tasks extension declared
on its own request, checked before anything is looked up."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tether.jsonrpc.errors import InvalidParams, Unavailable, tasks_capability_required
from tether.jsonrpc.headers import Era
from tether.jsonrpc.router import RequestContext, Router, parse_params
from tether.runtime import errors as e
from tether.storage.errors import ErrorMapper
from tether.tasks.service import TaskInputRefused, TaskNotFound, TaskService

NOT_FOUND = "Failed to retrieve task: Task not found"


class TaskParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    taskId: str = Field(min_length=1)


class UpdateParams(TaskParams):
    inputResponses: dict[str, Any]


def _principal_name(ctx: RequestContext) -> str | None:
    p = ctx.principal
    return getattr(p, "name", None) if p is not None else None


class _Mapped(ErrorMapper):
    """Domain errors → JSON-RPC errors (the one place that maps them for tasks/*)."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, TaskNotFound):
            raise InvalidParams(NOT_FOUND) from None
        if isinstance(exc, TaskInputRefused):
            raise InvalidParams(exc.message, exc.data) from exc
        if isinstance(exc, e.InvalidInput):
            raise InvalidParams(exc.message) from exc
        if isinstance(exc, e.Unavailable):
            raise Unavailable(exc.message) from exc


_MAPPED = _Mapped()


def _mapped() -> _Mapped:
    return _MAPPED


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
        with _mapped():
            return await service.get(task_id, elicitation="form" in ctx.route.elicitation_modes())

    async def update(ctx: RequestContext) -> dict[str, Any]:
        gate(ctx)
        params = parse_params(UpdateParams, ctx.params)
        with _mapped():
            await service.update(params.taskId, params.inputResponses, by=_principal_name(ctx))
        return {}

    async def cancel(ctx: RequestContext) -> dict[str, Any]:
        gate(ctx)
        params = parse_params(TaskParams, ctx.params)
        with _mapped():
            await service.cancel(params.taskId, by=_principal_name(ctx))
        return {}

    # Registered for the 2025 revisions too, so their tasks/* calls get the -32021 of the
    # capability gate (DESIGN.md §5: older clients never get tasks) rather than -32601.
    both: tuple[Era, ...] = ("modern", "legacy")
    router.add("tasks/get", get, eras=both)
    router.add("tasks/update", update, eras=both)
    router.add("tasks/cancel", cancel, eras=both)
