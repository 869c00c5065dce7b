"""Each variant form Dagu accepts for a field loads into the same model."""

from __future__ import annotations

import dataclasses

import pytest

from tether.specs.dag import (
    Action,
    Approval,
    Call,
    ContinueOn,
    DagSpec,
    EnvVar,
    HumanTask,
    Label,
    Param,
    Precondition,
    RetryPolicy,
    Shell,
    load_string,
    shell_steps,
)

S = "steps:\n  - name: a\n    command: echo a\n"


def _dag(text: str) -> DagSpec:
    return load_string(text, default_name="t")


@pytest.mark.parametrize(
    "params",
    [
        "params: 'x NAME=v'",
        "params: [x, NAME=v]",
        "params: [x, {NAME: v}]",
        "params:\n  - x\n  - name: NAME\n    default: v\n    description: d",
    ],
)
def test_params_forms(params: str) -> None:
    assert _dag(params + "\n" + S).params == (Param(1, None, "x"), Param(2, "NAME", "v"))


def test_params_map_form_stringifies_scalars() -> None:
    assert _dag("params: {A: 1, B: true, C: null}\n" + S).params == (
        Param(1, "A", "1"),
        Param(2, "B", "true"),
        Param(3, "C", ""),
    )


def test_params_string_honours_quotes() -> None:
    assert _dag("params: 'A=\"a b\" c'\n" + S).params == (Param(1, "A", "a b"), Param(2, None, "c"))


@pytest.mark.parametrize(
    "env",
    ["env: {A: '1', B: x}", "env: [A=1, B=x]", "env: [{A: 1}, {B: x}]", "env:\n  - A: 1\n    B: x"],
)
def test_env_forms(env: str) -> None:
    assert _dag(env + "\n" + S).env == (EnvVar("A", "1"), EnvVar("B", "x"))


@pytest.mark.parametrize(
    "labels",
    [
        "labels: 'team=ops, Daily'",
        "labels: 'team=ops Daily'",
        "labels: [team=ops, daily]",
        "labels: [{team: ops}, daily]",
        "tags: [team=ops]\nlabels: daily",
    ],
)
def test_label_and_tag_forms(labels: str) -> None:
    assert set(_dag(labels + "\n" + S).labels) == {Label("team", "ops"), Label("daily")}


def test_labels_map_form() -> None:
    assert _dag("labels: {team: ops}\n" + S).labels == (Label("team", "ops"),)


@pytest.mark.parametrize("depends", ["depends: a", "depends: [a]", "depends:\n      - a"])
def test_depends_forms(depends: str) -> None:
    dag = _dag(S + f"  - name: b\n    command: echo b\n    {depends}\n")
    assert dag.step("b").depends == ("a",)


def test_graph_steps_without_depends_are_independent_and_chain_implies_order() -> None:
    two = S + "  - name: b\n    command: echo b\n"
    assert _dag("type: graph\n" + two).step("b").depends == ()
    assert _dag("type: chain\n" + two).step("b").depends == ("a",)
    assert _dag("type: chain\n" + two + "    depends: []\n").step("b").depends == ()


def test_command_forms_and_shell_fields() -> None:
    dag = _dag(
        "steps:\n  - name: a\n    command: [echo a, 3, true]\n    shell: [bash, -e]\n"
        "    dir: /work\n  - name: b\n    script: echo b\n    working_dir: /srv\n"
    )
    assert dag.step("a").work == Shell(("echo a", "3", "true"), None, "bash -e", "/work")
    assert dag.step("b").work == Shell((), "echo b", None, "/srv")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("continueOn: failed", ContinueOn(failure=True)),
        ("continueOn: skipped", ContinueOn(skipped=True)),
        (
            "continueOn: {failure: true, exitCode: [1, 2], output: [re:^ok], markSuccess: true}",
            ContinueOn(failure=True, exit_codes=(1, 2), output=("re:^ok",), mark_success=True),
        ),
        (
            "continue_on: {skipped: true, exit_code: '3', output: done, mark_success: false}",
            ContinueOn(skipped=True, exit_codes=(3,), output=("done",)),
        ),
    ],
)
def test_continue_on_forms(text: str, expected: ContinueOn) -> None:
    assert _dag(S + f"    {text}\n").steps[0].continue_on == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("retryPolicy: {limit: 3}", RetryPolicy(3)),
        (
            "retryPolicy: {limit: '2', intervalSec: '5', exitCode: [1], backoff: 1.5, "
            "maxIntervalSec: 60}",
            RetryPolicy(2, 5, (1,), 1.5, 60),
        ),
        (
            "retry_policy: {limit: 1, interval_sec: 2, exit_code: [4], backoff: true, "
            "max_interval_sec: 9}",
            RetryPolicy(1, 2, (4,), 2.0, 9),
        ),
        ("retryPolicy: {limit: 1, backoff: false}", RetryPolicy(1)),
    ],
)
def test_retry_policy_forms(text: str, expected: RetryPolicy) -> None:
    assert _dag(S + f"    {text}\n").steps[0].retry_policy == expected


def test_precondition_forms() -> None:
    dag = _dag(
        S + "    preconditions:\n      - test -f x\n      - condition: $1\n"
        "        expected: '1'\n        negate: true\n"
    )
    assert dag.steps[0].preconditions == (
        Precondition("test -f x"),
        Precondition("$1", "1", negate=True),
    )
    assert _dag(S + "    preconditions: test -d /\n").steps[0].preconditions == (
        Precondition("test -d /"),
    )


