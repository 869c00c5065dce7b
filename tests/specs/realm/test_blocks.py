"""Gates, retry, validation exhaustion, schemas and the diagnostics Realm reports as warnings."""

from __future__ import annotations

import pytest

from tether.specs.realm import (
    Gate,
    Retry,
    Schema,
    ValidationExhaustion,
    check_schema,
    load_string,
    validate_payload,
)

HEAD = "id: w\nname: W\nversion: 1\nsteps:\n"


def one(body: str, kind: str = "auto") -> str:
    """A workflow whose one step `s` (line 5) has `body` from line 8."""
    return HEAD + f"  s:\n    description: S\n    execution: {kind}\n" + body


def test_a_gated_step_without_a_gate_block_gets_the_default_pair() -> None:
    spec, diagnostics = load_string(one("    trust: human_confirmed\n"))
    assert spec.step("s").gate == Gate()
    assert spec.step("s").gate.choices == ("approve", "reject")  # type: ignore[union-attr]
    assert diagnostics == []


def test_choices_fall_back_to_the_input_schema_enum() -> None:
    body = (
        "    trust: human_confirmed\n    input_schema:\n      type: object\n"
        "      properties:\n        choice: {type: string, enum: [send, reject]}\n"
    )
    gate = load_string(one(body))[0].step("s").gate
    assert gate is not None and (gate.choices, gate.choices_source) == (
        ("send", "reject"),
        "input_schema",
    )


def test_every_gate_key() -> None:
    body = (
        "    trust: human_confirmed\n    display: '{{ x }}'\n    prompt: Publish it?\n"
        "    instructions: Ask the editor.\n    gate:\n      choices: [publish, shelve]\n"
        "      owner: '@lee'\n      message: Publish newsletter 12?\n      resolution_messages:\n"
        "        publish: Going out.\n        shelve: Kept for edits.\n"
        "      timeout_seconds: 7200\n      on_expiry: settle_default\n"
        "      default_choice: shelve\n"
        "      reminder_seconds: 1800\n      reminder_max: 4\n"
    )
    spec, diagnostics = load_string(one(body))
    step = spec.step("s")
    assert step.gate == Gate(
        choices=("publish", "shelve"),
        choices_source="gate",
        message="Publish newsletter 12?",
        owner="@lee",
        resolution_messages={"publish": "Going out.", "shelve": "Kept for edits."},
        timeout_seconds=7200,
        on_expiry="settle_default",
        default_choice="shelve",
        reminder_seconds=1800,
        reminder_max=4,
    )
    assert (step.display, step.prompt, step.instructions) == (
        "{{ x }}",
        "Publish it?",
        "Ask the editor.",
    )
    assert diagnostics == []


def test_abort_on_expiry_needs_no_default() -> None:
    body = "    trust: human_confirmed\n    gate: {timeout_seconds: 5, on_expiry: abort}\n"
    gate = load_string(one(body))[0].step("s").gate
    assert gate is not None and (gate.on_expiry, gate.default_choice) == ("abort", None)


# Settings Realm accepts with a warning: reported, and without effect.
DIAGNOSED: list[tuple[str, str, str, int]] = [
    ("    gate: {choices: [a]}\n", "gate_inert", "steps.s.gate", 8),
    (
        "    trust: human_confirmed\n    gate: {on_expiry: abort}\n",
        "gate_expiry_inert",
        "steps.s.gate.on_expiry",
        9,
    ),
    (
        "    trust: human_confirmed\n    gate: {default_choice: approve}\n",
        "gate_default_inert",
        "steps.s.gate.default_choice",
        9,
    ),
    (
        "    trust: human_confirmed\n    gate: {timeout_seconds: 60, reminder_seconds: 90}\n",
        "gate_reminder_inert",
        "steps.s.gate.reminder_seconds",
        9,
    ),
    (
        "    trust: human_confirmed\n    gate: {choises: [a]}\n",
        "unknown_gate_key",
        "steps.s.gate.choises",
        9,
    ),
    (
        "    trust: human_confirmed\n    gate: {choices: ship}\n",
        "gate_choices_ignored",
        "steps.s.gate.choices",
        9,
    ),
    ("    retry: {jitter: 1}\n", "unknown_retry_key", "steps.s.retry.jitter", 8),
    (
        "    idempotent: true\n    timeout_seconds: 5\n    retry: {on_timeout: true}\n",
        "on_timeout_single_attempt",
        "steps.s.retry.on_timeout",
        10,
    ),
    ("    handler: h\n    config: {a: 1}\n", "", "", 0),
    ("    retry: {max_attempts: 2}\n", "retry_default_timeout", "steps.s.retry", 8),
]


