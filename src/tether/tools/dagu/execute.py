"""The `dagu_execute` tool: check the input (inputs.py), authorize, perform exactly the
requested action (actions.py, decide.py), then optionally wait for the identified run, and
answer in `dagu_execute`'s result shape (results.py).

Waiting uses the runtime's change notifications (LISTEN/NOTIFY through `Operations.wait_until`),
not Dagu's 2-second polling: the reply leaves as soon as the run's row reaches a terminal state
or a waiting checkpoint (`uris.notifies`), or a sub-DAG run it is parked on stops at one
(`checkpoint.py`).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from tether.principal import Principal
from tether.runtime import errors
from tether.runtime.dag.status import RUN_STATUSES
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.specs.limits import SpecLimits
from tether.tools.dagu import actions, inputs, resolve
from tether.tools.dagu.checkpoint import StopsAtCheckpoint
from tether.tools.dagu.decide import decide
from tether.tools.dagu.detail import run_detail
from tether.tools.dagu.inputs import DECISIONS, ExecuteInput, InputError
from tether.tools.dagu.results import (
    INTERNAL_ERROR,
    INVALID_TOOL_INPUT,
    UNAUTHENTICATED,
    UNAUTHORIZED,
    DaguError,
    error_result,
    success_result,
    translate,
)
from tether.tools.dagu.uris import REFERENCES, logs_uri, notifies, run_uri

logger = logging.getLogger(__name__)

SUBSCRIBE: Final = (
    "To hear when the run stops at a waiting checkpoint or ends, call subscriptions/listen "
    "with notifications.resourceSubscriptions [runUri]; each "
    "notifications/resources/updated on that stream means: read runUri again."
)


def authorize(principal: Principal | None) -> None:
    """Every execution action needs the operator role (as `tether runs …` and tasks/*)."""
    if principal is None or (principal.name == "anonymous" and principal.role == "reader"):
        raise DaguError(UNAUTHENTICATED, "authentication is required to execute DAG-runs")
    if not principal.may_mutate:
        raise DaguError(
            UNAUTHORIZED, f"{principal.name} ({principal.role}) may not execute DAG-runs"
        )


class DaguExecute:
    def __init__(self, ops: Operations, limits: SpecLimits | None = None) -> None:
        self.ops = ops
        self.limits = limits or SpecLimits()  # on inline specs and JSON inputs
        self.inline: set[str] = set()  # DAG names registered from inline specs by this tool

    async def call(
        self, args: Any, principal: Principal | None, ops: Operations | None = None
    ) -> dict[str, Any]:
        """One call; `ops`: the operations the caller may use (scoped to its tenant)."""
        scoped = self.ops if ops is None else ops
        echo = inputs.partial(args)
        try:
            inp = inputs.parse(args, self.limits)
        except InputError as exc:
            return error_result(DaguError(INVALID_TOOL_INPUT, exc.message, field=exc.field), echo)
        echo = {
            "action": inp.action,
            "targetType": inp.target_type,
            "dagName": inp.name,
            "dagRunId": inp.dag_run_id,
        }
        by = None if principal is None else principal.name
        try:
            authorize(principal)
            out = await self._act(scoped, inp, by)
        except DaguError as exc:
            return error_result(exc, echo)
        except errors.TetherError as exc:
            return error_result(translate(exc), echo)
        except Exception:
            logger.exception("dagu_execute %s failed", inp.action)
            return error_result(
                DaguError(INTERNAL_ERROR, "the server failed while handling the action"), echo
            )
        return success_result(_text(out), out)

    async def _act(self, ops: Operations, inp: ExecuteInput, by: str | None) -> dict[str, Any]:
        row, decided = await self._perform(ops, inp, by)
        out: dict[str, Any] = {
            "action": inp.action,
            "targetType": inp.target_type,
            "dagName": inp.name,
            "dagRunId": row.business_id,
            "references": list(REFERENCES),
            "runUri": run_uri(inp.name, row.business_id),
            "logsUri": logs_uri(inp.name, row.business_id),
        }
        if decided:
            out["stepName"] = inp.step_name
            if inp.sub_dag_run_id is not None:
                out["subDAGRunId"] = inp.sub_dag_run_id
        if inp.wait:
            out.update(await self._wait(ops, row, inp.wait_timeout_s))
            return out
        out["subscribe"] = SUBSCRIBE
        if decided:
            out.update(await self._status_after(ops, inp))
        return out

    async def _perform(
        self, ops: Operations, inp: ExecuteInput, by: str | None
    ) -> tuple[ExecutionRow, bool]:
        if inp.action in ("start", "enqueue"):
            return await actions.start(ops, inp, by, self.inline, self.limits), False
        if inp.action == "retry":
            return await actions.retry(ops, inp, by), False
        if inp.action == "stop":
            return await actions.stop(ops, inp, by), False
        assert inp.action in DECISIONS  # noqa: S101 — parse allows nothing else
        root = await actions.current(ops, inp)
        await decide(ops, inp, root, by)
        return root, True

    async def _status_after(self, ops: Operations, inp: ExecuteInput) -> dict[str, Any]:
        """The status of the run `name` + `dagRunId` after a decision, when it can be read."""
        assert inp.dag_run_id is not None  # noqa: S101
        try:
            read = await resolve.read(ops, inp.name, inp.dag_run_id)
        except errors.TetherError:
            return {}
        if read is None:
            return {}
        return {"status": read.status.status, "statusLabel": read.status.status_label}

    async def _wait(self, ops: Operations, row: ExecutionRow, timeout_s: float) -> dict[str, Any]:
        """Wait for a terminal state or a waiting checkpoint; a failure is `waitError`."""
        out: dict[str, Any] = {"completed": False}
        try:
            stops = StopsAtCheckpoint(ops)
            view = await ops.wait_until(row.id, stops, timeout=timeout_s)
            current, in_child = view.current, stops.in_sub_run
            read = await resolve.load(ops, current)
        except errors.TetherError as exc:
            out["waitError"] = f"the wait failed: {exc}"
            return out
        out["completed"] = not current.live
        run = run_detail(read)
        if in_child:  # Dagu: a parent step waits while its child waits; so does the run
            run["status"], run["statusLabel"] = RUN_STATUSES["waiting"], "waiting"
        out["status"], out["statusLabel"] = run["status"], run["statusLabel"]
        if in_child or notifies(current):
            out["run"] = run
        else:  # as in Dagu, a wait that timed out carries no run detail
            out["waitTimedOut"] = True
        return out


def _text(out: dict[str, Any]) -> str:
    what = f"{out['action']} {out['dagName']} run {out['dagRunId']}"
    if "completed" in out:
        state = out.get("statusLabel", "unknown")
        if out.get("waitError"):
            return f"{what}: done; {out['waitError']}"
        if out["completed"]:
            return f"{what}: the run ended {state}."
        if state == "waiting":
            return f"{what}: the run waits for a decision (see run.steps)."
        return f"{what}: the wait timed out while the run is {state}; it goes on."
    if "statusLabel" in out:
        return f"{what}: decided {out.get('stepName')}; the run is {out['statusLabel']}."
    return f"{what}: accepted. {SUBSCRIBE}"
