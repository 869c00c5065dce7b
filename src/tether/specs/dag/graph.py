"""Step references and order: resolve `depends` (name or id), imply chain order, refuse unknown
references, duplicates and cycles, check `rewind_to`, and answer up/downstream questions.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence

from tether.specs.dag.errors import InvalidReference
from tether.specs.dag.model import Approval, DagSpec, DagType, HumanTask, PushBack, Step
from tether.specs.dag.nodes import At
from tether.specs.dag.steps import Draft


def resolve(drafts: Sequence[Draft], dag_type: DagType) -> tuple[tuple[Step, ...], tuple[str, ...]]:
    """Steps with resolved `depends` and `rewind_to`, and a topological order of their names.

    In a `chain`, a step without `depends` depends on the steps of the group before its own
    (each step is its own group unless `steps` nests a list); an explicit `depends` overrides
    that (older Dagu's behaviour; newer Dagu refuses it).

    Raises:
        InvalidReference: a duplicate name/id, an unknown reference, a cycle, or a `rewind_to`
            that is neither the step itself nor upstream of it (strictly upstream for a task).
    """
    keys = _keys(drafts)
    groups: dict[int, list[str]] = {}  # chain group → its steps' names, in file order
    for draft in drafts:
        groups.setdefault(draft.group, []).append(draft.step.name)
    steps = []
    for draft in drafts:
        depends = tuple(
            keys.get(d) or _unknown(d, a)
            for d, a in zip(draft.step.depends, draft.depends_at, strict=True)
        )
        if dag_type == "chain" and not draft.explicit_depends and draft.group > 0:
            depends = tuple(groups.get(draft.group - 1, ()))
        steps.append(dataclasses.replace(draft.step, depends=tuple(dict.fromkeys(depends))))
    order = _topological(steps, drafts)
    by_name = {s.name: s for s in steps}
    for i, (step, draft) in enumerate(zip(steps, drafts, strict=True)):
        if draft.rewind_at is not None:
            steps[i] = _with_rewind(step, draft.rewind_at, keys, by_name)
    return tuple(steps), order


def _keys(drafts: Sequence[Draft]) -> dict[str, str]:
    """Each name and id → the step's name; a name or id used twice is refused."""
    keys: dict[str, str] = {}
    for draft in drafts:
        step = draft.step
        for key in dict.fromkeys(k for k in (step.name, step.id) if k is not None):
            if key in keys:
                draft.at.fail(f"step name or id {key!r} is used twice", InvalidReference)
            keys[key] = step.name
    return keys


def _unknown(name: str, at: At) -> str:
    return at.fail(f"unknown step {name!r}", InvalidReference)


def _topological(steps: Sequence[Step], drafts: Sequence[Draft]) -> tuple[str, ...]:
    """Kahn's algorithm in waves: every step whose dependencies are all placed, in file
    order, then the steps that this wave freed; a leftover means a cycle. Linear in steps
    plus edges (each edge is followed once)."""
    position = {s.name: i for i, s in enumerate(steps)}
    pending = {s.name: set(s.depends) for s in steps}
    dependents: dict[str, list[str]] = {}
    for step in steps:
        for dep in pending[step.name]:
            dependents.setdefault(dep, []).append(step.name)
    order: list[str] = []
    ready = [s.name for s in steps if not pending[s.name]]
    while ready:
        freed: list[str] = []
        for name in ready:
            del pending[name]
            for later in dependents.get(name, ()):
                deps = pending[later]
                deps.discard(name)
                if not deps:
                    freed.append(later)
        order.extend(ready)
        ready = sorted(freed, key=position.__getitem__)
    if pending:
        stuck = next(d for d in drafts if d.step.name in pending)
        cycle = " → ".join(_cycle(pending, stuck.step.name))
        stuck.at.fail(f"the steps form a cycle: {cycle}", InvalidReference)
    return tuple(order)


def _cycle(pending: dict[str, set[str]], start: str) -> list[str]:
    """A cycle among `pending` steps (each still waits on another pending step)."""
    path, seen = [start], {start: 0}
    while True:
        nxt = min(pending[path[-1]])
        if nxt in seen:
            return [*path[seen[nxt] :], nxt]
        seen[nxt] = len(path)
        path.append(nxt)


def _with_rewind(step: Step, at: At, keys: dict[str, str], by_name: dict[str, Step]) -> Step:
    work = step.work
    if isinstance(work, HumanTask) and work.push_back is not None:
        target = keys.get(work.push_back.rewind_to) or _unknown(work.push_back.rewind_to, at)
        if target not in upstream_of(by_name, step.name):
            at.fail("a human task's rewind_to must be a step upstream of it", InvalidReference)
        push = PushBack(target, work.push_back.form)
        return dataclasses.replace(step, work=dataclasses.replace(work, push_back=push))
    gate = step.approval or Approval()  # a rewind place comes only from a task or a gate
    target = keys.get(gate.rewind_to or "") or _unknown(gate.rewind_to or "", at)
    if target != step.name and target not in upstream_of(by_name, step.name):
        at.fail("rewind_to must be the step itself or one it depends on", InvalidReference)
    gate = dataclasses.replace(gate, rewind_to=target)
    return dataclasses.replace(step, approval=gate)


def upstream_of(steps: dict[str, Step] | DagSpec, name: str) -> frozenset[str]:
    """Every step `name` depends on, directly or transitively."""
    by_name = steps if isinstance(steps, dict) else {s.name: s for s in steps.steps}
    out: set[str] = set()
    stack = list(by_name[name].depends)
    while stack:
        dep = stack.pop()
        if dep not in out:
            out.add(dep)
            stack.extend(by_name[dep].depends)
    return frozenset(out)


def downstream_of(dag: DagSpec, name: str) -> frozenset[str]:
    """Every step that depends on `name`, directly or transitively (what a rewind resets)."""
    return frozenset(s.name for s in dag.steps if name in upstream_of(dag, s.name))


def output_order(dag: DagSpec | dict[str, Step], name: str) -> tuple[str, ...]:
    """Predecessors of `name` in breadth-first upstream order (Dagu's order): apply their
    published outputs in this order, a later one winning over an earlier one. `dag` may be
    the steps by name."""
    by_name = dag if isinstance(dag, dict) else {s.name: s for s in dag.steps}
    order: dict[str, None] = {}  # insertion-ordered, with set-speed membership
    queue = deque(by_name[name].depends)
    while queue:
        dep = queue.popleft()
        if dep not in order:
            order[dep] = None
            queue.extend(by_name[dep].depends)
    return tuple(order)
