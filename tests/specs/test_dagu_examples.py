"""DAGs shaped like Dagu's public example DAGs: those inside the subset load; the others are
refused by name and line.

The files under `dagu_examples/` are Tether's own test data, written for these tests: each uses
the fields and constructs of one Dagu example (named in its first line) with our own names,
commands and values. Dagu's files are not copied here; their behaviour is the requirement.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tether.specs.dag import DagSpecError, Shell, UnknownField, load_file

EXAMPLES = Path(__file__).parent / "dagu_examples"
INSIDE = [
    "schedule_script",
    "named_params",
    "chain_type",
    "chain_depends_override",
    "positional_param_conditions",
    "step_ids",
    "graph_forward_refs",
    "output_to_script",
    "two_step_depends",
]
# file → (field named in the refusal, its line in our file)
OUTSIDE = {
    "stdout_redirect": ("stdout", 5),
    "stop_signal": ("signalOnStop", 8),
    "foreach_loop": ("foreach", 4),
    "output_size_limit": ("maxOutputSize", 5),
    "jq_executor": ("executor", 4),
    "worker_queue": ("queue", 8),  # `queue:` as a mapping (enabled, worker labels)
}
FIRST_LINE = "# Tether's own test data (not a copy), modelled on Dagu's "


def test_every_example_is_classified_and_says_it_is_ours() -> None:
    """Our choice: each example is asserted one way or the other, and its first line says it
    is our own data and which Dagu feature it is modelled on."""
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert {p.stem for p in files} == set(INSIDE) | set(OUTSIDE)
    for path in files:
        text = path.read_text(encoding="utf-8")
        feature = re.escape(FIRST_LINE) + r".+ \((examples|deploy)/\S+\.yaml\)\."
        assert re.fullmatch(feature, text.splitlines()[0]), path.name
        assert not re.search(r"GPL|[Vv]endored", text), path.name


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
        load_file(EXAMPLES / "stdout_redirect.yaml")


def test_chain_override_keeps_the_explicit_depends() -> None:
    """Dagu's chain type with an override: explicit `depends` replaces the implied one."""
    dag = load_file(EXAMPLES / "chain_depends_override.yaml")
    deps = {s.name: s.depends for s in dag.steps}
    assert deps == {
        "fetch-tags": (),
        "render-changelog": ("fetch-tags",),
        "lint-markdown": ("render-changelog",),
        "spellcheck": ("render-changelog",),
        "publish": ("lint-markdown", "spellcheck"),
    }


def test_a_chain_without_depends_runs_in_file_order() -> None:
    dag = load_file(EXAMPLES / "chain_type.yaml")
    names = [s.name for s in dag.steps]
    assert [s.depends for s in dag.steps] == [(), *((n,) for n in names[:-1])]


def test_forward_references_and_ids_resolve() -> None:
    """A graph step depends on a later step; step ids sit beside names."""
    dag = load_file(EXAMPLES / "graph_forward_refs.yaml")
    assert dag.order.index("Check Rates") < dag.order.index("Join")
    assert dag.labels[0].key == "weekly"
    assert dag.handlers["exit"].name == "onExit"
    with_id = load_file(EXAMPLES / "step_ids.yaml")
    assert with_id.step("reader-v3").name == "read-config"
    assert with_id.step("applier-v1").name == "apply-config"


def test_script_with_interpreter_command() -> None:
    dag = load_file(EXAMPLES / "output_to_script.yaml")
    work = dag.steps[1].work
    assert isinstance(work, Shell)
    assert (work.commands, work.script) == (("bash",), "echo got $TOKEN\n")
    assert dag.steps[0].output == "TOKEN"