@pytest.mark.parametrize(("body", "code", "path", "line"), DIAGNOSED)
def test_diagnostics(body: str, code: str, path: str, line: int) -> None:
    _, diagnostics = load_string(one(body))
    found = [(d.code, d.path, d.line) for d in diagnostics]
    assert found[:1] == ([(code, path, line)] if code else [])


def test_an_unknown_validation_exhaustion_key_is_reported_not_refused() -> None:
    """loader-diagnostics.md: UNKNOWN_VALIDATION_EXHAUSTION_KEY is a warning in Realm."""
    body = "    validation_exhaustion: {threshold: 2, limit: 3}\n"
    spec, diagnostics = load_string(one(body, kind="agent"))
    assert [(d.code, d.path) for d in diagnostics] == [
        ("unknown_validation_exhaustion_key", "steps.s.validation_exhaustion.limit")
    ]
    exhaustion = spec.step("s").exhaustion
    assert exhaustion is not None and exhaustion.threshold == 2


def test_inert_gate_settings_have_no_effect() -> None:
    body = "    trust: human_confirmed\n    gate: {on_expiry: abort, default_choice: approve}\n"
    gate = load_string(one(body))[0].step("s").gate
    assert gate is not None and (gate.on_expiry, gate.default_choice) == (None, None)
    spec, _ = load_string(one("    gate: {choices: [a]}\n"))
    assert spec.step("s").gate is None


@pytest.mark.parametrize(
    ("body", "kind", "code", "path"),
    [
        ("    retry: {max_attempts: 2, jitter: 1}\n", "auto", "unknown_retry_key", "jitter"),
        ("    config: {a: 1}\n", "agent", "inert_field", "config"),
        ("    retry: {max_attempts: 2}\n", "agent", "inert_field", "retry"),
        ("    prompt: p\n    abort_unless: run.x\n", "guard", "inert_field", "prompt"),
        (
            "    output_schema: {type: object}\n    validation_exhaustion: {default_output: {}}\n",
            "agent",
            "default_output_inert",
            "default_output",
        ),
        (
            "    input_schema: {type: object}\n    output_schema: {type: object}\n",
            "agent",
            "two_schemas",
            "s",
        ),
    ],
)
def test_more_diagnostics(body: str, kind: str, code: str, path: str) -> None:
    if kind == "guard":  # a guard needs a condition it can parse
        body = "    prompt: p\n    abort_unless: run.params.x\n"
    _, diagnostics = load_string(one(body, kind))
    assert any(d.code == code and d.path.endswith(path) for d in diagnostics), diagnostics


def test_retry_block() -> None:
    body = (
        "    handler: fetch\n    timeout_seconds: 30\n    idempotent: true\n    retry:\n"
        "      max_attempts: 3\n      backoff: exponential\n      base_delay_ms: 1000\n"
        "      max_delay_ms: 5000\n      on_timeout: true\n      total_timeout_seconds: 120\n"
    )
    spec, diagnostics = load_string(one(body))
    assert spec.step("s").retry == Retry(3, "exponential", 1000, 5000, True, 120)
    assert diagnostics == []


def test_agent_steps_always_have_an_exhaustion_budget() -> None:
    spec, _ = load_string(one("", "agent"))
    assert spec.step("s").exhaustion == ValidationExhaustion(6, "fail", None)
    body = (
        "    output_schema:\n      type: object\n      required: [category]\n"
        "      properties:\n        category: {type: string, enum: [billing, other]}\n"
        "    validation_exhaustion:\n      threshold: 2\n      mode: default\n"
        "      default_output: {category: other}\n"
    )
    spec, _ = load_string(one(body, "agent"))
    assert spec.step("s").exhaustion == ValidationExhaustion(2, "default", {"category": "other"})


