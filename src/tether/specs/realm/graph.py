"""Step order: the topological order at load, and which steps are ready (pure).

`ready_steps(spec, progress)` reads the settled steps (completed / failed / skipped), applies
each waiting step's `trigger_rule` to its `depends_on`, then its `when`; a step whose rule can
no longer hold, or whose `when` is false, is skipped, and skipping cascades. Finalizers are
never ready here (they run after the run ends: `finalizers_for`). Gates and `preconditions` are
the runtime's: a ready step may still be blocked when it is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tether.specs.realm.conditions import ConditionContext, evaluate
from tether.specs.realm.errors import InvalidReference
from tether.specs.realm.model import Outcome, Step, TriggerRule, WorkflowSpec
from tether.specs.realm.nodes import At

SkipReason = Literal["trigger_rule_unsatisfiable", "when_false"]
Verdict = Literal["wait", "run", "skip"]


@dataclass(frozen=True)
class Progress:
    """Where a run stands: settled step ids, steps in flight (`active`), and what `when` reads.

    `active` steps (claimed, at a gate, waiting for an agent) are neither ready nor skipped.
    """

    completed: frozenset[str] = frozenset()
    failed: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    active: frozenset[str] = frozenset()
    context: ConditionContext = field(default_factory=ConditionContext)

    @property
    def settled(self) -> frozenset[str]:
        return self.completed | self.failed | self.skipped


@dataclass(frozen=True)
class Skip:
    """A step to record as skipped, with its reason: `trigger_rule_unsatisfiable` (the way its
    dependencies ended rules the step out) or `when_false` (`detail` is the condition)."""

    step: str
    reason: SkipReason
    detail: str


@dataclass(frozen=True)
class Readiness:
    """`ready`: steps that can run now (topological order); `skipped`: steps to skip now
    (including those a skip makes unreachable), in the order they were decided."""

    ready: tuple[str, ...] = ()
    skipped: tuple[Skip, ...] = ()


def topological(steps: Mapping[str, Step], file: str) -> tuple[str, ...]:
    """The non-finalizer steps in dependency order, ties in file order.

    Raises:
        InvalidReference: the steps form a cycle (names one step of it, with its line).
    """
    pending = {s.id: s for s in steps.values() if s.execution != "finalizer"}
    for step in pending.values():
        for dep in step.depends_on:
            if steps[dep].execution == "finalizer":
                where = At(file, step.line, f"steps.{step.id}.depends_on", "depends_on")
                where.fail(f"{dep!r} is a finalizer: no step can depend on it", InvalidReference)
    order: list[str] = []
    done: set[str] = set()
    while pending:
        free = [s for s in pending.values() if all(d in done for d in s.depends_on)]
        if not free:
            stuck = next(iter(pending.values()))
            where = At(file, stuck.line, f"steps.{stuck.id}.depends_on", "depends_on")
            where.fail(
                "the steps form a dependency cycle: " + ", ".join(sorted(pending)),
                InvalidReference,
            )
        for step in free:
            order.append(step.id)
            done.add(step.id)
            del pending[step.id]
    return tuple(order)


def upstream_verdict(rule: TriggerRule, deps: tuple[str, ...], progress: Progress) -> Verdict:
    """What `rule` says of `deps` now: `run`, `skip` (can never hold), or `wait`."""
    ok = sum(d in progress.completed for d in deps)
    bad = sum(d in progress.failed for d in deps)
    settled = sum(d in progress.settled for d in deps)
    total, all_settled = len(deps), settled == len(deps)
    if rule == "all_success":
        return "run" if ok == total else ("skip" if settled > ok else "wait")
    if rule == "all_failed":
        return "run" if bad == total else ("skip" if settled > bad else "wait")
    if rule == "all_done":
        return "run" if all_settled else "wait"
    if rule == "one_failed":
        return "run" if bad or not total else ("skip" if all_settled else "wait")
    if rule == "one_success":
        return "run" if ok or not total else ("skip" if all_settled else "wait")
    # none_failed: every dependency settled, none failed (skipped ones count as fine)
    return "skip" if bad else ("run" if all_settled else "wait")


def ready_steps(spec: WorkflowSpec, progress: Progress) -> Readiness:
    """The steps that can run now and the steps to skip now (pure; never raises)."""
    skipped = set(progress.skipped)
    skips: list[Skip] = []
    changed = True
    while changed:
        changed = False
        state = Progress(progress.completed, progress.failed, frozenset(skipped),
                         progress.active, progress.context)  # fmt: skip
        ready: list[str] = []
        for step_id in spec.order:
            if step_id in state.settled or step_id in state.active:
                continue
            step = spec.steps[step_id]
            verdict = upstream_verdict(step.trigger_rule, step.depends_on, state)
            if verdict == "wait":
                continue
            skip = _skip(step, verdict, state)
            if skip is None:
                ready.append(step_id)
                continue
            skips.append(skip)
            skipped.add(step_id)
            changed = True
            break
    return Readiness(tuple(ready), tuple(skips))


def _skip(step: Step, verdict: Verdict, progress: Progress) -> Skip | None:
    if verdict == "skip":
        return Skip(step.id, "trigger_rule_unsatisfiable", _why(step, progress))
    for condition in step.when:
        if not evaluate(condition, progress.context):
            return Skip(step.id, "when_false", condition.text)
    return None


def _why(step: Step, progress: Progress) -> str:
    """The rule and the first dependency that decided it: `one_failed, dep upload completed`."""
    for dep in step.depends_on:
        for state, ids in (("failed", progress.failed), ("skipped", progress.skipped),
                           ("completed", progress.completed)):  # fmt: skip
            if dep in ids:
                return f"{step.trigger_rule}, dep {dep} {state}"
    return step.trigger_rule


def finalizers_for(spec: WorkflowSpec, outcome: Outcome) -> tuple[Step, ...]:
    """The finalizers that run after a run ends with `outcome` (never after an abandon).

    `outcome` is the ending: `complete`, `fail`, `abort` or `completed_with_failed_steps`.
    """
    steps = (spec.steps[f] for f in spec.finalizers)
    return tuple(s for s in steps if outcome in s.on_outcome or "always" in s.on_outcome)
