"""Dagu's own public example DAGs: those inside the subset load; the others are refused by name.

The files under `dagu_examples/` are copies (source path and commit in each file's first line).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.specs.dag import DagSpecError, Shell, UnknownField, load_file

EXAMPLES = Path(__file__).parent / "dagu_examples"
INSIDE = [
    "hello_world",
    "pass_parameters",
    "chain_workflow",
    "chain_with_override",
    "define_condition",
    "step_with_id",
    "example_workflow",
    "pass_output_to_next",
    "print_hello_world",
]
# file → (field named in the refusal, its line in the vendored copy)
OUTSIDE = {
    "write_to_file": ("stdout", 5),
    "customize_signal_on_stop": ("signalOnStop", 8),
    "foreach": ("foreach", 4),
    "output-limit": ("maxOutputSize", 7),
    "execute_jq_command": ("executor", 4),
    "k8s-example-dag": ("queue", 12),  # `queue:` as a mapping (enabled, worker labels)
}


def test_every_vendored_example_is_classified() -> None:
    """Our choice: each copied example is asserted one way or the other."""
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} == set(INSIDE) | set(OUTSIDE)


@pytest.mark.parametrize("stem", INSIDE)
def test_examples_inside_the_subset_load(stem: str) -> None:
    """Issue 12: a Dagu DAG that uses only the subset loads unchanged."""
    dag = load_file(EXAMPLES / f"{stem}.yaml")
    assert dag.name  # its `name`, or the file stem
    assert dag.steps and set(dag.order) == {s.name for s in dag.steps}


@pytest.mark.parametrize(("stem", "field", "line"), [(k, *v) for k, v in OUTSIDE.items()])
def test_examples_outside_the_subset_are_refused_by_field_and_line(
    stem: str, field: str, line: int
) -> None:
    """Issue 12: a field outside the subset is refused with its name and line."""
    with pytest.raises(DagSpecError) as info:
        load_file(EXAMPLES / f"{stem}.yaml")
    assert (info.value.field, info.value.line) == (field, line)
    assert info.value.file.endswith(f"{stem}.yaml")


def test_unknown_fields_are_unknown_field_errors() -> None:
    with pytest.raises(UnknownField):
        load_file(EXAMPLES / "write_to_file.yaml")


def test_chain_override_keeps_the_explicit_depends() -> None:
    """Dagu's chain_with_override example: explicit `depends` replaces the implied one."""
    dag = load_file(EXAMPLES / "chain_with_override.yaml")
    deps = {s.name: s.depends for s in dag.steps}
    assert deps == {
        "checkout": (),
        "install-deps": ("checkout",),
        "run-tests": ("install-deps",),
        "build-docs": ("install-deps",),
        "deploy": ("run-tests", "build-docs"),
    }


def test_forward_references_and_ids_resolve() -> None:
    """example_workflow depends on a later step; step_with_id mixes names and ids."""
    dag = load_file(EXAMPLES / "example_workflow.yaml")
    assert dag.order.index("Validate File") < dag.order.index("Merge")
    assert dag.labels[0].key == "daily"
    assert dag.handlers["exit"].name == "onExit"
    with_id = load_file(EXAMPLES / "step_with_id.yaml")
    assert with_id.step("data-fetcher-v1").name == "fetch-data"


def test_script_with_interpreter_command() -> None:
    dag = load_file(EXAMPLES / "pass_output_to_next.yaml")
    work = dag.steps[1].work
    assert isinstance(work, Shell)
    assert (work.commands, work.script) == (("bash",), "echo $OUT1 world\n")
    assert dag.steps[0].output == "OUT1"
