"""Replaying a DAG run's recorded results through its state machine (pure): the recorded spec,
how a call step's records read, and `fold`, which `dag_status` and retries use."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tether.runtime.dag.state import DagState
from tether.runtime.remote.call import RECORD_KIND as REMOTE
from tether.runtime.remote.dag import work_result as remote_result
from tether.specs.dag import Call, DagSpec, Param, Step, load_string
from tether.storage.rows import StepRecord

_SNAPSHOTS: OrderedDict[tuple[str, str, str], DagSpec] = OrderedDict()
_SNAPSHOTS_KEPT = 256

#: The record naming the asks a decision kept open when a push-back let the run go on (`asks`).
OPEN_ASKS: Final = "dag:asks"


def parse_snapshot(name: str, file: str, text: str) -> DagSpec:
    """The recorded spec of a run (cached: every replay and status read parses it)."""
    key = (name, file, text)
    spec = _SNAPSHOTS.get(key)
    if spec is None:
        spec = load_string(text, file=file, default_name=name)
        _keep(key, spec)
    else:
        _SNAPSHOTS.move_to_end(key)
    return spec


def remember_snapshot(spec: DagSpec, text: str) -> None:
    """Cache `spec`, loaded from `text` under its own name and file, as its runs' recorded
    spec: an inline spec is parsed once, off the event loop, not again by its first run."""
    _keep((spec.name, spec.file, text), spec)


def _keep(key: tuple[str, str, str], spec: DagSpec) -> None:
    _SNAPSHOTS[key] = spec
    _SNAPSHOTS.move_to_end(key)
    while len(_SNAPSHOTS) > _SNAPSHOTS_KEPT:
        _SNAPSHOTS.popitem(last=False)


def apply_call(state: DagState, name: str, result: dict[str, Any]) -> None:
    if "error" in result:
        state.record_work(name, {"status": "failed", "error": result["error"]})
    else:
        state.record_child(name, result["child"])


def child_result(payload: Mapping[str, Any], step: Step, child_id: str | None) -> dict[str, Any]:
    """A call step's result from its child's ending. `output:` gets what Dagu's sub-DAG step
    prints: `{name, dagRunId, params, outputs, status}` as JSON, so `${VAR.outputs.KEY}` reads
    one of the child's outputs."""
    output = payload.get("output")
    if payload.get("status") == "completed" and isinstance(output, dict):
        result: dict[str, Any] = {"status": "succeeded", "child_status": output.get("status")}
        if step.output and isinstance(step.work, Call):
            printed = {
                "name": step.work.dag,
                "dagRunId": child_id,
                "params": " ".join(param_text(p) for p in step.work.params) or None,
                "outputs": output.get("outputs") or {},
                "status": output.get("status"),
            }
            result["outputs"] = {step.output: json.dumps({k: v for k, v in printed.items() if v})}
        return result
    error = payload.get("error") or {}
    message = error.get("message") if isinstance(error, dict) else None
    return {"status": "failed", "error": f"sub-DAG run {payload.get('status')}: {message}"}


def param_text(param: Param) -> str:
    """A call's parameter as the child's params item (`NAME=value`, or the bare value)."""
    return f"{param.name}={param.default}" if param.name else param.default


