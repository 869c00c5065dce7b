"""The run detail Dagu's read tool returns, and the per-step logs, built from an
execution row and its recorded steps (pure).

Run fields: `name`, `dagRunId`, `uri`, `logsUri` (root runs), `status`, `statusLabel`,
`attemptId`, `startedAt` / `finishedAt` once recorded, `queuedAt`, `params`, `labels`, and
`parentRun` for a sub-DAG run. `steps[]` in execution order: `name`, `id`, `status`,
`statusLabel`, `logUri`, `retryCount`, `error` when failed, `subRuns`, the decision taken, and
for a waiting step its `approval{prompt?, input?, required?}` or `humanTask{prompt, form?}`
(the normalized form; `rewind_to` is not shown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether.runtime.dag.replay import fold
from tether.runtime.dag.status import RunDetail, StepDetail, dag_status
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.specs.dag import DagSpec, HumanTask, Step
from tether.tools.dagu.uris import logs_uri, run_uri, step_logs_uri
from tether.wire.timestamps import iso


@dataclass(frozen=True)
class RunRead:
    """One read of a DAG run: the row, the Dagu status view and the spec it runs."""

    row: ExecutionRow
    status: RunDetail
    spec: DagSpec | None

    @property
    def name(self) -> str:
        return self.status.name

    def step(self, name: str) -> Step | None:
        """The step named `name` (a human task also by its id)."""
        if self.spec is None:
            return None
        for step in self.spec.steps:
            if step.name == name or (isinstance(step.work, HumanTask) and step.id == name):
                return step
        return None

    def open_wait(self, step: Step) -> Mapping[str, Any] | None:
        """The step's open approval / human-task wait, if it waits."""
        key_name = step.id if isinstance(step.work, HumanTask) else step.name
        kind = "human_task" if isinstance(step.work, HumanTask) else "approval"
        for w in self.row.waits:
            if w.get("kind") == kind and w.get("name") in (key_name, step.name):
                return w
        return None

    def step_detail(self, step: Step) -> StepDetail | None:
        return next((s for s in self.status.steps if s.name == step.name), None)


def read_run(
    row: ExecutionRow,
    steps: Sequence[StepRecord],
    pending: Mapping[str, Mapping[str, Any]] | None = None,
) -> RunRead:
    """`pending`: answers the run holds unconsumed, by wait channel (`resolve.load`)."""
    state, _ = fold(steps)
    return RunRead(row, dag_status(row, steps, pending), state.dag if state is not None else None)


def run_detail(read: RunRead, *, parent: Mapping[str, str] | None = None) -> dict[str, Any]:
    st, row = read.status, read.row
    name, run_id = st.name, st.dag_run_id
    out: dict[str, Any] = {
        "name": name,
        "dagRunId": run_id,
        "uri": run_uri(name, run_id),
        "status": st.status,
        "statusLabel": st.status_label,
        "attemptId": st.attempt_id,
    }
    if parent is None:
        out["logsUri"] = logs_uri(name, run_id)
    else:
        out["parentRun"] = dict(parent)
    out["queuedAt"] = iso(row.created_at)
    if row.admitted_at is not None or row.queue is None:
        out["startedAt"] = iso(row.admitted_at or row.created_at)
    if st.finished_at is not None:
        out["finishedAt"] = iso(st.finished_at)
    if st.params is not None:
        out["params"] = st.params
    if row.labels:
        out["labels"] = [f"{k}={v}" if v else k for k, v in row.labels.items()]
    out["steps"] = [_step(read, s) for s in st.steps]
    return out


def _step(read: RunRead, s: StepDetail) -> dict[str, Any]:
    name, run_id = read.status.name, read.status.dag_run_id
    out: dict[str, Any] = {
        "name": s.name,
        "status": s.status,
        "statusLabel": s.status_label,
        "logUri": step_logs_uri(name, run_id, s.name),
        "retryCount": s.retry_count,
    }
    if s.id is not None:
        out["id"] = s.id
    if s.error is not None:
        out["error"] = s.error
    if s.sub_runs:
        out["subRuns"] = [
            {"dagRunId": c, "dagName": _call_target(read, s.name), "uri": ""} for c in s.sub_runs
        ]
        for sub in out["subRuns"]:
            sub["uri"] = run_uri(sub["dagName"], sub["dagRunId"])
    if s.decision:
        out["decision"] = dict(s.decision)
    if s.push_back_iteration:
        out["pushBackIteration"] = s.push_back_iteration
        out["pushBackHistory"] = [dict(h) for h in s.push_back_history]
    if s.status_label == "waiting":
        out.update(_waiting(read, s.name))
    return out


def _call_target(read: RunRead, step_name: str) -> str:
    step = read.step(step_name)
    dag = getattr(step.work, "dag", None) if step is not None else None
    return str(dag) if dag else step_name


def _waiting(read: RunRead, step_name: str) -> dict[str, Any]:
    """A waiting step's prompt and normalized form, with only the declared fields."""
    step = read.step(step_name)
    if step is None:
        return {}
    wait = read.open_wait(step) or {}
    if isinstance(step.work, HumanTask):
        task: dict[str, Any] = {"prompt": wait.get("prompt") or step.work.prompt}
        if step.work.form is not None:
            task["form"] = wait.get("form")
        return {"humanTask": task}
    gate = step.approval
    approval: dict[str, Any] = {}
    if gate is not None and gate.prompt:
        approval["prompt"] = wait.get("prompt") or gate.prompt
    if gate is not None and gate.input:
        approval["input"] = list(gate.input)
    if gate is not None and gate.required:
        approval["required"] = list(gate.required)
    return {"approval": approval}


def run_logs(read: RunRead) -> dict[str, Any]:
    """Per-step output: stdout, stderr, exit code (the logs resource)."""
    st = read.status
    return {
        "name": st.name,
        "dagRunId": st.dag_run_id,
        "uri": logs_uri(st.name, st.dag_run_id),
        "steps": [step_log(read, s) for s in st.steps],
    }


def step_log(read: RunRead, s: StepDetail) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": s.name,
        "status": s.status,
        "statusLabel": s.status_label,
        "stdout": s.stdout,
        "stderr": s.stderr,
    }
    if s.exit_code is not None:
        out["exitCode"] = s.exit_code
    if s.truncated:
        out["truncated"] = True
    if s.error is not None:
        out["error"] = s.error
    return out