def test_schedule_forms() -> None:
    one = _dag("schedule: '*/5 * * * *'\n" + S).schedules
    assert [(s.expression, s.cron) for s in one] == [("*/5 * * * *", "*/5 * * * *")]
    many = _dag("schedule: ['0 9 * * MON-FRI', '@hourly']\n" + S).schedules
    assert [s.cron for s in many] == ["0 9 * * MON-FRI", "0 * * * *"]


def test_call_run_approval_and_human_task() -> None:
    dag = _dag(
        "steps:\n"
        "  - name: sub\n    call: child\n    params: 'X=1'\n"
        "  - name: py\n    run: reports.build\n    with: {n: 3, tags: [a]}\n    depends: sub\n"
        "  - name: gate\n    command: echo\n    depends: py\n"
        "    approval: {prompt: 'ok?', input: [A, B], required: [A], rewind_to: sub}\n"
        "  - id: review\n    action: human.task\n    depends: gate\n"
        "    with:\n      prompt: check\n      push_back: {rewind_to: py}\n"
    )
    assert dag.step("sub").work == Call("child", (Param(1, "X", "1"),))
    work = dag.step("py").work
    assert isinstance(work, Action) and work.name == "reports.build"
    assert dict(work.with_) == {"n": 3, "tags": ["a"]}
    assert dag.step("gate").approval == Approval("ok?", ("A", "B"), ("A",), "sub")
    task = dag.step("review").work
    assert isinstance(task, HumanTask) and task.push_back is not None
    assert task.push_back.rewind_to == "py" and task.form is None
    assert shell_steps(dag) == ("gate",)
    assert dag.runs_shell
    assert not load_string("steps:\n  - {name: p, run: f}\n", default_name="t").runs_shell


CALLS = """\
steps:
  - {name: a, run: f}
  - {name: b, action: mcp.call, with: {remote: r, tool: t}}
handlerOn:
  failure: {run: h}
"""


def test_whether_a_spec_runs_shell_and_what_it_calls_follow_its_steps_and_handlers() -> None:
    """Our choice: whether it runs shell, the functions it calls and the remotes it calls are
    found when the spec is built (and again for a copy made by `dataclasses.replace`)."""
    dag = load_string(CALLS, default_name="t")
    assert (dag.runs_shell, dag.function_names, dag.remote_names) == (
        False,
        frozenset({"f", "h"}),
        frozenset({"r"}),
    )
    shell = load_string("steps:\n  - {name: c, command: echo}\n", default_name="u").steps
    copy = dataclasses.replace(dag, steps=dag.steps[:1] + shell)
    assert (copy.runs_shell, copy.function_names, copy.remote_names) == (
        True,
        frozenset({"f", "h"}),
        frozenset(),
    )


def test_approval_may_be_empty_and_rewind_to_itself_by_id() -> None:
    dag = _dag(
        "steps:\n  - name: a\n    id: a1\n    command: x\n    approval: {rewind_to: a1}\n"
        "  - name: b\n    command: y\n    approval: {}\n"
    )
    assert dag.step("a").approval == Approval(rewind_to="a")
    assert dag.step("b").approval == Approval()


def test_approval_takes_tethers_own_vote_fields() -> None:
    """`approvers` (names, or `{role}`), `quorum` and `allowSelfApproval` are Tether's own
    fields beside Dagu's; unset, the gate is decided by its first answer."""
    dag = _dag(
        "steps:\n  - name: a\n    command: x\n"
        "    approval: {approvers: [al, bo, cy], quorum: 2}\n"
        "  - name: b\n    command: y\n"
        "    approval: {approvers: {role: finance}, allow_self_approval: true}\n"
    )
    assert dag.step("a").approval == Approval(approvers=("al", "bo", "cy"), quorum=2)
    assert dag.step("b").approval == Approval(approver_role="finance", allow_self_approval=True)


def test_top_level_scalars_and_aliases() -> None:
    dag = _dag(
        "name: n\ndescription: d\nqueue: q\nmaxActiveRuns: 2\nmcp: true\n"
        "handler_on:\n  failure: {name: alert, command: x}\n  success: {run: done}\n" + S
    )
    assert (dag.name, dag.description, dag.queue, dag.max_active_runs, dag.mcp) == (
        "n",
        "d",
        "q",
        2,
        True,
    )
    assert dag.handlers["failure"].name == "alert"
    assert isinstance(dag.handlers["success"].work, Action)
    assert shell_steps(dag) == ("a", "alert")
    assert _dag("max_active_runs: -1\n" + S).max_active_runs is None


def test_step_timeout_zero_means_none() -> None:
    assert _dag(S + "    timeoutSec: 0\n").steps[0].timeout_sec is None
    assert _dag(S + "    timeout_sec: 30\n").steps[0].timeout_sec == 30


def test_steps_share_their_unset_continue_on_and_empty_with() -> None:
    """Our choice: what a thousand steps leave unset is one object, not a thousand (a spec
    read by the document worker crosses back as one object per distinct value)."""
    dag = _dag("steps:\n" + "".join(f"  - {{name: s{i}, run: f}}\n" for i in range(3)))
    assert len({id(s.continue_on) for s in dag.steps}) == 1
    assert dag.steps[0].continue_on == ContinueOn()
    works = [s.work for s in dag.steps]
    assert all(isinstance(w, Action) for w in works)
    assert len({id(w.with_) for w in works if isinstance(w, Action)}) == 1
