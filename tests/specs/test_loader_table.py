"""The loader against a table of invalid specs: each refusal names its field and its line."""

from __future__ import annotations

import textwrap

import pytest

from tether.specs.dag import (
    DagSpecError,
    InvalidReference,
    InvalidValue,
    InvalidYaml,
    UnknownField,
    load_string,
)

S = "steps:\n  - name: a\n    command: echo a\n"  # a valid tail, lines 1-3

# (spec, error class, field, line)
INVALID: list[tuple[str, type[DagSpecError], str, int]] = [
    ("name: x\nfoo: 1\n" + S, UnknownField, "foo", 2),
    (
        "steps:\n  - name: a\n    command: x\n    signalOnStop: INT\n",
        UnknownField,
        "signalOnStop",
        4,
    ),
    ("steps:\n  - name: a\n    command: x\n    env: [A]\n", InvalidValue, "env", 4),
    ("timeoutSec: 3\n" + S, UnknownField, "timeoutSec", 1),
    ("steps: []\n", InvalidValue, "steps", 1),
    ("name: x\n", InvalidValue, "", 1),
    ("name: 'a b'\n" + S, InvalidValue, "name", 1),
    ("type: agent\n" + S, InvalidValue, "type", 1),
    ("steps:\n  - name: a\n    executor: {type: mail}\n", UnknownField, "executor", 3),
    ("steps:\n  - echo a\n  - [echo b, [echo c]]\n", InvalidValue, "steps", 3),
    ("steps:\n  - echo a\n  - []\n", InvalidValue, "steps", 3),
    ("steps:\n  - name: a\n    run: sub\n    params: X=1\n", UnknownField, "params", 4),
    ("steps:\n  - name: a\n", InvalidValue, "steps", 2),
    ("steps:\n  - name: a\n    command: x\n    call: other\n", InvalidValue, "steps", 2),
    ("steps:\n  - name: a\n    run: ''\n", InvalidValue, "run", 3),
    ("steps:\n  - name: a\n    run: f\n    with: [1]\n", InvalidValue, "with", 4),
    ("steps:\n  - name: a\n    action: http.request\n", InvalidValue, "action", 3),
    ("steps:\n  - name: a\n    action: dag.run\n", InvalidValue, "action", 3),
    ("steps:\n  - name: a\n    action: dag.run\n    with: {}\n", InvalidValue, "with", 4),
    (
        "steps:\n  - name: a\n    action: dag.run\n    with: {dag: b, labels: x}\n",
        UnknownField,
        "labels",
        4,
    ),
    ("steps:\n  - name: a\n    action: dag.run\n    with: {dag: ' '}\n", InvalidValue, "dag", 4),
    ("steps:\n  - id: ENV\n    command: x\n", InvalidValue, "id", 2),
    ("steps:\n  - id: " + "a" * 41 + "\n    command: x\n", InvalidValue, "id", 2),
    ("steps:\n  - name: " + "\u3042" * 86 + "\n    command: x\n", InvalidValue, "name", 2),
    (
        "steps:\n  - id: ' b '\n    command: x\n  - id: b\n    command: y\n",
        InvalidReference,
        "steps",
        4,
    ),
    (
        "type: graph\nsteps:\n  - id: b\n    command: x\n  - name: c\n    command: y\n"
        "    depends: ' b '\n",
        InvalidReference,
        "depends",
        7,
    ),
    ("working_dir: ''\n" + S, InvalidValue, "working_dir", 1),
    ("workingDir: a\nworking_dir: b\n" + S, InvalidValue, "workingDir", 1),
    ("shell: {a: 1}\n" + S, InvalidValue, "shell", 1),
    (
        "steps:\n  - name: a\n    action: human.task\n    with: {prompt: p}\n",
        InvalidValue,
        "action",
        3,
    ),
    (
        "steps:\n  - id: a\n    action: human.task\n    timeoutSec: 3\n    with: {prompt: p}\n",
        InvalidValue,
        "timeoutSec",
        4,
    ),
    (
        "steps:\n  - id: a\n    action: human.task\n    with: {prompt: '  '}\n",
        InvalidValue,
        "prompt",
        4,
    ),
    (
        "steps:\n  - id: a\n    action: human.task\n    with:\n      prompt: p\n      form:\n"
        "        type: object\n        properties:\n          x: {type: object}\n",
        InvalidValue,
        "type",
        9,
    ),
    (
        "steps:\n  - id: a\n    action: human.task\n    with:\n      prompt: p\n      form:\n"
        "        type: object\n        required: [y]\n",
        InvalidValue,
        "required",
        8,
    ),
    (
        "steps:\n  - name: a\n    command: x\n  - name: a\n    command: y\n",
        InvalidReference,
        "steps",
        4,
    ),
    ("steps:\n  - name: a\n    command: x\n    depends: b\n", InvalidReference, "depends", 4),
    ("steps:\n  - name: a\n    command: x\n    depends: [a]\n", InvalidReference, "steps", 2),
    (
        "steps:\n  - name: a\n    command: x\n    depends: b\n  - name: b\n    command: y\n"
        "    depends: a\n",
        InvalidReference,
        "steps",
        2,
    ),
    (
        "steps:\n  - name: a\n    command: x\n  - name: b\n    command: y\n"
        "    approval: {rewind_to: c}\n  - name: c\n    command: z\n",
        InvalidReference,
        "rewind_to",
        6,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval: {rewind_to: b}\n  - name: b\n"
        "    command: y\n    depends: a\n",
        InvalidReference,
        "rewind_to",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval: {reviewer: me}\n",
        UnknownField,
        "reviewer",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval:\n      approvers: [al, bo]\n"
        "      quorum: 3\n",
        InvalidValue,
        "approvers",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval:\n      approvers: [al, al]\n",
        InvalidValue,
        "approvers",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval:\n      quorum: 0\n",
        InvalidValue,
        "quorum",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval:\n      approvers: {group: x}\n",
        UnknownField,
        "group",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval:\n      approvers: {role: 'a b'}\n",
        InvalidValue,
        "role",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    approval:\n      allowSelfApproval: maybe\n",
        InvalidValue,
        "allowSelfApproval",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    retryPolicy: {intervalSec: 2}\n",
        InvalidValue,
        "retryPolicy",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    retryPolicy: {limit: many}\n",
        InvalidValue,
        "limit",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    retryPolicy: {limit: 1, backoff: 0.5}\n",
        InvalidValue,
        "backoff",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    continueOn: sometimes\n",
        InvalidValue,
        "continueOn",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    continueOn: {failure: yes please}\n",
        InvalidValue,
        "failure",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    continueOn: {failure: true}\n"
        "    continue_on: {skipped: true}\n",
        InvalidValue,
        "continue_on",
        5,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    preconditions: [{expected: x}]\n",
        InvalidValue,
        "preconditions",
        4,
    ),
    (
        "steps:\n  - name: a\n    command: x\n    preconditions: [{condition: x, eval: y}]\n",
        InvalidValue,
        "eval",
        4,
    ),
    ("steps:\n  - name: a\n    command: x\n    timeoutSec: -1\n", InvalidValue, "timeoutSec", 4),
    ("steps:\n  - name: a\n    command: x\n    output: 'not a name'\n", InvalidValue, "output", 4),
    ("schedule: '61 * * * *'\n" + S, InvalidValue, "schedule", 1),
    ("schedule:\n  - '0 * * * *'\n  - nonsense\n" + S, InvalidValue, "schedule", 3),
    ("schedule: {start: '0 * * * *'}\n" + S, InvalidValue, "schedule", 1),
    ("schedule: 'CRON_TZ=Mars/Olympus 0 * * * *'\n" + S, InvalidValue, "schedule", 1),
    ("labels: 'Bad Key!=x'\n" + S, InvalidValue, "labels", 1),
    ("labels: [ok, '-bad']\n" + S, InvalidValue, "labels", 1),
    ("env: ['NOEQUALS']\n" + S, InvalidValue, "env", 1),
    ("env: {'1BAD': x}\n" + S, InvalidValue, "1BAD", 1),
    ("params: 'A=1 A=2'\n" + S, InvalidValue, "params", 1),
    ("params:\n  - name: n\n    type: date\n" + S, InvalidValue, "type", 3),
    ("params:\n  - name: n\n    minLength: 2\n" + S, UnknownField, "minLength", 3),
    ("params:\n  - name: n\n    minimum: 2\n" + S, InvalidValue, "minimum", 3),
    (
        "params:\n  - name: n\n    type: integer\n    max_length: 2\n" + S,
        InvalidValue,
        "max_length",
        4,
    ),
    ("params:\n  - name: n\n    type: integer\n    default: x\n" + S, InvalidValue, "default", 4),
    ("params:\n  - name: n\n    enum: [a, b]\n    default: c\n" + S, InvalidValue, "default", 4),
    ("params:\n  - name: n\n    type: boolean\n    enum: [maybe]\n" + S, InvalidValue, "enum", 4),
    ("params:\n  - name: n\n    pattern: '['\n" + S, InvalidValue, "pattern", 3),
    (
        "params:\n  - name: n\n    type: number\n    minimum: 3\n    maximum: 1\n" + S,
        InvalidValue,
        "name",
        2,
    ),
    ("params:\n  - name: n\n    eval: ' '\n" + S, InvalidValue, "eval", 3),
    ("preconditions:\n  - condition: ' '\n" + S, InvalidValue, "condition", 2),
    ("preconditions:\n  - eval: $(date)\n" + S, InvalidValue, "eval", 2),
    ("preconditions:\n  - condition: x\n    expected: 're:['\n" + S, InvalidValue, "expected", 3),
    ("preconditions:\n  - condition: x\n    expected: 're:'\n" + S, InvalidValue, "expected", 3),
    ("params: 'unbalanced \"quote'\n" + S, InvalidValue, "params", 1),
    ("maxActiveRuns: many\n" + S, InvalidValue, "maxActiveRuns", 1),
    ("queue: {enabled: true}\n" + S, InvalidValue, "queue", 1),
    ("mcp: sure\n" + S, InvalidValue, "mcp", 1),
    ("handlerOn:\n  cancel: {command: x}\n" + S, UnknownField, "cancel", 2),
    ("handlerOn:\n  success: {command: x, depends: a}\n" + S, UnknownField, "depends", 2),
    ("name: x\nname: y\n" + S, InvalidValue, "name", 2),
    ("- a\n- b\n", InvalidYaml, "", 1),
    ("a: [\n", InvalidYaml, "", 2),
    ("name: a\n---\nname: b\n", InvalidYaml, "", 3),
    ("name: a\n---\nname: b\nparallel: [x]\n" + S, UnknownField, "parallel", 4),
]


