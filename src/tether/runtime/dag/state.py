"""The DAG run's state machine (pure): node statuses and published values, advanced by the
durable results of a run in the order they were recorded.

The interpreter and the read model (`status.dag_status`) feed it the same results in the same
order, so what a reader sees is exactly what the interpreter decided. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from tether.runtime.answer_rules import answer_fields
from tether.specs import patterns
from tether.specs.dag import DagSpec, HumanTask, Step, downstream_of, output_order

NodeStatus = Literal[
    "not_started",
    "running",
    "failed",
    "aborted",
    "succeeded",
    "skipped",
    "partially_succeeded",
    "waiting",
    "rejected",
    "retrying",
]
#: A dependency in one of these lets its dependents run (continueOn decides the rest).
_DONE: Final = frozenset({"succeeded", "failed", "skipped", "partially_succeeded"})
#: A dependency that ended this way (without continueOn) aborts its dependents (Dagu).
_UPSTREAM: Final = {
    "failed": "upstream failed",
    "aborted": "upstream aborted",
    "rejected": "upstream rejected",
}
_BLOCKING: Final = frozenset(_UPSTREAM)
#: A run's ends that cut its steps off: stopped (terminated, cancelled) or timed out.
STOPPED: Final = frozenset({"terminated", "cancelled", "timed_out"})


@dataclass
class Node:
    """What the run knows about one step."""

    status: NodeStatus = "not_started"
    result: dict[str, Any] | None = None  # the last work result (exit code, output, error …)
    outputs: dict[str, str] = field(default_factory=dict)  # published variables
    fields: dict[str, str] = field(default_factory=dict)  # a human task's published outputs
    retries: int = 0
    iteration: int = 0  # push-back iteration
    feedback: dict[str, str] = field(default_factory=dict)  # the last push-back's inputs
    history: list[dict[str, Any]] = field(default_factory=list)  # push-back history
    decision: dict[str, Any] = field(default_factory=dict)  # approval/task answer shown to readers
    child_id: str | None = None
    continued: bool = False  # failed or skipped, but continueOn lets dependents run


_NODE_FIELDS: Final = frozenset(f.name for f in fields(Node))


class DagState:
    """Statuses of every step of `dag`; see the module docstring."""

    def __init__(self, dag: DagSpec) -> None:
        self.dag = dag
        self.by_name: dict[str, Step] = {s.name: s for s in dag.steps}
        self.nodes: dict[str, Node] = {s.name: Node() for s in dag.steps}
        self.attempts: list[str] = []
        self._deps = [(s, tuple(self.by_name[s].depends)) for s in dag.order]
        self._tasks = [s for s in dag.steps if isinstance(s.work, HumanTask)]
        self._output_order: dict[str, tuple[str, ...]] = {}

    def inherit(self, kept: Mapping[str, Mapping[str, Any]]) -> None:
        """Start from the kept steps of the run this one retries (see `retrying`)."""
        for name, data in kept.items():
            if name in self.nodes:
                self.nodes[name] = Node(**{k: v for k, v in data.items() if k in _NODE_FIELDS})

    # --- readiness ---------------------------------------------------------------------------

    def ready(self) -> list[str]:
        """Steps that may run now, in the DAG's order: not started (or retrying) and every
        dependency done in a way that lets it go on. On the way it settles what can never
        run, as Dagu's scheduler does (`isReady`): a not-started step with a dependency
        skipped without `continueOn.skipped` is skipped; one with a dependency failed
        without continueOn, aborted or rejected is aborted ("upstream failed"). One pass in
        the DAG's order, dependencies first."""
        out = []
        nodes = self.nodes
        for name, deps in self._deps:
            node = nodes[name]
            if node.status != "not_started" and node.status != "retrying":
                continue
            go = True
            for dep_name in deps:
                dep = nodes[dep_name]
                if node.status == "not_started" and not dep.continued:
                    if dep.status == "skipped":
                        node.status = "skipped"
                        go = False
                        break
                    if dep.status in _BLOCKING:
                        node.status = "aborted"
                        node.result = {"error": _UPSTREAM[dep.status]}
                        go = False
                        break
                go = go and _lets_go_on(dep)
            if go:
                out.append(name)
        return out

    def settle_end(self, *, stopped: bool) -> None:
        """The run has ended: settle what its records do not say. Steps a failure or a skip
        blocked are settled as `ready` settles them (the run did so itself); when it was
        `stopped` (or timed out), a step still due reads `aborted`: it ran, or was about to,
        when the run was stopped (Dagu's cancel leaves a running step aborted)."""
        for name in self.ready():
            if stopped and self.nodes[name].status == "not_started":
                self.nodes[name].status = "aborted"

    def ready_after(self, name: str) -> list[str]:
        """The steps `ready()` would give once step `name` has succeeded publishing nothing,
        were nothing else to change (a prediction: nothing is settled)."""
        nodes = {**self.nodes, name: Node(status="succeeded")}
        return [
            n
            for n, deps in self._deps
            if nodes[n].status in ("not_started", "retrying")
            and all(_lets_go_on(nodes[d]) for d in deps)
        ]

    # --- transitions ---------------------------------------------------------------------------

    def record_work(self, name: str, result: dict[str, Any]) -> None:
        """A step's work ended: `result["status"]` is succeeded, failed or skipped."""
        step, node = self.by_name[name], self.nodes[name]
        node.result = result
        status = result["status"]
        if status == "failed" and result.get("retry", False):
            node.retries += 1
            node.status = "retrying"
            return
        node.continued = False
        if status == "failed" and _continues_on_failure(step, result):
            node.continued = True
            status = "succeeded" if step.continue_on.mark_success else "failed"
        if status == "skipped":
            node.continued = step.continue_on.skipped
        node.status = status
        if status in ("succeeded", "failed"):  # Dagu sets a failed command's output too
            node.outputs = dict(result.get("outputs") or {})
        if status == "succeeded" and step.approval is not None:
            node.status = "waiting"

    def asking(self, names: list[str]) -> None:
        """The steps' approvals or human tasks are asked now: each waits until it is decided
        (or reset by a push-back); a waiting step is never ready."""
        for name in names:
            self.nodes[name].status = "waiting"

    def record_child(self, name: str, child_id: str) -> None:
        self.nodes[name].child_id = child_id
        self.nodes[name].status = "running"

    def record_answer(self, name: str, payload: dict[str, Any], by: str | None) -> None:
        """A person decided a waiting approval or human task."""
        step, node = self.by_name[name], self.nodes[name]
        decision = payload.get("decision", "complete")
        values = answer_fields(dict(payload))  # every input, `reason` and `decision` too
        if decision == "push_back":
            self._push_back(step, node, values, by)
            return
        node.decision = {"decision": decision, "by": by}
        if decision == "reject":
            node.status = "rejected"
            node.decision["reason"] = payload.get("reason")
            return
        node.status = "succeeded"
        node.continued = False
        if isinstance(step.work, HumanTask):
            form = step.work.form
            props = form.properties if form is not None else ()
            values = {**{p.name: p.default for p in props if p.default is not None}, **values}
            node.fields = {k: _text(v) for k, v in values.items()}
            node.decision["outputs"] = values
        else:
            node.outputs = {**node.outputs, **{k: str(v) for k, v in values.items()}}
            node.decision["inputs"] = values

    def _push_back(self, step: Step, node: Node, values: dict[str, Any], by: str | None) -> None:
        if isinstance(step.work, HumanTask):
            target = step.work.push_back.rewind_to if step.work.push_back else step.name
        else:
            gate = step.approval
            declared = set(gate.input) if gate is not None else set()
            if declared:
                values = {k: v for k, v in values.items() if k in declared}
            target = (gate.rewind_to if gate is not None else None) or step.name
        feedback = {k: _text(v) for k, v in values.items()}
        iteration = node.iteration + 1
        entry = {"iteration": iteration, "by": by, "inputs": feedback}
        for name in {target, *downstream_of(self.dag, target)}:
            old = self.nodes[name]
            self.nodes[name] = Node(
                iteration=iteration, feedback=feedback, history=[*old.history, entry]
            )

    # --- what a step sees ------------------------------------------------------------------------

    def upstream_outputs(self, name: str) -> list[dict[str, str]]:
        """Published variables of the step's predecessors, lowest precedence first."""
        order = self._output_order.get(name)
        if order is None:
            order = self._output_order[name] = output_order(self.by_name, name)
        return [self.nodes[dep].outputs for dep in reversed(order)]

    def task_outputs(self) -> dict[str, dict[str, str]]:
        """`${steps.<id>.outputs.<field>}` values: human tasks' fields by step id and name."""
        out: dict[str, dict[str, str]] = {}
        for step in self._tasks:  # only a human task publishes fields
            fields_ = self.nodes[step.name].fields
            if fields_:
                out[step.name] = fields_
                if step.id is not None:
                    out[step.id] = fields_
        return out

    def run_values(self, name: str, run_id: str) -> dict[str, str]:
        """DAG_* values for one step (push-back feedback included when it was pushed back)."""
        node = self.nodes[name]
        values = {"DAG_NAME": self.dag.name, "DAG_RUN_ID": run_id, "DAG_RUN_STEP_NAME": name}
        if node.iteration:
            values.update(node.feedback)
            values["DAG_PUSHBACK_ITERATION"] = str(node.iteration)
            values["DAG_PUSHBACK"] = json.dumps(
                {"iteration": node.iteration, "inputs": node.feedback, "history": node.history}
            )
        return values

    # --- the run's outcome --------------------------------------------------------------------

    def rejected(self) -> bool:
        """A gate was rejected: the run ends now (Dagu: no resume after a rejection)."""
        return any(n.status == "rejected" for n in self.nodes.values())

    def outcome(self) -> Literal["succeeded", "partially_succeeded", "failed", "rejected"]:
        """How the run ended once nothing more is ready (handlers not counted)."""
        statuses = [n.status for n in self.nodes.values()]
        if "rejected" in statuses:
            return "rejected"
        if any(n.status == "failed" and not n.continued for n in self.nodes.values()):
            return "failed"
        if "not_started" in statuses or "retrying" in statuses:
            return "failed"  # blocked behind a failure
        if any(n.status == "failed" for n in self.nodes.values()):
            return "partially_succeeded"
        return "succeeded"


def _lets_go_on(dep: Node) -> bool:
    if dep.status in ("succeeded", "partially_succeeded"):
        return True
    return dep.status in _DONE and dep.continued


def _continues_on_failure(step: Step, result: dict[str, Any]) -> bool:
    rule = step.continue_on
    if rule.failure:
        return True
    code = result.get("exit_code")
    if code is not None and code in rule.exit_codes:
        return True
    text = f"{result.get('stdout', '')}\n{result.get('stderr', '')}"
    for pattern in rule.output:
        if pattern.startswith("re:"):
            if patterns.search(pattern[3:], text, multiline=True):  # Dagu: line by line
                return True
        elif pattern in text:
            return True
    return False


def _text(value: Any) -> str:
    """A published value as a string (non-strings as JSON text)."""
    return value if isinstance(value, str) else json.dumps(value)
