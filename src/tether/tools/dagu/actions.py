"""The run actions of `dagu_execute`: start / enqueue (a stored DAG or an inline spec), retry,
stop. Each returns the execution row the action produced or acted on, or raises DaguError."""

from __future__ import annotations

from typing import Any

import orjson

from tether.runtime import errors
from tether.runtime.dag.catalog import InlineShellRefused, inline_key
from tether.runtime.dag.retrying import DagSteps
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.specs.dag import (
    DagSpec,
    DagSpecError,
    LimitExceeded,
    Step,
    check_size,
    every_step,
    load_string,
)
from tether.specs.errors import INLINE
from tether.specs.limits import SpecLimits
from tether.tools import offload
from tether.tools.dagu import resolve
from tether.tools.dagu.inputs import ExecuteInput
from tether.tools.dagu.results import (
    CONFLICT,
    INTERNAL_ERROR,
    INVALID_TOOL_INPUT,
    RESOURCE_NOT_FOUND,
    DaguError,
    translate,
)

#: The refusal of a spec whose reader ended before it answered (nothing was registered).
_LOST = "the process reading the spec ended before it answered; nothing was registered or started"

#: Which input field a start's runtime refusal is about.
_START_FIELD = {
    errors.ProfileNotFound: "profile",
    errors.QueueNotFound: "queue",
    errors.SingletonConflict: "singleton",
}


def dag_params(params: str | None) -> Any:
    """The DAG input's `params`: an object's canonical JSON becomes named params (non-string
    values as JSON text); any other string is a Dagu params string."""
    if params is None:
        return None
    if params.startswith("{"):
        try:
            loaded = orjson.loads(params)
        except orjson.JSONDecodeError:
            return params
        if isinstance(loaded, dict):
            return {
                k: v if isinstance(v, str) else orjson.dumps(v).decode() for k, v in loaded.items()
            }
    return params


def _register_inline(
    ops: Operations, inp: ExecuteInput, inline: set[str], spec: DagSpec
) -> list[Step]:
    """Register the inline spec (`spec`, loaded from it) under `name`; refuses a name held
    by a DAG that was not registered inline through this tool (`inline`: the names that
    were). Returns the steps of the inline spec it replaced (empty: none), for the caller to
    let go of a slice at a time: this may have been the last reference to them."""
    held = ops.app.dags.get(inp.name)
    if held is not None and (held.file != INLINE or inp.name not in inline):
        raise DaguError(
            CONFLICT,
            f"DAG {inp.name!r} is a stored DAG; an inline spec may not replace it",
            field="name",
        )
    if inp.name in ops.app.workflows and held is None:
        raise DaguError(CONFLICT, f"{inp.name!r} names a workflow that is not a DAG", field="name")
    assert inp.spec is not None  # noqa: S101 — targetType inline_spec requires it
    try:
        ops.app.inline_dag(inp.spec, default_name=inp.name, spec=spec)
        inline.add(inp.name)
        return list(every_step(held.spec)) if held is not None else []
    except InlineShellRefused as exc:
        raise DaguError(INVALID_TOOL_INPUT, str(exc), field="spec") from exc
    except DagSpecError as exc:
        raise DaguError(INVALID_TOOL_INPUT, str(exc), field="spec") from exc
    except ValueError as exc:
        raise DaguError(CONFLICT, str(exc), field="name") from exc


async def load_inline(inp: ExecuteInput, limits: SpecLimits) -> DagSpec:
    """The inline spec, loaded within `limits` by the document worker, named `name`. A text
    over the byte limit is refused here, before it goes to the worker.

    Raises:
        DaguError: invalid_tool_input — the spec is invalid, over a limit (the message and
            `details` name the setting and its value), or names another DAG;
            internal_error — the worker ended while it read the spec.
    """
    assert inp.spec is not None  # noqa: S101
    try:
        check_size(inp.spec, limits)
        spec = await offload.run_in_pieces(
            every_step, load_string, inp.spec, default_name=inp.name, limits=limits
        )
    except LimitExceeded as exc:
        details = {"limit": exc.setting, "maximum": exc.maximum} if exc.setting else None
        raise DaguError(INVALID_TOOL_INPUT, str(exc), field="spec", details=details) from exc
    except DagSpecError as exc:
        raise DaguError(INVALID_TOOL_INPUT, str(exc), field="spec") from exc
    except offload.WorkerLost as exc:
        raise DaguError(INTERNAL_ERROR, _LOST, field="spec") from exc
    if spec.name != inp.name:
        raise DaguError(
            INVALID_TOOL_INPUT,
            f"the spec names its DAG {spec.name!r}, not {inp.name!r}",
            field="name",
        )
    return spec


