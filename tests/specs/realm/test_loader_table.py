"""The loader against tables of valid and invalid workflows: each refusal names field and line."""

from __future__ import annotations

import pytest

from tether.specs.realm import (
    InvalidReference,
    InvalidValue,
    InvalidYaml,
    RealmSpecError,
    UnknownField,
    load_string,
)

HEAD = "id: w\nname: W\nversion: 1\n"  # lines 1-3
STEPS = HEAD + "steps:\n"  # line 4; steps start on line 5
AGENT = "  a:\n    description: A\n    execution: agent\n"  # lines 5-7


def step(body: str, name: str = "s") -> str:
    """A workflow whose second step (line 8) is `name` with `body` (lines 9+)."""
    return STEPS + AGENT + f"  {name}:\n    description: S\n" + body


# (workflow, error class, field, line)
INVALID: list[tuple[str, type[RealmSpecError], str, int]] = [
    ("- a\n", InvalidYaml, "", 1),
    ("a: [\n", InvalidYaml, "", 2),
    ("id: a\n---\nid: b\n", InvalidYaml, "", 3),
    ("name: W\nversion: 1\nsteps: {a: {description: A, execution: agent}}\n", InvalidValue, "", 1),
    ("id: w\nversion: 1\nsteps: {a: {description: A, execution: agent}}\n", InvalidValue, "", 1),
    ("id: w\nname: W\nsteps: {a: {description: A, execution: agent}}\n", InvalidValue, "", 1),
    (HEAD, InvalidValue, "", 1),
    ("id: w\nname: W\nversion: '1'\nsteps:\n" + AGENT, InvalidValue, "version", 3),
    ("id: w\nname: W\nversion: true\nsteps:\n" + AGENT, InvalidValue, "version", 3),
    ("id: a/b\nname: W\nversion: 1\nsteps:\n" + AGENT, InvalidValue, "id", 1),
    (HEAD + "owner: me\nsteps:\n" + AGENT, UnknownField, "owner", 4),
    (HEAD + "schema_version: 2\nsteps:\n" + AGENT, UnknownField, "schema_version", 4),
    (HEAD + "services: {}\nsteps:\n" + AGENT, UnknownField, "services", 4),
    (HEAD + "templates: {}\nsteps:\n" + AGENT, UnknownField, "templates", 4),
    (HEAD + "trigger: {type: webhook}\nsteps:\n" + AGENT, UnknownField, "trigger", 4),
    (HEAD + "mcp_servers: []\nsteps:\n" + AGENT, UnknownField, "mcp_servers", 4),
    (HEAD + "workflow_context: {}\nsteps:\n" + AGENT, UnknownField, "workflow_context", 4),
    (HEAD + "x-realm-owner: me\nsteps:\n" + AGENT, UnknownField, "x-realm-owner", 4),
    (HEAD + "extensions: /abs/registry.mjs\nsteps:\n" + AGENT, InvalidValue, "extensions", 4),
    (HEAD + "protocol: {quick_start: go, tips: []}\nsteps:\n" + AGENT, UnknownField, "tips", 4),
    (HEAD + "protocol: {rules: a rule}\nsteps:\n" + AGENT, InvalidValue, "rules", 4),
    (HEAD + "steps: [a]\n", InvalidValue, "steps", 4),
    (HEAD + "steps: {}\n", InvalidValue, "steps", 4),
    (STEPS + "  run:\n    description: A\n    execution: agent\n", InvalidReference, "run", 5),
    (
        STEPS + "  $settlement:\n    description: A\n    execution: agent\n",
        InvalidReference,
        "$settlement",
        5,
    ),
    (STEPS + "  a.b:\n    description: A\n    execution: agent\n", InvalidValue, "a.b", 5),
    (STEPS + "  a:\n    execution: agent\n", InvalidValue, "a", 5),
    (STEPS + "  a:\n    description: A\n", InvalidValue, "a", 5),
    (STEPS + "  a:\n    description: A\n    execution: manual\n", InvalidValue, "execution", 7),
    (STEPS + "  a:\n    description: ' '\n    execution: agent\n", InvalidValue, "description", 6),
    (step("    execution: agent\n    colour: red\n"), UnknownField, "colour", 11),
    (step("    execution: auto\n    uses_service: files\n"), UnknownField, "uses_service", 11),
    (step("    execution: agent\n    agent_profile: rev\n"), UnknownField, "agent_profile", 11),
    (step("    execution: agent\n    tools: ['a:b']\n"), UnknownField, "tools", 11),
    (step("    use_template: check\n"), UnknownField, "use_template", 10),
    # Realm takes `handler` on an agent step (next_actions names it as the tool to call)
    (step("    execution: agent\n    handler: h\n"), UnknownField, "handler", 11),
    # fields refused on a kind (step-fields.md: `no`)
    (
        step("    execution: agent\n    input_map: {a: run.params.a}\n"),
        InvalidValue,
        "input_map",
        11,
    ),
    (step("    execution: agent\n    timeout_seconds: 3\n"), InvalidValue, "timeout_seconds", 11),
    (
        step("    execution: auto\n    output_schema: {type: object}\n"),
        InvalidValue,
        "output_schema",
        11,
    ),
    (
        step("    execution: guard\n    trust: human_confirmed\n    abort_unless: a.x\n"),
        InvalidValue,
        "trust",
        11,
    ),
    (
        step(
            "    execution: finalizer\n    handler: h\n    on_outcome: always\n"
            "    depends_on: [a]\n"
        ),
        InvalidValue,
        "depends_on",
        13,
    ),
    (
        step("    execution: finalizer\n    handler: h\n    on_outcome: always\n    retry: {}\n"),
        InvalidValue,
        "retry",
        13,
    ),
    (step("    execution: auto\n    abort_unless: a.x\n"), InvalidValue, "abort_unless", 11),
    # required per kind
    (step("    execution: guard\n"), InvalidValue, "s", 8),
    (step("    execution: finalizer\n    on_outcome: always\n"), InvalidValue, "s", 8),
    (step("    execution: finalizer\n    handler: h\n"), InvalidValue, "s", 8),
    (
        step("    execution: finalizer\n    handler: h\n    on_outcome: never\n"),
        InvalidValue,
        "on_outcome",
        12,
    ),
    # ordering
    (step("    execution: agent\n    depends_on: [b]\n"), InvalidReference, "depends_on", 11),
    (step("    execution: agent\n    depends_on: a\n"), InvalidValue, "depends_on", 11),
    (step("    execution: agent\n    depends_on: [s]\n"), InvalidReference, "depends_on", 11),
    (step("    execution: agent\n    depends_on: [a, a]\n"), InvalidReference, "depends_on", 11),
    (
        STEPS + "  a:\n    description: A\n    execution: agent\n    depends_on: [b]\n"
        "  b:\n    description: B\n    execution: agent\n    depends_on: [a]\n",
        InvalidReference,
        "depends_on",
        5,
    ),
    (
        STEPS + AGENT + "  f:\n    description: F\n    execution: finalizer\n    handler: h\n"
        "    on_outcome: always\n  b:\n    description: B\n    execution: agent\n"
        "    depends_on: [f]\n",
        InvalidReference,
        "depends_on",
        13,
    ),
    (
        step("    execution: agent\n    depends_on: [a]\n    trigger_rule: any\n"),
        InvalidValue,
        "trigger_rule",
        12,
    ),
    # conditions
    (step("    execution: agent\n    when: 'a.x == 1'\n"), InvalidReference, "when", 11),
    (
        step("    execution: agent\n    depends_on: [a]\n    when: 'a.x == 1 and a.y == 2'\n"),
        InvalidValue,
        "when",
        12,
    ),
    (
        step("    execution: agent\n    depends_on: [a]\n    when: 'a.x == 1 or a.y == 2'\n"),
        InvalidValue,
        "when",
        12,
    ),
    (step("    execution: agent\n    depends_on: [a]\n    when: []\n"), InvalidValue, "when", 12),
    (
        step("    execution: agent\n    depends_on: [a]\n    when: 'context.resources.a.x == 1'\n"),
        InvalidReference,
        "when",
        12,
    ),
    (
        step("    execution: agent\n    depends_on: [a]\n    when: 'run.x == 1'\n"),
        InvalidValue,
        "when",
        12,
    ),
    (
        step(
            "    execution: agent\n    depends_on: [a]\n    when: '$settlement.a.failed == true'\n"
        ),
        InvalidValue,
        "when",
        12,
    ),
    (
        step("    execution: agent\n    depends_on: [a]\n    when: '$settlement.a.colour == 1'\n"),
        InvalidValue,
        "when",
        12,
    ),
    (
        step("    execution: agent\n    preconditions: 'a.x == 1'\n"),
        InvalidValue,
        "preconditions",
        11,
    ),
    (
        step("    execution: agent\n    preconditions: ['a.x']\n"),
        InvalidValue,
        "preconditions",
        11,
    ),
    (
        step("    execution: agent\n    preconditions: ['zz.x == 1']\n"),
        InvalidReference,
        "preconditions",
        11,
    ),
    (
        step("    execution: guard\n    abort_unless:\n      - a.x ==\n"),
        InvalidValue,
        "abort_unless",
        12,
    ),
    (
        step('    execution: guard\n    abort_unless: "a.x == \'open"\n'),
        InvalidValue,
        "abort_unless",
        11,
    ),
    # schemas
    (
        step("    execution: agent\n    input_schema: {type: strin}\n"),
        InvalidValue,
        "input_schema",
        11,
    ),
    (step("    execution: agent\n    input_schema: [a]\n"), InvalidValue, "input_schema", 11),
    (
        step(
            "    execution: agent\n    output_schema:\n      properties:\n        d: {type: string,"
            " format: date}\n"
        ),
        InvalidValue,
        "output_schema",
        11,
    ),
    (HEAD + "params_schema: {format: email}\nsteps:\n" + AGENT, InvalidValue, "params_schema", 4),
    # gates
    (step("    execution: auto\n    trust: human_confirmd\n"), InvalidValue, "trust", 11),
    (step("    execution: auto\n    trust: engine_delivered\n"), InvalidValue, "trust", 11),
    (
        step("    execution: auto\n    trust: human_confirmed\n    gate: {choices: []}\n"),
        InvalidValue,
        "choices",
        12,
    ),
    (
        step("    execution: auto\n    trust: human_confirmed\n    gate: {timeout_seconds: 0}\n"),
        InvalidValue,
        "timeout_seconds",
        12,
    ),
    (
        step(
            "    execution: auto\n    trust: human_confirmed\n    gate: {timeout_seconds: 5,"
            " on_expiry: skip}\n"
        ),
        InvalidValue,
        "on_expiry",
        12,
    ),
    (
        step(
            "    execution: auto\n    trust: human_confirmed\n    gate: {timeout_seconds: 5,"
            " on_expiry: settle_default}\n"
        ),
        InvalidValue,
        "on_expiry",
        12,
    ),
    (
        step(
            "    execution: auto\n    trust: human_confirmed\n    gate: {timeout_seconds: 5,"
            " on_expiry: settle_default, default_choice: cancel}\n"
        ),
        InvalidValue,
        "default_choice",
        12,
    ),
    (
        step("    execution: auto\n    trust: human_confirmed\n    gate: {reminder_max: 0}\n"),
        InvalidValue,
        "reminder_max",
        12,
    ),
    # retry, timeouts, exhaustion
    (step("    execution: auto\n    timeout_seconds: 0\n"), InvalidValue, "timeout_seconds", 11),
    (step("    execution: auto\n    timeout_seconds: 1.5\n"), InvalidValue, "timeout_seconds", 11),
    (step("    execution: auto\n    retry: {max_attempts: 0}\n"), InvalidValue, "max_attempts", 11),
    (step("    execution: auto\n    retry: {backoff: random}\n"), InvalidValue, "backoff", 11),
    (
        step("    execution: auto\n    retry: {base_delay_ms: -1}\n"),
        InvalidValue,
        "base_delay_ms",
        11,
    ),
    (step("    execution: auto\n    retry: {on_timeout: true}\n"), InvalidValue, "on_timeout", 11),
    (step("    execution: auto\n    idempotent: 'yes'\n"), InvalidValue, "idempotent", 11),
    (
        step("    execution: agent\n    validation_exhaustion: {threshold: 0}\n"),
        InvalidValue,
        "threshold",
        11,
    ),
    (
        step("    execution: agent\n    validation_exhaustion: {mode: skip}\n"),
        InvalidValue,
        "mode",
        11,
    ),
    (
        step(
            "    execution: agent\n    output_schema: {type: object}\n"
            "    validation_exhaustion: {mode: default}\n"
        ),
        InvalidValue,
        "validation_exhaustion",
        12,
    ),
    (
        step(
            "    execution: agent\n    validation_exhaustion: {mode: default, default_output: {}}\n"
        ),
        InvalidValue,
        "default_output",
        11,
    ),
    (
        step(
            "    execution: agent\n    output_schema: {type: object, required: [c]}\n"
            "    validation_exhaustion: {mode: default, default_output: {}}\n"
        ),
        InvalidValue,
        "default_output",
        12,
    ),
    (
        step("    execution: agent\n    trace_validation_mode: strict\n"),
        InvalidValue,
        "trace_validation_mode",
        11,
    ),
    (
        step("    execution: agent\n    structured_output: loose\n"),
        InvalidValue,
        "structured_output",
        11,
    ),
    (step("    execution: auto\n    input_map: [a]\n"), InvalidValue, "input_map", 11),
    # input-map-and-templates.md: a bare list, number or boolean, an unknown `$` directive,
    # `$literal` beside another key, and more than 10 levels are refused
    (step("    execution: auto\n    input_map: {tags: [a, b]}\n"), InvalidValue, "tags", 11),
    (step("    execution: auto\n    input_map: {n: 3}\n"), InvalidValue, "n", 11),
    (
        step("    execution: auto\n    input_map: {b: {$litteral: x}}\n"),
        InvalidValue,
        "$litteral",
        11,
    ),
    (step("    execution: auto\n    input_map: {b: {$literal: x, y: z}}\n"), InvalidValue, "b", 11),
    (
        step("    execution: auto\n    input_map: " + "{a: " * 11 + "x" + "}" * 11 + "\n"),
        InvalidValue,
        "a",
        11,
    ),
]