@pytest.mark.parametrize(("spec", "kind", "field", "line"), INVALID)
def test_invalid_specs_are_refused_naming_field_and_line(
    spec: str, kind: type[DagSpecError], field: str, line: int
) -> None:
    """Every refusal names its field and its line (never silently ignored)."""
    with pytest.raises(DagSpecError) as info:
        load_string(spec, file="t.yaml", default_name="t")
    assert type(info.value) is kind, info.value
    assert (info.value.field, info.value.line, info.value.file) == (field, line, "t.yaml")
    assert f"t.yaml:{line}:" in str(info.value)


def test_inline_spec_without_a_name_is_refused() -> None:
    with pytest.raises(InvalidValue):
        load_string(S)


def test_error_path_locates_nested_fields() -> None:
    spec = textwrap.dedent("""\
        steps:
          - name: a
            command: x
          - name: b
            command: y
            retryPolicy: {limit: 1, intervalSec: soon}
        """)
    with pytest.raises(InvalidValue) as info:
        load_string(spec, default_name="t")
    assert info.value.path == "steps[1].retryPolicy.intervalSec"


@pytest.mark.parametrize("escape", ["\\ud83d", "\\udfff\\ud800", "\\ud83d\\ude00x\\ud800"])
def test_a_lone_surrogate_escape_is_invalid_yaml_in_both_dialects(escape: str) -> None:
    """Our choice: a quoted `\\ud83d` escape makes a string no UTF-8 text can hold; both spec
    loaders refuse it at its line (it used to escape as a UnicodeEncodeError)."""
    from tether.specs.realm import RealmSpecError
    from tether.specs.realm import load_string as load_realm

    dag = f'steps:\n  - name: "{escape}"\n    command: echo\n'
    with pytest.raises(InvalidYaml) as caught:
        load_string(dag, default_name="d")
    assert caught.value.line == 2
    realm = f'id: w\nname: "n{escape}"\nversion: 1\nsteps:\n  a: {{execution: agent}}\n'
    with pytest.raises(RealmSpecError):
        load_realm(realm)


@pytest.mark.parametrize("nesting", ["[" * 5000 + "]" * 5000, "{a: " * 5000 + "}" * 5000])
def test_a_document_nested_past_the_stack_is_refused_in_both_dialects(nesting: str) -> None:
    """Our choice: nesting too deep for the YAML composer is InvalidYaml (it used to escape as
    a RecursionError, an internal error for an inline spec)."""
    from tether.specs.realm import RealmSpecError
    from tether.specs.realm import load_string as load_realm

    with pytest.raises(InvalidYaml):
        load_string(f"bogus: {nesting}\n" + S, default_name="d")
    with pytest.raises(RealmSpecError):
        load_realm(f"id: w\nbogus: {nesting}\n")
