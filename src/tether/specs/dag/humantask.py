"""`action: human.task` steps: the `with:` block and its flat, typed form (Dagu specs 008, 031).

A form is an object of scalar properties (string, integer, number, boolean); a property's
missing `type` is inferred from its `enum` / `oneOf` values. Objects and arrays are refused.
"""

from __future__ import annotations

import math
import re
from typing import Final, cast

import yaml

from tether.specs import patterns
from tether.specs.dag.model import Form, FormProperty, HumanTask, PushBack, Scalar, ScalarType
from tether.specs.dag.nodes import At, Fields, boolean, integer, items, nonblank, plain, string
from tether.specs.scalar_forms import SCALAR_TYPES

PROPERTY_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def parse_human_task(node: yaml.Node, at: At) -> tuple[HumanTask, At | None]:
    """`with: {prompt, form?, push_back?: {rewind_to, form?}}`; returns the `rewind_to` place."""
    fields = Fields(node, at)
    prompt = fields.take("prompt") or at.fail("a human task needs `with.prompt`")
    form = fields.take("form")
    push = fields.take("push_back", "pushBack")
    fields.finish()
    push_back = None
    rewind_at = None
    if push:
        push_fields = Fields(*push)
        rewind = push_fields.take("rewind_to", "rewindTo") or push[1].fail("needs `rewind_to`")
        feedback = push_fields.take("form")
        push_fields.finish()
        push_back = PushBack(
            string(*rewind), parse_form(*feedback, feedback_form=True) if feedback else None
        )
        rewind_at = rewind[1]
    task = HumanTask(nonblank(*prompt), parse_form(*form) if form else None, push_back)
    return task, rewind_at


def parse_form(node: yaml.Node, at: At, *, feedback_form: bool = False) -> Form:
    """A flat object form; `feedback_form` forces `additionalProperties` false (push-back)."""
    fields = Fields(node, at)
    kind = fields.take("type") or at.fail("a form needs `type: object`")
    if string(*kind) != "object":
        kind[1].fail("a form's type must be `object`")
    title = fields.take("title")
    description = fields.take("description")
    props = fields.take("properties")
    required = fields.take("required")
    extra = fields.take("additionalProperties", "additional_properties")
    fields.finish()
    properties = _properties(*props) if props else ()
    names = [p.name for p in properties]
    req: tuple[str, ...] = ()
    if required:
        req = tuple(string(n, a) for n, a in items(*required))
        if len(set(req)) != len(req):
            required[1].fail("required names must be unique")
        if missing := [r for r in req if r not in names]:
            required[1].fail(f"required names not declared in properties: {missing}")
    return Form(
        properties=properties,
        required=req,
        additional_properties=False if feedback_form or not extra else boolean(*extra),
        title=string(*title) if title else None,
        description=string(*description) if description else None,
    )


def _properties(node: yaml.Node, at: At) -> tuple[FormProperty, ...]:
    fields = Fields(node, at)
    out = []
    for name in fields.remaining():
        prop_node, prop_at = fields.take(name) or at.fail("unreachable")
        if not PROPERTY_NAME.match(name):
            prop_at.fail(f"property name must match {PROPERTY_NAME.pattern}")
        out.append(_property(name, prop_node, prop_at))
    return tuple(out)


def _property(name: str, node: yaml.Node, at: At) -> FormProperty:
    f = Fields(node, at)
    kind, title, desc, default = (
        f.take("type"),
        f.take("title"),
        f.take("description"),
        f.take("default"),
    )
    enum, one_of = f.take("enum"), f.take("oneOf", "one_of")
    minimum, maximum = f.take("minimum"), f.take("maximum")
    min_len, max_len = f.take("minLength", "min_length"), f.take("maxLength", "max_length")
    pattern = f.take("pattern")
    f.finish()
    enum_values = tuple(_scalar(n, a) for n, a in items(*enum)) if enum else ()
    consts = _one_of(*one_of) if one_of else ()
    choices = enum_values or consts
    if kind:
        scalar_type = string(*kind)
        if scalar_type not in SCALAR_TYPES:
            kind[1].fail(
                f"must be one of {', '.join(SCALAR_TYPES)} (objects and arrays are refused)"
            )
    elif choices:
        scalar_type = _infer(choices, at)
    else:
        at.fail("a property needs `type`, `enum` or `oneOf`")
    if pattern and (why := patterns.check(string(*pattern))) is not None:
        pattern[1].fail(f"invalid pattern (RE2 syntax): {why}")
    return FormProperty(
        name=name,
        type=cast(ScalarType, scalar_type),
        title=string(*title) if title else None,
        description=string(*desc) if desc else None,
        default=_scalar(*default) if default else None,
        enum=enum_values,
        one_of=consts,
        minimum=_number(*minimum) if minimum else None,
        maximum=_number(*maximum) if maximum else None,
        min_length=integer(*min_len, minimum=0) if min_len else None,
        max_length=integer(*max_len, minimum=0) if max_len else None,
        pattern=string(*pattern) if pattern else None,
    )


def _one_of(node: yaml.Node, at: At) -> tuple[Scalar, ...]:
    consts = []
    for item, item_at in items(node, at):
        f = Fields(item, item_at)
        const = f.take("const") or item_at.fail("a oneOf option needs `const`")
        for key in ("type", "title", "description"):
            f.take(key)
        f.finish()
        consts.append(_scalar(*const))
    return tuple(consts)


def _scalar(node: yaml.Node, at: At) -> Scalar:
    value = plain(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(value, float) and not math.isfinite(value):
        at.fail("must be a finite number")
    if not isinstance(value, str | int | float | bool):
        at.fail("must be a string, number or boolean")
    return value


def _number(node: yaml.Node, at: At) -> float:
    value = _scalar(node, at)
    if isinstance(value, bool) or not isinstance(value, int | float):
        at.fail("must be a number")
    return float(value)


def _infer(choices: tuple[Scalar, ...], at: At) -> str:
    if all(isinstance(c, bool) for c in choices):
        return "boolean"
    if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        return "integer"
    if all(isinstance(c, int | float) and not isinstance(c, bool) for c in choices):
        return "number"
    if all(isinstance(c, str) for c in choices):
        return "string"
    return at.fail("cannot infer a type from mixed enum/oneOf values; add `type`")
