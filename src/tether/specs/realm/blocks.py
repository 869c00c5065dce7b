"""The nested blocks of a step: schemas, `gate`, `retry` and `validation_exhaustion`.

A setting that is accepted with a warning (an unknown `gate` or `retry` key, an `on_expiry`
without a time limit, …) is reported as a `Diagnostic` and has no effect.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, cast

import yaml

from tether.specs.realm.model import (
    Backoff,
    ChoicesSource,
    Diagnostic,
    ExhaustionMode,
    Gate,
    OnExpiry,
    Retry,
    ValidationExhaustion,
)
from tether.specs.realm.nodes import (
    At,
    Fields,
    boolean,
    choice,
    items,
    nonblank,
    number,
    plain,
    positive,
    string,
)
from tether.specs.realm.schemas import Schema, check_schema, validate_payload

Report = list[Diagnostic]
GATE_KEYS: Final = (
    "choices", "message", "owner", "resolution_messages", "timeout_seconds", "on_expiry",
    "default_choice", "reminder_seconds", "reminder_max",
)  # fmt: skip
RETRY_KEYS: Final = (
    "max_attempts", "backoff", "base_delay_ms", "max_delay_ms", "on_timeout",
    "total_timeout_seconds",
)  # fmt: skip


def note(report: Report, code: str, message: str, at: At) -> None:
    """Record a diagnostic at `at`'s path and line."""
    report.append(Diagnostic(code, message, at.path, at.line))


def schema(node: yaml.Node, at: At) -> Schema:
    """A draft-07 schema block, checked (no `format`)."""
    document = plain(node)
    if (why := check_schema(document)) is not None:
        at.fail(why)
    return Schema(cast("dict[str, object] | bool", document))


def _unknown(fields: Fields, report: Report, block: str, known: tuple[str, ...]) -> None:
    """An unknown key in `gate`, `retry` or `validation_exhaustion` is ignored, with a
    diagnostic naming the keys the block has."""
    for name, _, at in fields.drain():
        note(
            report,
            f"unknown_{block}_key",
            f"{block} has no key {name!r}, so it is ignored (its keys: {', '.join(known)})",
            at,
        )


def parse_gate(node: yaml.Node, at: At, input_schema: Schema | None, report: Report) -> Gate:
    """A `gate` block of a gated step (pass a null node for a gated step without one)."""
    fields = Fields(node, at) if not _null(node) else None
    get = fields.take if fields is not None else (lambda *_: None)
    choices, source = _choices(get("choices"), input_schema, report)
    timeout_f, expiry_f, default_f = get("timeout_seconds"), get("on_expiry"), get("default_choice")
    timeout = positive(*timeout_f) if timeout_f else None
    on_expiry = cast(OnExpiry, choice(*expiry_f, ("settle_default", "abort"))) if expiry_f else None
    default = string(*default_f) if default_f else None
    if on_expiry == "settle_default":
        if default is None:
            (expiry_f or (node, at))[1].fail(
                "'gate.on_expiry: settle_default' needs a 'gate.default_choice' to settle with"
            )
        if default not in choices:
            cast(tuple[yaml.Node, At], default_f)[1].fail(
                f"'gate.default_choice' {default!r} is not among the gate's choices "
                f"({', '.join(choices)})"
            )
    elif default_f:
        note(report, "gate_default_inert", "'gate.default_choice' has no effect unless "
             "'gate.on_expiry' is settle_default", default_f[1])  # fmt: skip
        default = None
    if expiry_f and timeout is None:
        note(report, "gate_expiry_inert", "'gate.on_expiry' has no effect without "
             "'gate.timeout_seconds'", expiry_f[1])  # fmt: skip
        on_expiry, default = None, None
    reminder_f, reminder_max_f = get("reminder_seconds"), get("reminder_max")
    reminder = positive(*reminder_f) if reminder_f else None
    if reminder_f and reminder is not None and timeout is not None and reminder >= timeout:
        note(report, "gate_reminder_inert", f"'gate.reminder_seconds' ({reminder}) is not "
             f"shorter than 'gate.timeout_seconds' ({timeout}): no reminder would come in time",
             reminder_f[1])  # fmt: skip
    message_f, owner_f, resolution_f = get("message"), get("owner"), get("resolution_messages")
    if fields is not None:
        _unknown(fields, report, "gate", GATE_KEYS)
    return Gate(
        choices=choices,
        choices_source=source,
        message=string(*message_f) if message_f else None,
        owner=string(*owner_f) if owner_f else None,
        resolution_messages=_messages(*resolution_f) if resolution_f else MappingProxyType({}),
        timeout_seconds=timeout,
        on_expiry=on_expiry,
        default_choice=default,
        reminder_seconds=reminder,
        reminder_max=positive(*reminder_max_f) if reminder_max_f else 3,
    )


