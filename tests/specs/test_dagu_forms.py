"""Forms of the subset's fields that Dagu's own examples and docs use (found by loading every
DAG in Dagu's repository history): unnamed steps, string steps, a steps mapping, parallel
groups in a chain, the default `type`, and older spellings. Each row failed to load before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tether.runtime.scheduler import due_ticks, next_tick
from tether.specs.dag import Action, DagSpec, Precondition, Shell, load_string

PLAIN = "steps:\n  - name: a\n    command: x\n"


def _dag(text: str) -> DagSpec:
    return load_string(text, default_name="t")


def _deps(dag: DagSpec) -> dict[str, tuple[str, ...]]:
    return {s.name: s.depends for s in dag.steps}


def test_unnamed_steps_get_dagus_generated_names() -> None:
    """Dagu's generateTypedStepName: a kind prefix and the 1-based position, past taken names."""
    dag = _dag(
        "type: graph\nsteps:\n  - command: echo a\n  - script: echo b\n  - call: child\n"
        "  - run: py.action\n  - name: cmd_5\n    command: echo e\n  - command: echo f\n"
        "    depends: cmd_1\n"
    )
    assert [s.name for s in dag.steps] == ["cmd_1", "script_2", "dag_3", "step_4", "cmd_5", "cmd_6"]
    assert dag.step("cmd_6").depends == ("cmd_1",)
    clash = _dag("steps:\n  - command: echo a\n  - name: cmd_1\n    command: echo b\n")
    assert [s.name for s in clash.steps] == ["cmd_2", "cmd_1"]
    assert _dag("steps:\n  - id: x\n    command: echo\n").steps[0].name == "x"


def test_string_steps_are_commands_and_run_as_a_chain() -> None:
    """Dagu 1.2x README: `steps: ["echo hello", …]`, with no `type` (a chain by default)."""
    dag = _dag('steps:\n  - echo "quoted, with a comma"\n  - echo second\n')
    assert dag.type == "chain"
    assert dag.step("cmd_1").work == Shell(('echo "quoted, with a comma"',))
    assert _deps(dag) == {"cmd_1": (), "cmd_2": ("cmd_1",)}


def test_nested_lists_are_parallel_groups_of_a_chain() -> None:
    dag = _dag(
        "steps:\n  - echo a\n  - - echo b\n    - name: c\n      command: echo c\n  - echo d\n"
    )
    assert _deps(dag) == {
        "cmd_1": (),
        "cmd_2": ("cmd_1",),
        "c": ("cmd_1",),
        "cmd_4": ("cmd_2", "c"),
    }


def test_steps_as_a_mapping_take_their_names_from_the_keys() -> None:
    """Dagu 1.16's README form; the key wins over a `name` inside."""
    dag = _dag(
        "steps:\n  step1:\n    command: echo hello\n  step2:\n    name: ignored\n"
        "    command: echo bye\n    depends: step1\n"
    )
    assert _deps(dag) == {"step1": (), "step2": ("step1",)}
    assert dag.type == "graph"


def test_default_type_is_a_chain_unless_a_step_declares_depends() -> None:
    """Dagu 1.17 to 2.9 default to `chain` (2.10 to `graph`): a file whose steps declare no
    `depends` was written for the chain; one that declares them reads the same as a graph."""
    plain = "steps:\n  - name: a\n    command: x\n  - name: b\n    command: y\n"
    assert _deps(_dag(plain)) == {"a": (), "b": ("a",)}
    assert _deps(_dag("type: graph\n" + plain)) == {"a": (), "b": ()}
    mixed = plain + "  - name: c\n    command: z\n    depends: a\n"
    assert _deps(_dag(mixed)) == {"a": (), "b": (), "c": ("a",)}
    assert _dag(mixed).type == "graph"


def test_older_spellings_of_preconditions() -> None:
    dag = _dag(
        "steps:\n  - name: a\n    command: x\n    precondition: test -f x\n"
        "  - name: b\n    command: y\n    preconditions:\n      - command: test -d /\n"
    )
    assert dag.step("a").preconditions == (Precondition("test -f x"),)
    assert dag.step("b").preconditions == (Precondition("test -d /"),)


def test_schedules_in_a_time_zone() -> None:
    """Dagu's cron library reads `CRON_TZ=<zone> ` (or `TZ=`): the fields are in that zone."""
    dag = _dag("schedule: ['CRON_TZ=Asia/Tokyo 5 9 * * *', 'TZ=UTC @daily']\n" + PLAIN)
    assert [s.cron for s in dag.schedules] == [
        "CRON_TZ=Asia/Tokyo 5 9 * * *",
        "CRON_TZ=UTC 0 0 * * *",
    ]
    tick = next_tick(dag.schedules[0].cron, datetime(2026, 1, 1, tzinfo=UTC))
    assert tick == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)  # 09:05 in Tokyo
    assert due_ticks(dag.schedules[0].cron, tick - timedelta(days=1), tick) == [tick]


def test_output_names_with_a_dollar() -> None:
    for text in ("OUT", "$OUT", "${OUT}", "' OUT '"):
        assert _dag(f"steps:\n  - command: x\n    output: {text}\n").steps[0].output == "OUT"


def test_run_with_shell_text_is_dagu_v2s_command_and_a_name_is_an_action() -> None:
    """Dagu v2 (current README, conformance fixtures): `run:` is the canonical command field;
    Tether's `run: <name>` (a registered Python action) keeps its meaning."""
    dag = _dag(
        'type: graph\nsteps:\n  - run: echo "${params.MESSAGE}"\n'
        "  - name: two\n    run: [echo a, echo b]\n    with:\n      shell: bash -e\n"
        "  - name: act\n    run: py.action\n    with: {x: 1}\n"
    )
    assert dag.step("cmd_1").work == Shell(('echo "${params.MESSAGE}"',))
    assert dag.step("two").work == Shell(("echo a", "echo b"), shell="bash -e")  # noqa: S604 — a model, not a call
    act = dag.step("act").work
    assert isinstance(act, Action) and act.name == "py.action"
    assert dict(act.with_) == {"x": 1}


def test_run_shell_text_refuses_what_it_does_not_take_by_name() -> None:
    for text, field in (
        ("steps:\n  - run: echo a\n    with:\n      shell_packages: [jq]\n", "shell_packages"),
        ("steps:\n  - run: echo a\n    command: echo b\n", "shell and run"),
        ("steps:\n  - run: '  '\n", "must not be empty"),
    ):
        try:
            _dag(text)
        except Exception as exc:  # noqa: BLE001 — the refusal's text is what is checked
            assert field in str(exc), (text, str(exc))
        else:
            raise AssertionError(f"loaded: {text!r}")
