"""The generic DAG workflow: one execution walks a `DagSpec`, each step a durable call.

It runs in waves: every step that is ready (its dependencies done) starts together, and the
next wave is computed when the whole wave has finished. Inside a wave, durable calls are made
in phases (work; then sub-DAG ends; then approvals and human tasks), each phase's calls in the
DAG's order, so replay assigns every call the same position whatever finished first. A gate
or task opened by a wave waits on its own while the steps that do not depend on it run; the
run parks on its open gates and tasks once nothing else can run, and a push-back goes on at
once while the other asks keep waiting (`asks`).

The spec is recorded by the run's first step (`dag:spec`), so a run interprets the spec it
started with even when the file is changed or reloaded while it runs. That record is written
with the run's first write (the first step's result, or its first park), not by a commit of its
own: a run that dies before that write has recorded nothing, and takes the spec anew. Likewise
the result of a run's last step, when nothing can run after it, is written with the run's settle
(`_Run._ends_run`). Every other step's result commits before any later step does anything:
the write of a lone step's result is left in flight (`Context.step(behind=True)`) while the
next step is prepared and its shell started, and that shell waits for the commit before it runs
the command (`shell.run_command`'s gate). Those commits do not wait for the disk flush
(`work.step_flush`): a worker's crash keeps every finished step; only a crash of PostgreSQL
itself may run the last ones again (steps are at-least-once).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, cast

from pydantic import BaseModel, ConfigDict

from tether.runtime.context import Context
from tether.runtime.dag import asks, gates
from tether.runtime.dag.ahead import Ahead, Launch
from tether.runtime.dag.dynamic import dag_workdir, prepare_values
from tether.runtime.dag.environment import INLINE_ORIGIN, RunEnvironment
from tether.runtime.dag.replay import (
    apply_call,
    child_result,
    fold,
    param_text,
    parse_snapshot,
)
from tether.runtime.dag.shell import Gate, one_word
from tether.runtime.dag.state import STOPPED, DagState
from tether.runtime.dag.work import (
    StepInput,
    expand_value,
    launch_of,
    run_work,
    step_flush,
    unmet_precondition,
)
from tether.runtime.errors import Rejected
from tether.runtime.functions import Functions
from tether.runtime.remote import dag as remote_steps
from tether.specs.dag import (
    Action,
    Call,
    DagSpec,
    HumanTask,
    RemoteCall,
    Shell,
    Step,
    retry_delay,
    step_scope,
    substitute,
)
from tether.specs.dag.model import HandlerEvent
from tether.storage import children, repo

#: Node statuses after which a step may still run (or be answered) in this run.
_OPEN = frozenset({"not_started", "retrying", "waiting", "running"})

_NO_STEP: Final = Step(name="", work=Shell(), line=0)  # the DAG's own checks: no step env


class DagFailed(Exception):
    """The DAG run failed: a step failed (without continueOn) or a handler failed."""


class RetryPlan(BaseModel):
    """Retry of run `of` (this run's predecessor): steps in `reset` run again, the rest keep
    what they ended with."""

    model_config = ConfigDict(extra="forbid")

    of: str
    reset: list[str]


class DagInput(BaseModel):
    """A DAG run's input: parameter overrides as a Dagu params string (`"A B NAME=v"`), a list
    of such items, or a `{NAME: value}` map."""

    model_config = ConfigDict(extra="forbid")

    params: str | list[str] | dict[str, str] | None = None
    retry: RetryPlan | None = None  # set by a `DagSteps` plan only (checked against the row)
    # An inline spec's content key (`catalog.inline_key`): the run records exactly the spec
    # it was started with, even if its name is given another spec before it runs.
    inline: str | None = None


@dataclass(frozen=True)
class DagHost:
    """What the interpreter needs from the app, handed in (it imports no registry)."""

    functions: Functions  # the App's user functions (`run: NAME` steps)
    # (DAG name, inline spec key or None) → {"name", "file", "text"}
    snapshot: Callable[[str, str | None], dict[str, str]]
    new_child: Callable[[str, Any, str], repo.NewExecution]  # (dag, input, parent) → row
    environment: Callable[[bool], RunEnvironment]  # (spec came inline) → what the run sees


async def run_dag(ctx: Context, host: DagHost, name: str, inp: DagInput) -> dict[str, Any]:
    """Walk the DAG `name`; the output is `{status, outputs}`; a failure raises DagFailed, a
    rejection Rejected (the run ends `failed`; `dag_status` shows them as Dagu does)."""
    if inp.retry is None:
        snap = await ctx.step(_spec, host, name, inp.inline, name="dag:spec", lazy=True)
    else:
        plan = inp.retry.model_dump()
        snap = await ctx.transaction(inherited, ctx.execution_id, plan, name="dag:spec")
    dag = parse_snapshot(snap["name"], snap["file"], snap["text"])
    environment = host.environment(snap.get("origin") == INLINE_ORIGIN)
    try:
        positional, named, env_values = await prepare_values(ctx, dag, inp.params, environment)
    except ValueError as exc:
        raise DagFailed(str(exc)) from exc
    run = _Run(ctx, host, dag, DagState(dag), positional, named, environment, env_values)
    run.state.inherit(snap.get("inherit") or {})
    run.state.attempts.append((await ctx.uuid()).hex[:6])
    if dag.preconditions and (unmet := await run.unmet()) is not None:
        await run.handlers("abort")  # no `abort` handler here: `exit` runs (Dagu's onExit)
        return {"status": "aborted", "outputs": {}, "reason": f"precondition not met: {unmet}"}
    try:
        while not run.state.rejected() and ((wave := run.state.ready()) or run.carried):
            await run.wave(wave)
    finally:
        run.ahead.close()  # a shell started for a step that will not run now
    outcome = run.state.outcome()
    if outcome == "rejected":
        step = next(n for n, node in run.state.nodes.items() if node.status == "rejected")
        node = run.state.nodes[step]
        raise Rejected(step, node.decision.get("reason"), node.decision.get("by"))
    handlers_ok = await run.handlers("success" if outcome != "failed" else "failure")
    if outcome == "failed" or not handlers_ok:
        failed = [n for n, node in run.state.nodes.items() if node.status == "failed"]
        raise DagFailed(f"DAG {dag.name!r} failed (steps: {', '.join(failed) or 'handlers'})")
    outputs: dict[str, str] = {}
    for step_name in dag.order:
        outputs.update(run.state.nodes[step_name].outputs)
    return {"status": outcome, "outputs": outputs}


@dataclass
class _Run:
    ctx: Context
    host: DagHost
    dag: DagSpec
    state: DagState
    positional: Sequence[str]
    named: Mapping[str, str]
    environment: RunEnvironment  # what the run takes from the server's (`environment`)
    # The DAG's env as `dag:eval` recorded it (when it ran commands), else evaluated below.
    env_values: Mapping[str, str] | None = None
    # Inherited variables, parameters, DAG env: evaluated once a claim, under each step's own.
    base: Mapping[str, str] | None = None
    flush: bool = dataclasses.field(default_factory=step_flush)  # TETHER_DAG_STEP_FLUSH
    # Asks still waiting after a push-back let the run go on: step name → its ask's result.
    carried: dict[str, Any] = dataclasses.field(default_factory=dict)
    ahead: Ahead = dataclasses.field(default_factory=Ahead)  # the next step's shell (`ahead`)

    def step_input(self, name: str, step: Step | None = None) -> StepInput:
        if self.base is None:
            env = self.dag.env if self.env_values is None else ()
            inherited = self.environment.variables
            base = step_scope(inherited, self.named, env, positional=self.positional)
            self.base = {**base, **(self.env_values or {})}
        scope = step_scope(
            self.base,
            {},
            (),
            positional=self.positional,
            outputs=self.state.upstream_outputs(name) if name in self.state.nodes else (),
            step_env=(step or self.state.by_name.get(name) or _NO_STEP).env,
            run_values=self.state.run_values(name, self.ctx.business_id)
            if name in self.state.nodes
            else {"DAG_NAME": self.dag.name, "DAG_RUN_ID": self.ctx.business_id},
        )
        outputs = self.state.task_outputs()
        expand = functools.partial(
            substitute, scope=scope, positional=self.positional, step_outputs=outputs
        )
        # `shell: bash ${params.X}`: each value put in is one word of the shell's command
        # line, so a value never adds arguments of its own (`-c …`).
        shell = expand(self.dag.shell, quote=one_word) if self.dag.shell else None
        workdir, process = dag_workdir(self.dag, expand), self.environment.process
        return StepInput(scope, self.positional, outputs, workdir, shell, process)

    async def wave(self, wave: list[str]) -> None:
        delays = [
            retry_delay(policy, self.state.nodes[n].retries)
            for n in wave
            if self.state.nodes[n].status == "retrying"
            and (policy := self.state.by_name[n].retry_policy) is not None
        ]
        if delays and max(delays) > 0:
            await self.ctx.sleep(max(delays))
        steps = [self.state.by_name[n] for n in wave]
        work = [s for s in steps if not isinstance(s.work, HumanTask)]
        last = self._ends_run(steps)
        # A lone step that is not the run's last: its result commits while the next one
        # starts (module docstring).
        behind = not last and len(work) == 1
        self.ahead.keep(work[0].name if len(work) == 1 else None)
        self.ahead.plan(self._next_launch(work[0]) if behind else None)
        done = await asks.phase([self._work(s, lazy=last, behind=behind) for s in work])
        for step, result in zip(work, done, strict=True):
            self._apply_work(step, result)
        calls = [s for s in work if self.state.nodes[s.name].child_id and _running(self, s)]
        ended = await asks.phase([self._child_end(s) for s in calls])
        for step, answer in zip(calls, ended, strict=True):
            child = self.state.nodes[step.name].child_id
            self.state.record_work(step.name, child_result(answer.payload, step, child))
        await self._asks(steps)

    async def _asks(self, steps: list[Step]) -> None:
        """Open the wave's asks; each waits on its own (carried, see `asks`) while any other
        step can run, as Dagu's waiting step holds up only its dependents. Once nothing else
        can run (`steps` empty: the run's loop found nothing ready), the open asks are decided
        together: the run parks on them, or applies their answers and goes on."""
        own = [
            s.name
            for s in steps
            if isinstance(s.work, HumanTask) or self.state.nodes[s.name].status == "waiting"
        ]
        if own:
            self.state.asking(own)
            got = await asks.settle([self._ask(self.state.by_name[n]) for n in own])
            # Carried whatever they return: on a replay an answer given since is found here,
            # but it applies where the run first decided its asks (below), never earlier.
            self.carried.update(zip(own, got, strict=True))
        if steps or not self.carried:
            return
        results = self.carried
        attempt = self.state.attempts[-1]
        apply, still = await asks.decide(self.ctx, results, self.dag.order, attempt)
        for name in apply:
            if self.state.nodes[name].status == "waiting":  # else a push-back before reset it
                self.state.record_answer(name, results[name].payload, results[name].by)
        self.carried = {n: results[n] for n in still if self.state.nodes[n].status == "waiting"}
        if not self.state.rejected():
            self.state.attempts.append((await self.ctx.uuid()).hex[:6])

    def _next_launch(self, step: Step) -> Launch | None:
        """The shell to start ahead while `step` runs: the step's that would be the next wave
        alone if `step` succeeds, when `step` publishes nothing and waits for no one."""
        if not isinstance(step.work, Shell) or step.output or step.approval is not None:
            return None
        following = self.state.ready_after(step.name)
        if len(following) != 1 or self.state.nodes[following[0]].status != "not_started":
            return None
        return launch_of(self.state.by_name[following[0]], self.step_input(following[0]))

    def _ends_run(self, steps: list[Step]) -> bool:
        """Whether the wave's one step is the run's last effect: every other step has ended,
        and no retry, gate or handler can follow it, so only the run's settle writes after
        it. Its result then rides on that write (one commit fewer), with nothing run between
        the step's end and the commit of its result."""
        if len(steps) != 1 or self.dag.handlers:
            return False
        step = steps[0]
        if step.approval is not None or step.retry_policy is not None:
            return False
        if not isinstance(step.work, (Shell, Action)):
            return False
        return all(
            node.status not in _OPEN for n, node in self.state.nodes.items() if n != step.name
        )

    async def _work(self, step: Step, *, lazy: bool, behind: bool) -> Any:
        retries = self.state.nodes[step.name].retries
        if isinstance(step.work, Call):
            child_input = {"params": [param_text(p) for p in step.work.params] or None}
            return await self.ctx.transaction(
                start_child, self.host, step.work.dag, child_input, self.ctx.execution_id,
                step.name, name=f"call:{step.name}",
            )  # fmt: skip
        if isinstance(step.work, RemoteCall):
            step_input = self.step_input(step.name)
            expand = functools.partial(expand_value, step_input=step_input)
            return await remote_steps.run_step(self.ctx, step, expand, retries)
        step_input, functions, gate = (
            self.step_input(step.name),
            self.host.functions,
            self.ctx.earlier_writes_committed(),
        )
        ahead = self.ahead if behind or lazy else None  # the wave is this step alone
        return await self.ctx.step(
            execute_step, step, step_input, functions, retries, gate, ahead,
            name=f"node:{step.name}", lazy=lazy, flush=self.flush, behind=behind, gated=True,
        )  # fmt: skip

    def _apply_work(self, step: Step, result: dict[str, Any]) -> None:
        if isinstance(step.work, Call):
            apply_call(self.state, step.name, result)
        else:
            self.state.record_work(step.name, result)

    async def _child_end(self, step: Step) -> gates.Answer:
        child = self.state.nodes[step.name].child_id
        assert child is not None  # noqa: S101 — only steps with a child are asked
        (answer,) = await self.ctx.wait_all(gates.ChildRun(child))
        return answer  # type: ignore[no-any-return]  # ChildRun.parse returns Answer

    async def _ask(self, step: Step) -> gates.Answer:
        step_input = self.step_input(step.name)
        if isinstance(step.work, HumanTask):
            task = step.work
            spec: Any = gates.FormTask(
                step.id or step.name,
                step_input.expand(task.prompt),
                gates.form_schema(task.form),
                gates.form_schema(task.push_back.form, feedback=True)
                if task.push_back is not None
                else None,
                attempt=self.state.attempts[-1],
            )
        else:
            gate = step.approval
            assert gate is not None  # noqa: S101 — waiting steps have a gate
            prompt = step_input.expand(gate.prompt) if gate.prompt else None
            spec = gates.Gate(
                step.name,
                prompt,
                gate.input,
                gate.required,
                approvers=gate.approvers if gate.approvers is not None else gate.approver_role,
                quorum=gate.quorum or 1,
                allow_self_approval=gate.allow_self_approval,
                attempt=self.state.attempts[-1],
            )
        (answer,) = await self.ctx.wait_all(spec)
        return answer  # type: ignore[no-any-return]  # both parse to Answer

    async def unmet(self) -> str | None:
        """The DAG's first precondition that does not hold (checked once, recorded)."""
        step_input = self.step_input("dag:preconditions")
        conds = self.dag.preconditions
        return await self.ctx.step(unmet_precondition, conds, step_input, name="dag:preconditions")  # type: ignore[no-any-return]

    async def handlers(self, event: str) -> bool:
        """Run the `event` handler, then `exit`; whether both succeeded (or are absent)."""
        ok = True
        for which in (event, "exit"):
            step = self.dag.handlers.get(cast(HandlerEvent, which))
            if step is None:
                continue
            result = await self.ctx.step(
                execute_step, step, self.step_input(step.name, step), self.host.functions, 0,
                name=f"handler:{which}", flush=self.flush,
            )  # fmt: skip
            ok = ok and result["status"] != "failed"
        return ok


async def _spec(host: DagHost, name: str, inline: str | None) -> dict[str, str]:
    """The spec the run records (a coroutine: `ctx.step` runs a plain function in a thread)."""
    return host.snapshot(name, inline)


def _running(run: _Run, step: Step) -> bool:
    return run.state.nodes[step.name].status == "running"


async def execute_step(
    step: Step,
    step_input: StepInput,
    functions: Functions,
    retries: int,
    gate: Gate | None = None,
    ahead: Ahead | None = None,
) -> dict[str, Any]:
    """One durable step: the work's result, with `retry` set when its policy allows another.
    `gate`: awaited before the work's first side effect
    (`Context.earlier_writes_committed`); `ahead`: the run's shells started ahead (the wave is
    this step alone)."""
    result = await run_work(step, step_input, functions, gate, ahead)
    policy = step.retry_policy
    if result["status"] == "failed" and policy is not None and retries < policy.limit:
        code = result.get("exit_code")
        if not policy.exit_codes or code in policy.exit_codes:
            result["retry"] = True
    return result


async def start_child(
    conn: Any, host: DagHost, dag: str, child_input: Any, parent: str, step: str
) -> dict[str, Any]:
    """Insert the child run and its link in the parent's transaction (exactly once)."""
    try:
        new = host.new_child(dag, child_input, parent)
    except (LookupError, ValueError) as exc:
        return {"error": f"cannot start DAG {dag!r}: {exc}"}
    parent_row = await repo.get_execution(conn, parent)
    if parent_row is not None:  # the child belongs to its parent's tenant
        new = dataclasses.replace(new, tenant=parent_row.tenant)
    await repo.insert_execution(conn, new)
    await children.insert_child_link(conn, new.id, parent, step)
    return {"child": new.id}


async def inherited(conn: Any, execution_id: str, plan: dict[str, Any]) -> dict[str, Any]:
    """The spec and kept steps of the run this one retries (its predecessor, checked)."""
    me = await repo.get_execution(conn, execution_id)
    old = await repo.get_execution(conn, plan["of"])
    if me is None or old is None or me.predecessor_id != plan["of"]:
        raise DagFailed("a retry plan must name the run this one retries")
    records = await repo.get_steps(conn, plan["of"])
    state, _ = fold(records)
    if state is None:
        raise DagFailed(f"run {plan['of']!r} recorded no DAG spec")
    spec_rec = next(r for r in records if r.name == "dag:spec")
    snap = dict(spec_rec.result["value"])
    # What the ended run's records do not say (the steps a failure blocked, the ones it was
    # stopped in) is settled here too, so a kept step stays as the run left it: a retry of
    # one step alone runs that step only, as Dagu's does.
    state.settle_end(stopped=(old.sealed_from or old.status) in STOPPED)
    keep = {n: asdict(node) for n, node in state.nodes.items() if n not in set(plan["reset"])}
    snap["inherit"] = keep
    return snap