def _null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _choices(
    taken: tuple[yaml.Node, At] | None, input_schema: Schema | None, report: Report
) -> tuple[tuple[str, ...], ChoicesSource]:
    if taken is not None:
        node, at = taken
        if isinstance(node, yaml.SequenceNode):
            choices = tuple(nonblank(n, a) for n, a in items(node, at))
            if not choices:
                at.fail("'gate.choices' must list at least one choice")
            if len(set(choices)) != len(choices):
                at.fail("'gate.choices' lists a choice twice")
            return choices, "gate"
        note(report, "gate_choices_ignored", "'gate.choices' must be a list; it is ignored", at)
    enum = _choice_enum(input_schema)
    if enum:
        return enum, "input_schema"
    return ("approve", "reject"), "default"


def _choice_enum(input_schema: Schema | None) -> tuple[str, ...]:
    """The choices a step's `input_schema` lists as a string enum under `properties.choice`."""
    doc = input_schema.document if input_schema is not None else None
    props = doc.get("properties") if isinstance(doc, dict) else None
    prop = props.get("choice") if isinstance(props, dict) else None
    enum = prop.get("enum") if isinstance(prop, dict) else None
    if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum):
        return tuple(enum)
    return ()


def _messages(node: yaml.Node, at: At) -> MappingProxyType[str, str]:
    fields = Fields(node, at)
    return MappingProxyType({name: string(v, a) for name, v, a in fields.drain()})


def parse_retry(node: yaml.Node, at: At, idempotent: bool, report: Report) -> Retry:
    """An `auto` step's `retry` block; `on_timeout: true` needs `idempotent: true`."""
    fields = Fields(node, at)
    attempts, backoff = fields.take("max_attempts"), fields.take("backoff")
    base, cap = fields.take("base_delay_ms"), fields.take("max_delay_ms")
    on_timeout_f, total = fields.take("on_timeout"), fields.take("total_timeout_seconds")
    on_timeout = boolean(*on_timeout_f) if on_timeout_f else False
    if on_timeout and not idempotent:
        cast(tuple[yaml.Node, At], on_timeout_f)[1].fail(
            "'retry.on_timeout: true' runs a timed-out attempt again, so the step must declare "
            "'idempotent: true'"
        )
    _unknown(fields, report, "retry", RETRY_KEYS)
    max_attempts = positive(*attempts) if attempts else 1
    if on_timeout and max_attempts == 1:  # nothing to retry into: a warning, not a refusal
        note(report, "on_timeout_single_attempt", "'retry.on_timeout: true' does nothing while "
             "'max_attempts' is 1: no attempt follows the first",
             cast(tuple[yaml.Node, At], on_timeout_f)[1])  # fmt: skip
    return Retry(
        max_attempts=max_attempts,
        backoff=cast(Backoff, choice(*backoff, ("fixed", "linear", "exponential")))
        if backoff
        else "fixed",
        base_delay_ms=number(*base, minimum=0) if base else 0,
        max_delay_ms=number(*cap, minimum=0) if cap else None,
        on_timeout=on_timeout,
        total_timeout_seconds=positive(*total) if total else None,
    )


def parse_exhaustion(
    node: yaml.Node, at: At, output_schema: Schema | None, report: Report
) -> ValidationExhaustion:
    """`validation_exhaustion`; `mode: default` needs `default_output` fitting `output_schema`."""
    fields = Fields(node, at)
    threshold, mode_f, default_f = (
        fields.take("threshold"), fields.take("mode"), fields.take("default_output")
    )  # fmt: skip
    # an unknown key is a warning, not a refusal
    _unknown(fields, report, "validation_exhaustion", ("threshold", "mode", "default_output"))
    mode = cast(ExhaustionMode, choice(*mode_f, ("fail", "default"))) if mode_f else "fail"
    default: object = None
    if mode == "default":
        if default_f is None:
            at.fail("'validation_exhaustion.mode: default' needs a 'default_output'")
        if output_schema is None:
            default_f[1].fail(
                "'default_output' is checked against 'output_schema', which the step does not "
                "declare"
            )
        default = plain(default_f[0])
        if violations := validate_payload(output_schema, default):
            default_f[1].fail(
                "'default_output' does not fit the step's 'output_schema': "
                + "; ".join(str(v) for v in violations)
            )
    elif default_f is not None:
        note(report, "default_output_inert",
             "'default_output' has no effect unless 'mode' is default", default_f[1])  # fmt: skip
    return ValidationExhaustion(
        threshold=positive(*threshold) if threshold else 6, mode=mode, default_output=default
    )