@pytest.mark.parametrize(("text", "kind", "field", "line"), INVALID)
def test_refusal_names_its_field_and_line(
    text: str, kind: type[RealmSpecError], field: str, line: int
) -> None:
    with pytest.raises(kind) as caught:
        load_string(text, file="w.yaml")
    assert (caught.value.field, caught.value.line) == (field, line), str(caught.value)
    assert str(caught.value).startswith(f"w.yaml:{line}:")


# (workflow, the step checked, attribute, expected value)
VALID: list[tuple[str, str, str, object]] = [
    (STEPS + AGENT, "a", "execution", "agent"),
    (step("    execution: auto\n"), "s", "handler", None),
    (step("    execution: auto\n    handler: h\n"), "s", "effective_timeout", 3600),
    (step("    execution: agent\n"), "s", "effective_timeout", None),
    (
        step("    execution: auto\n    handler: h\n    timeout_seconds: 30\n"),
        "s",
        "effective_timeout",
        30,
    ),
    (
        step("    execution: agent\n    depends_on: [a]\n    trigger_rule: one_failed\n"),
        "s",
        "trigger_rule",
        "one_failed",
    ),
    (step("    execution: agent\n    depends_on: []\n"), "s", "depends_on", ()),
    (
        step("    execution: finalizer\n    handler: h\n    on_outcome: always\n"),
        "s",
        "on_outcome",
        ("always",),
    ),
    (
        step("    execution: finalizer\n    handler: h\n    on_outcome: [fail, abort]\n"),
        "s",
        "on_outcome",
        ("fail", "abort"),
    ),
    (
        step(
            "    execution: auto\n    input_map: {path: run.params.path, n: {$literal: 3},"
            " to: {name: context.resources.a.name}}\n"
        ),
        "s",
        "input_map",
        {
            "path": "run.params.path",
            "n": {"$literal": 3},
            "to": {"name": "context.resources.a.name"},
        },
    ),
    (step("    execution: auto\n    config: {mode: fast}\n"), "s", "config", {"mode": "fast"}),
    (
        step("    execution: auto\n    idempotent: true\n    retry: {on_timeout: true}\n"),
        "s",
        "idempotent",
        True,
    ),
    (
        step("    execution: agent\n    structured_output: strict\n    llm_timeout_seconds: 9\n"),
        "s",
        "structured_output",
        True,
    ),
    (
        step("    execution: agent\n    trace_validation_mode: enforce\n"),
        "s",
        "trace_validation_mode",
        "enforce",
    ),
    (step("    execution: agent\n    trust: human_reviewed\n"), "s", "gated", True),
    (step("    execution: auto\n    trust: auto\n"), "s", "gated", False),
    (
        step("    execution: guard\n    abort_unless: a.x\n    abort_message: Stop.\n"),
        "s",
        "abort_message",
        "Stop.",
    ),
    (
        step(
            "    execution: agent\n    depends_on: [a]\n    trigger_rule: all_done\n"
            "    when: '$settlement.a.failed == true'\n"
        ),
        "s",
        "trigger_rule",
        "all_done",
    ),
    (
        step("    execution: agent\n    preconditions: ['a.count > 0']\n"),
        "s",
        "preconditions",
        "a.count > 0",
    ),
]