async def start(
    ops: Operations,
    inp: ExecuteInput,
    by: str | None,
    inline: set[str],
    limits: SpecLimits | None = None,
) -> ExecutionRow:
    """start / enqueue. `start` refuses a singleton while a run is running; `enqueue` also
    while one is queued, and may pick the queue. `limits`: an inline spec's (default: the
    defaults of `SpecLimits`)."""
    if inp.target_type == "inline_spec":
        spec = await load_inline(inp, limits or SpecLimits())
        await offload.drop_in_pieces(_register_inline(ops, inp, inline, spec))
    elif inp.name not in ops.app.dags:
        raise DaguError(RESOURCE_NOT_FOUND, f"no DAG named {inp.name!r}", field="name")
    if inp.dag_run_id is not None and await resolve.find_run(ops, inp.name, inp.dag_run_id):
        raise _taken(inp)  # a run under this id, however it was started
    enqueue = inp.action == "enqueue"
    try:
        started = await ops.start(
            inp.name,
            {
                "params": dag_params(inp.params),
                "inline": inline_key(inp.spec) if inp.spec else None,
            },
            idempotency_key=run_id_key(inp.dag_run_id),
            business_id=inp.dag_run_id,
            by=by,
            queue=inp.queue if enqueue else None,
            singleton=("active" if enqueue else "running") if inp.singleton else None,
            profile=inp.profile,
            labels=list(inp.labels) or None,
        )
    except errors.IdempotencyMismatch as exc:
        raise _taken(inp) from exc
    except errors.TetherError as exc:
        field = next((f for cls, f in _START_FIELD.items() if isinstance(exc, cls)), None)
        if isinstance(exc, errors.InvalidInput):
            field = "labels" if "label" in exc.message else "params"
        raise translate(exc, field) from exc
    if started.deduped:
        raise _taken(inp)  # a concurrent start took the id first
    return started.execution


def run_id_key(dag_run_id: str | None) -> str | None:
    """The idempotency key a start with an explicit `dagRunId` inserts its run under: the
    database's unique index on (DAG, tenant, key) lets exactly one of concurrent starts with
    the same id in; the others find the holder and are refused (no check-then-insert)."""
    return None if dag_run_id is None else f"dagu_execute:dagRunId:{dag_run_id}"


def _taken(inp: ExecuteInput) -> DaguError:
    return DaguError(
        CONFLICT, f"DAG-run {inp.dag_run_id!r} of {inp.name!r} already exists", field="dagRunId"
    )


async def current(ops: Operations, inp: ExecuteInput) -> ExecutionRow:
    assert inp.dag_run_id is not None  # noqa: S101 — run actions require it
    if inp.name not in ops.app.dags:
        raise DaguError(RESOURCE_NOT_FOUND, f"no DAG named {inp.name!r}", field="name")
    row = await resolve.find_run(ops, inp.name, inp.dag_run_id)
    if row is None:
        raise DaguError(
            RESOURCE_NOT_FOUND, f"no DAG-run {inp.dag_run_id!r} of {inp.name!r}", field="dagRunId"
        )
    return row


async def retry(ops: Operations, inp: ExecuteInput, by: str | None) -> ExecutionRow:
    row = await current(ops, inp)
    read = await resolve.load(ops, row)
    if inp.step_name is not None and read.step(inp.step_name) is None:
        raise DaguError(RESOURCE_NOT_FOUND, f"run has no step {inp.step_name!r}", field="stepName")
    if row.live:  # Dagu: retrying an active run is a conflict (409)
        label = read.status.status_label
        raise DaguError(
            CONFLICT,
            f"DAG-run {inp.dag_run_id!r} is {label}; stop it before retrying it",
            details={"status": read.status.status, "statusLabel": label},
        )
    try:
        # Dagu's retry: the run again under its dagRunId, the steps its plan resets
        plan = DagSteps(inp.step_name, inp.include_downstream)
        return await ops.again(row.id, plan=plan, business_id="same", by=by)
    except errors.TetherError as exc:
        raise translate(exc, "stepName" if inp.step_name else None) from exc


async def stop(ops: Operations, inp: ExecuteInput, by: str | None) -> ExecutionRow:
    row = await current(ops, inp)
    if not row.live:
        read = await resolve.load(ops, row)
        raise DaguError(
            CONFLICT,
            f"DAG-run {inp.dag_run_id!r} is not running; it is {read.status.status_label}",
            details={"status": read.status.status, "statusLabel": read.status.status_label},
        )
    try:
        return await ops.terminate(row.id, reason="stopped through dagu_execute", by=by)
    except errors.TetherError as exc:
        raise translate(exc) from exc
