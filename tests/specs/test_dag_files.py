"""Whole DAG files, one per feature: those inside the subset load; a file using a field
outside it is refused naming that field and its line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tether.specs.dag import DagSpecError, Precondition, Shell, UnknownField, load_file

DAG_FILES = Path(__file__).parent / "dag_files"
INSIDE = [
    "cron_schedule",
    "named_params_string",
    "chain_in_file_order",
    "chain_with_explicit_depends",
    "precondition_on_positional_param",
    "step_id_beside_name",
    "graph_forward_depends",
    "labels_and_exit_handler",
    "output_into_script",
    "depends_on_one_step",
]
# file → (field named in the refusal, its line in the file)
OUTSIDE = {
    "step_stdout": ("stdout", 7),
    "step_signal_on_stop": ("signalOnStop", 4),
    "step_foreach": ("foreach", 4),
    "dag_max_output_size": ("maxOutputSize", 5),
    "step_executor": ("executor", 6),
    "queue_mapping": ("queue", 5),  # `queue:` as a mapping (enabled, worker labels)
}


def test_every_file_is_either_loaded_or_refused_by_a_test() -> None:
    """Our choice: no file in the directory goes unchecked."""
    assert {p.stem for p in DAG_FILES.glob("*.yaml")} == set(INSIDE) | set(OUTSIDE)


@pytest.mark.parametrize("stem", INSIDE)
def test_a_file_inside_the_subset_loads(stem: str) -> None:
    """A DAG that uses only the subset loads as written."""
    path = DAG_FILES / f"{stem}.yaml"
    dag = load_file(path)
    assert dag.name == yaml.safe_load(path.read_text(encoding="utf-8")).get("name", stem)
    assert dag.steps and set(dag.order) == {s.name for s in dag.steps}


@pytest.mark.parametrize(("stem", "field", "line"), [(k, *v) for k, v in OUTSIDE.items()])
def test_a_field_outside_the_subset_is_refused_by_name_and_line(
    stem: str, field: str, line: int
) -> None:
    """A field outside the subset is refused with its name and line, never ignored."""
    with pytest.raises(DagSpecError) as info:
        load_file(DAG_FILES / f"{stem}.yaml")
    assert (info.value.field, info.value.line) == (field, line)
    assert info.value.file.endswith(f"{stem}.yaml")


def test_an_unknown_step_field_is_an_unknown_field_error() -> None:
    with pytest.raises(UnknownField):
        load_file(DAG_FILES / "step_stdout.yaml")


def test_a_chain_without_depends_runs_in_file_order() -> None:
    dag = load_file(DAG_FILES / "chain_in_file_order.yaml")
    names = [s.name for s in dag.steps]
    assert [s.depends for s in dag.steps] == [(), *((n,) for n in names[:-1])]


def test_explicit_depends_in_a_chain_replace_the_implied_one() -> None:
    """A chain step's own `depends` (a name, a list, or `[]` for none) wins; the next step
    still follows it."""
    dag = load_file(DAG_FILES / "chain_with_explicit_depends.yaml")
    assert {s.name: s.depends for s in dag.steps} == {
        "thaw": (),
        "shape": ("thaw",),
        "preheat": (),
        "score": ("shape",),
        "bake": ("score", "preheat"),
        "cool": ("bake",),
    }


def test_a_graph_step_may_depend_on_a_step_written_after_it() -> None:
    dag = load_file(DAG_FILES / "graph_forward_depends.yaml")
    assert dag.type == "graph"
    assert dag.order.index("Book the van") < dag.order.index("Pack boxes")
    assert dag.order.index("Return keys") < dag.order.index("Load van")
    assert dag.step("Pack boxes").description == "Everything but the kitchen"


def test_steps_are_found_by_id_and_depends_may_name_an_id() -> None:
    dag = load_file(DAG_FILES / "step_id_beside_name.yaml")
    assert dag.step("measure").name == "Measure the room"
    assert dag.step("paint-walls").name == "Paint walls"
    assert dag.step("Paint walls").depends == ("Measure the room", "Order paint")
    assert dag.step("Clean brushes").depends == ("Paint walls",)


def test_tags_and_labels_merge_lowercased_and_the_exit_handler_is_named_on_exit() -> None:
    dag = load_file(DAG_FILES / "labels_and_exit_handler.yaml")
    assert {str(label) for label in dag.labels} == {"weekly", "team=facilities"}
    assert dag.handlers["exit"].name == "onExit"
    assert [s.cron for s in dag.schedules] == ["0 0 * * 0"]


def test_a_schedule_may_be_a_list_of_cron_expressions() -> None:
    dag = load_file(DAG_FILES / "cron_schedule.yaml")
    assert [s.cron for s in dag.schedules] == ["15 6 * * *", "15 18 * * *"]


def test_a_params_string_declares_named_parameters_in_order() -> None:
    dag = load_file(DAG_FILES / "named_params_string.yaml")
    assert [(p.position, p.name, p.default) for p in dag.params] == [
        (1, "CITY", "porto"),
        (2, "UNITS", "metric"),
    ]


def test_preconditions_compare_positional_parameters() -> None:
    dag = load_file(DAG_FILES / "precondition_on_positional_param.yaml")
    assert [(p.position, p.name, p.default) for p in dag.params] == [
        (1, None, "large"),
        (2, None, "oat"),
    ]
    conditions = {s.name: s.preconditions for s in dag.steps if s.preconditions}
    assert conditions == {
        "steam-oat": (Precondition("$2", expected="oat"),),
        "extra-shot": (Precondition("${1}", expected="re:^(large|huge)$"),),
        "skip-lid": (Precondition("$1", expected="small", negate=True),),
    }


def test_a_script_is_fed_to_the_command_as_its_interpreter() -> None:
    dag = load_file(DAG_FILES / "output_into_script.yaml")
    work = dag.step("today's note").work
    assert isinstance(work, Shell)
    assert work.commands == ("python3",)
    assert work.script == 'import os\nprint("hosts entries:", os.environ["HOST_LINES"])\n'
    assert dag.step("count hosts").output == "HOST_LINES"