def fold(
    records: Sequence[StepRecord], pending: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[DagState | None, set[str]]:
    """The state after the recorded results, and the steps with an open wait. `pending`:
    answers delivered to open waits that the run has not consumed yet (by channel,
    `{payload, by}`), applied as the run will apply them: Dagu shows a decided step decided
    at once, while the run still waits on its other steps.

    An answer to a gate or task is applied where the run decided its asks (`asks`): at the
    next recorded attempt (`uuid`), but for the asks that decision kept open (`dag:asks`), or
    at the end, where the run's next decision will apply what it holds."""
    ordered = sorted(records, key=lambda r: r.seq)
    spec_rec = next((r for r in ordered if r.name == "dag:spec" and r.done), None)
    if spec_rec is None:
        return None, set()
    snap = spec_rec.result["value"]
    state = DagState(parse_snapshot(snap["name"], snap["file"], snap["text"]))
    state.inherit(snap.get("inherit") or {})
    children: dict[str, str] = {}
    open_waits: set[str] = set()
    answered: list[tuple[str, Mapping[str, Any]]] = []  # (step, answer) not applied yet
    kept: set[str] = set()  # the asks the next decision keeps open (its `dag:asks`)
    for i, rec in enumerate(ordered):
        kind, _, subject = rec.name.partition(":")
        if _is_ask(rec) and (i == 0 or not _is_ask(ordered[i - 1])):
            state.asking(_asked(state.dag, ordered[i:]))  # the wave's asks, then its answers
        if rec.kind == "uuid" and rec.done:
            answered = _decided(state, answered, kept)
            kept = set()
            state.attempts.append(rec.result.replace("-", "")[:6])
        elif rec.kind == "step" and rec.name == OPEN_ASKS and rec.done and "value" in rec.result:
            kept = set(rec.result["value"])
        elif rec.kind == "wait" and not rec.done and pending and rec.name in pending:
            _answer(state, kind, subject, pending[rec.name], children, answered)
        elif rec.kind == "wait" and not rec.done:
            open_waits.add(_step_name(state.dag, kind, subject, children))
        elif rec.kind == "step" and kind == "node" and rec.done:
            state.record_work(subject, _work_value(rec.result))
        elif rec.kind == REMOTE and kind == "node" and rec.done:
            step = state.by_name[subject]
            state.record_work(
                subject, remote_result(step, rec.result, state.nodes[subject].retries)
            )
        elif rec.kind == "transaction" and kind == "call" and rec.done:
            apply_call(state, subject, rec.result["value"])
            if "child" in rec.result["value"]:
                children[rec.result["value"]["child"]] = subject
        elif rec.kind == "wait" and rec.done:
            answer = rec.result["answers"][rec.name]
            _answer(state, kind, subject, answer, children, answered)
    _decided(state, answered, set())
    # an ask left open by a push-back that reset its step is no longer waited on
    waiting = {n for n, node in state.nodes.items() if node.status in ("waiting", "running")}
    return state, {n for n in open_waits if n in waiting or n not in state.nodes}


def _decided(
    state: DagState, answered: list[tuple[str, Mapping[str, Any]]], kept: set[str]
) -> list[tuple[str, Mapping[str, Any]]]:
    """Apply the answers a decision applied (all but `kept`'s, in the DAG's order, each to a
    step still waiting); returns the ones it kept for a later decision."""
    order = {name: i for i, name in enumerate(state.dag.order)}
    now = sorted((a for a in answered if a[0] not in kept), key=lambda a: order[a[0]])
    for name, answer in now:
        if state.nodes[name].status == "waiting":  # else reset by a push-back: never applied
            state.record_answer(name, answer["payload"], answer.get("by"))
    return [a for a in answered if a[0] in kept]


def _is_ask(rec: StepRecord) -> bool:
    return rec.kind == "wait" and rec.name.partition(":")[0] in ("approval", "human_task")


def _asked(dag: DagSpec, records: Sequence[StepRecord]) -> list[str]:
    """The steps asked by the consecutive ask records at the start of `records` (one wave's:
    its asks are recorded together, before any of their answers is applied)."""
    names = []
    for rec in records:
        if not _is_ask(rec):
            break
        kind, _, subject = rec.name.partition(":")
        names.append(_step_name(dag, kind, subject, {}))
    return names


def _work_value(result: Mapping[str, Any]) -> dict[str, Any]:
    """A node's recorded work result; a step that raised (its error recorded, no value) reads
    as a failed step, so a reader still sees the run."""
    if "value" in result:
        return dict(result["value"])
    error = result.get("error")
    if isinstance(error, dict):
        return {"status": "failed", "error": f"{error.get('type')}: {error.get('message')}"}
    return {"status": "failed", "error": str(error)}


def _step_name(dag: DagSpec, kind: str, subject: str, children: Mapping[str, str]) -> str:
    if kind == "child":
        return children.get(subject, subject)
    return dag.step(subject).name if kind == "human_task" else subject


def _answer(
    state: DagState,
    kind: str,
    subject: str,
    answer: Mapping[str, Any],
    children: Mapping[str, str],
    answered: list[tuple[str, Mapping[str, Any]]],
) -> None:
    """A wait's answer: a sub-DAG run's end applies at once (its wave waited for it); a gate's
    or task's waits for the decision that applies it (`fold`)."""
    if kind == "child":
        name = children[subject]
        step = state.by_name[name]
        state.record_work(name, child_result(answer["payload"], step, subject))
    else:
        answered.append((_step_name(state.dag, kind, subject, children), answer))