@pytest.mark.parametrize(("text", "step_id", "attribute", "expected"), VALID)
def test_valid_workflow_loads(text: str, step_id: str, attribute: str, expected: object) -> None:
    spec, _ = load_string(text)
    value = getattr(spec.step(step_id), attribute)
    if attribute in ("when", "preconditions", "abort_unless"):
        value = value[0].text
    if attribute in ("input_map", "config"):
        value = dict(value)
    assert value == expected


def test_top_level_fields_are_carried() -> None:
    text = (
        "id: month-close\nname: Close a month\ndescription: Closes the books.\nversion: 1.5\n"
        "x-owner: finance-team\nparams_schema: {type: object, required: [path]}\n"
        "protocol:\n  quick_start: ''\n  rules: [Never guess.]\nsteps:\n" + AGENT
    )
    spec, diagnostics = load_string(text, file="review.yaml")
    assert (spec.id, spec.name, spec.version, spec.description) == (
        "month-close",
        "Close a month",
        1.5,
        "Closes the books.",
    )
    assert spec.protocol.quick_start is None  # an empty quick_start is ignored
    assert spec.protocol.rules == ("Never guess.",)
    assert dict(spec.extensions) == {"x-owner": "finance-team"}
    assert spec.params_schema is not None
    assert spec.params_schema.document == {"type": "object", "required": ["path"]}
    assert spec.file == "review.yaml" and spec.source == text
    assert [(d.code, d.path, d.line) for d in diagnostics] == [("extension_key", "x-owner", 5)]


def test_booleans_are_read_as_yaml_1_2_does() -> None:
    """`no`, `yes`, `on`, `off` are text (Realm's parser); only true/false are booleans."""
    text = step("    execution: guard\n    abort_unless: a.x\n    abort_message: no\n")
    assert load_string(text)[0].step("s").abort_message == "no"
    with pytest.raises(InvalidValue) as caught:
        load_string(step("    execution: auto\n    idempotent: yes\n"))
    assert caught.value.field == "idempotent"
    assert load_string(step("    execution: auto\n    idempotent: True\n"))[0].step("s").idempotent