def test_validate_payload_lists_violations_like_ajv() -> None:
    schema = Schema(
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["title"],
            "properties": {"title": {"type": "string", "minLength": 4}, "n": {"default": 3}},
        }
    )
    assert validate_payload(schema, {"title": "long enough"}) == []
    short = validate_payload(schema, {"title": "abc"})
    assert [v.as_ajv() for v in short] == [
        {
            "instancePath": "/title",
            "schemaPath": "#/properties/title/minLength",
            "keyword": "minLength",
            "params": {"limit": 4},
            "message": "must NOT have fewer than 4 characters",
        }
    ]
    missing = validate_payload(schema, {"x": 1})
    assert [(v.keyword, v.instance_path) for v in missing] == [
        ("additionalProperties", ""),
        ("required", ""),
    ]
    assert missing[0].params == {"additionalProperty": "x"}
    assert missing[1].params == {"missingProperty": "title"}
    assert [str(v) for v in missing] == [
        "(root) must NOT have additional properties",
        "(root) must have required property 'title'",
    ]
    assert str(short[0]) == "/title must NOT have fewer than 4 characters"
    assert validate_payload(None, "anything") == []


def test_default_is_never_applied() -> None:
    schema = Schema({"type": "object", "properties": {"n": {"type": "integer", "default": 3}}})
    value: dict[str, object] = {}
    assert validate_payload(schema, value) == []
    assert value == {}


@pytest.mark.parametrize(
    ("document", "refused"),
    [
        ({"type": "string", "format": "date"}, "/format"),
        ({"properties": {"a": {"format": "email"}}}, "/properties/a/format"),
        ({"items": [{"format": "uri"}]}, "/items/0/format"),
        ({"anyOf": [{"type": "null"}, {"format": "uuid"}]}, "/anyOf/1/format"),
        ({"definitions": {"d": {"not": {"format": "ipv4"}}}}, "/definitions/d/not/format"),
        ({"properties": {"format": {"type": "string"}}}, None),  # a property named format
        ({"enum": [{"format": "x"}]}, None),  # data, not a schema
        ({"type": "strin"}, "valid draft-07"),
        ({"$ref": "https://example.com/s.json"}, "/$ref"),
        ({"definitions": {"a": {"type": "string"}}, "items": {"$ref": "#/definitions/a"}}, None),
        ("object", "mapping"),
        (True, None),
    ],
)
def test_check_schema(document: object, refused: str | None) -> None:
    why = check_schema(document)
    if refused is None:
        assert why is None
    else:
        assert why is not None and refused in why


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        ({"type": "string"}, 1, "must be string"),
        ({"type": ["string", "null"]}, 1, "must be string,null"),
        ({"enum": ["a", "b"]}, "c", "must be equal to one of the allowed values"),
        ({"const": "a"}, "c", "must be equal to constant"),
        ({"pattern": "^CUST-[0-9]{4}$"}, "x", 'must match pattern "^CUST-[0-9]{4}$"'),
        ({"minimum": 1}, 0, "must be >= 1"),
        ({"maximum": 1}, 2, "must be <= 1"),
        ({"exclusiveMinimum": 1}, 1, "must be > 1"),
        ({"minItems": 1}, [], "must NOT have fewer than 1 items"),
        ({"maxLength": 2}, "abc", "must NOT have more than 2 characters"),
        ({"multipleOf": 2}, 3, "must be multiple of 2"),
        ({"uniqueItems": True}, [1, 1], "must NOT have duplicate items"),
        ({"not": {"type": "string"}}, "a", "should not be valid"),
    ],
)
def test_violations_use_ajv_words(schema: dict[str, object], value: object, message: str) -> None:
    (violation,) = validate_payload(Schema(schema), value)
    assert message in violation.message
