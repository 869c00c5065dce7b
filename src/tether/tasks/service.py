"""tasks/get, tasks/update, tasks/cancel over the runtime operations. No JSON-RPC here: domain
errors only (tasks/methods.py maps them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether.principal import Principal
from tether.runtime import errors as runtime_errors
from tether.runtime.operations import Operations, RunView
from tether.runtime.payloads import shown_view
from tether.runtime.rows import ExecutionRow
from tether.tasks import views


class TaskNotFound(Exception):
    """Task not found."""


class TaskInputRefused(Exception):
    """An input response was refused; the wait stays open."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class TaskService:
    def __init__(
        self,
        ops: Operations,
        *,
        served: Callable[[str], bool],
        poll_interval_ms: int = 5000,
        answer_tool: Callable[[str], str | None] = lambda workflow: None,
    ) -> None:
        self.ops = ops
        self.served = served  # is this workflow's run a task (in the MCP catalog)?
        self.poll_interval_ms = poll_interval_ms
        self.answer_tool = answer_tool  # the workflow's answer tool, if the catalog serves one

    async def _view(self, ops: Operations, task_id: str) -> RunView:
        try:
            view = await ops.get(task_id)
        except runtime_errors.ExecutionNotFound:  # also another tenant's run: no oracle
            raise TaskNotFound() from None
        if not self.served(view.requested.workflow):
            raise TaskNotFound()  # runs outside the catalog are not tasks: no existence oracle
        return view

    def render(self, view: RunView, *, elicitation: bool) -> dict[str, Any]:
        return views.task(
            view.requested,
            view.current,
            view.chain,
            elicitation=elicitation,
            poll_interval_ms=self.poll_interval_ms,
            answer_tool=self.answer_tool(view.current.workflow),
        )

    def created(self, row: ExecutionRow) -> dict[str, Any]:
        """The CreateTaskResult for a run just committed."""
        task = views.task(
            row, row, (row,), elicitation=False, poll_interval_ms=self.poll_interval_ms
        )
        return views.create_task_result(task)

    async def get(
        self,
        task_id: str,
        *,
        elicitation: bool,
        principal: Principal | None = None,
        reveal: bool = False,
    ) -> dict[str, Any]:
        """The task view of `task_id` as `principal` may see it; its result decoded only when
        the read gate admits the caller (`reveal`, runtime/payloads.py), else holding the
        stored envelope. Raises TaskNotFound (also for another tenant's run)."""
        view = shown_view(await self._view(self.ops.for_principal(principal), task_id), reveal)
        return self.render(view, elicitation=elicitation)

    async def update(
        self,
        task_id: str,
        responses: dict[str, Any],
        *,
        by: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        """Deliver accepted answers for open keys; ignore keys that are not outstanding.
        Every entry is checked before any is delivered (one transaction), so a refused update
        changes nothing. Raises TaskNotFound, TaskInputRefused."""
        ops = self.ops.for_principal(principal)
        view = await self._view(ops, task_id)
        run = view.current
        self._check_live_in_catalog(view)
        open_waits = {w["key"]: w for w in run.waits if w.get("key") in responses}
        answers = [
            (key, _accepted_answer(key, wait, responses[key])) for key, wait in open_waits.items()
        ]
        if not answers:
            return
        try:
            await ops.answer_many(run.id, answers, by=by)
        except runtime_errors.AnswerRejected as exc:
            raise _refused(exc) from exc

    async def cancel(
        self, task_id: str, *, by: str | None = None, principal: Principal | None = None
    ) -> None:
        """Cooperative cancel of the chain's live run; an ended task is acknowledged as is."""
        ops = self.ops.for_principal(principal)
        view = await self._view(ops, task_id)
        self._check_live_in_catalog(view)
        if view.requested.sealed_from:
            return  # a sealed run keeps its ending; the task does not follow the rerun
        await ops.cancel(task_id, by=by)

    def _check_live_in_catalog(self, view: RunView) -> None:
        if view.current.live and not self.served(view.current.workflow):
            raise TaskInputRefused(
                f"the task continued as workflow {view.current.workflow!r}, which is not "
                "served over MCP"
            )


def _accepted_answer(key: str, wait: dict[str, Any], response: Any) -> Any:
    if not isinstance(response, dict) or "action" not in response:
        raise TaskInputRefused(f"input response for {key!r} must be an ElicitResult", {"key": key})
    action = response["action"]
    if action != "accept":
        raise TaskInputRefused(
            f"{action!r} does not answer {key!r}; the input stays open (use tasks/cancel to "
            "stop the task)",
            {"key": key, "action": action},
        )
    try:
        return views.answer_from_content(wait, response.get("content"))
    except runtime_errors.AnswerRejected as exc:
        raise _refused(exc) from exc
    except ValueError as exc:
        raise TaskInputRefused(str(exc), {"key": key}) from exc


def _refused(exc: runtime_errors.AnswerRejected) -> TaskInputRefused:
    """An answer that does not fit its wait, refused as the answer path refuses one."""
    return TaskInputRefused(
        f"input refused: {exc.message}", {"reason": exc.message, "errors": exc.errors}
    )
