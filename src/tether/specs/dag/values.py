"""Parsers for the DAG fields Dagu accepts in several shapes (params, env, labels, schedule …).

Each takes a YAML node and its place and returns model data, or refuses with the field's name
and line. The accepted variants are those Dagu's own DAG schema allows.
"""

from __future__ import annotations

import datetime
import re
import shlex
import zoneinfo
from typing import Final

import yaml
from cronsim import CronSim, CronSimError

from tether.specs.dag.commands import BACKTICK_COMMAND
from tether.specs.dag.model import EnvVar, Label, Param, Schedule
from tether.specs.dag.nodes import At, Fields, items, plain, string, strings
from tether.specs.dag.params import ParamRules, parse_rich

# a parameter as written: name (None: positional), default text, place, and a rich entry's rules
_Raw = tuple[str | None, str, At] | tuple[str | None, str, At, ParamRules]
_MARK: Final = re.compile("\0([0-9]+)\0")  # a backtick command set aside by `_words`

NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A label's key (at most 63 characters) and value (at most 255), for a DAG's `labels` and a
#: workflow's `labels=` alike (runtime/admission.py).
LABEL_KEY: Final = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$")
LABEL_VALUE: Final = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_./-]{0,254}$")
# robfig/cron's descriptors (Dagu's cron library), as five-field expressions
_DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _scalar_text(node: yaml.Node, at: At) -> str:
    """A scalar as text (numbers/booleans as written; null as ''); Dagu stringifies these."""
    if isinstance(node, yaml.ScalarNode):
        return "" if node.tag.endswith(":null") else str(node.value)
    return at.fail("must be a scalar value")


def parse_params(node: yaml.Node, at: At) -> tuple[Param, ...]:
    """`params`: a string (`"A B NAME=val"`), a list of strings / `{NAME: val}` / `{name, default}`
    entries, or a `{NAME: val}` map. Every parameter gets a 1-based position."""
    raw: list[_Raw] = []
    if isinstance(node, yaml.ScalarNode):
        raw = [(*_split_assignment(word), at) for word in _words(string(node, at), at)]
    elif isinstance(node, yaml.SequenceNode):
        for item, item_at in items(node, at):
            raw.append(_param_entry(item, item_at))
    else:
        fields = Fields(node, at)
        for key in fields.remaining():
            value_node, value_at = fields.take(key) or at.fail("unreachable")
            raw.append((key, _scalar_text(value_node, value_at), value_at))
    return _numbered(raw)


def _words(text: str, at: At) -> list[str]:
    """Shell-like words, where a backtick command (`` `date +%F` ``) stays in one word with
    its spaces, as in Dagu's parameter strings."""
    commands = [m[0] for m in BACKTICK_COMMAND.finditer(text)]
    spans = iter(range(len(commands)))
    marked = BACKTICK_COMMAND.sub(lambda _: f"\0{next(spans)}\0", text)
    try:
        words = shlex.split(marked)
    except ValueError as exc:
        return at.fail(f"cannot split parameters: {exc}")
    return [_MARK.sub(lambda m: commands[int(m[1])], word) for word in words]


def _split_assignment(word: str) -> tuple[str | None, str]:
    name, eq, value = word.partition("=")
    return (name, value) if eq and NAME_RE.match(name) else (None, word)


def _param_entry(node: yaml.Node, at: At) -> _Raw:
    if isinstance(node, yaml.ScalarNode):
        return (*_split_assignment(_scalar_text(node, at)), at)
    fields = Fields(node, at)
    if fields.has("name"):  # a rich entry (Dagu v2): typed, with constraints and `eval`
        name_node, name_at = fields.take("name") or at.fail("unreachable")
        name = string(name_node, name_at)
        default, rules = parse_rich(fields, name_at)
        return (name, default, name_at) if rules is None else (name, default, name_at, rules)
    keys = list(fields.remaining())
    if len(keys) != 1:
        at.fail("a parameter entry must be one `NAME: value` pair")
    value_node, value_at = fields.take(keys[0]) or at.fail("unreachable")
    return keys[0], _scalar_text(value_node, value_at), value_at


def _numbered(raw: list[_Raw]) -> tuple[Param, ...]:
    seen: set[str] = set()
    params = []
    for position, (name, default, at, *rules) in enumerate(raw, start=1):
        if name is not None:
            if not NAME_RE.match(name):
                at.fail(f"parameter name {name!r} must match {NAME_RE.pattern}")
            if name in seen:
                at.fail(f"parameter {name!r} is declared twice")
            seen.add(name)
        params.append(Param(position, name, default, rules[0] if rules else None))
    return tuple(params)


def parse_env(node: yaml.Node, at: At) -> tuple[EnvVar, ...]:
    """`env`: a `{KEY: value}` map, or a list of `KEY=value` strings and `{KEY: value}` maps."""
    pairs: list[tuple[str, str, At]] = []
    if isinstance(node, yaml.SequenceNode):
        for item, item_at in items(node, at):
            if isinstance(item, yaml.ScalarNode):
                name, eq, value = string(item, item_at).partition("=")
                if not eq:
                    item_at.fail("an env entry must be `KEY=value`")
                pairs.append((name, value, item_at))
            else:
                pairs.extend(_env_map(item, item_at))
    else:
        pairs.extend(_env_map(node, at))
    for name, _, name_at in pairs:
        if not NAME_RE.match(name):
            name_at.fail(f"env name {name!r} must match {NAME_RE.pattern}")
    return tuple(EnvVar(name, value) for name, value, _ in pairs)


def _env_map(node: yaml.Node, at: At) -> list[tuple[str, str, At]]:
    fields = Fields(node, at)
    out = []
    for key in fields.remaining():
        value_node, value_at = fields.take(key) or at.fail("unreachable")
        out.append((key, _scalar_text(value_node, value_at), value_at))
    return out


def parse_label(text: str) -> Label:
    """One label, `key` or `key=value`: keys lowercased, both checked as Dagu does.

    Raises:
        ValueError: the key or value is malformed or too long.
    """
    key, eq, value = text.strip().partition("=")
    key = key.strip().lower()
    if not LABEL_KEY.match(key):
        raise ValueError(f"label key {key!r} must match {LABEL_KEY.pattern} (≤ 63 characters)")
    if not eq:
        return Label(key)
    value = value.strip()
    if not LABEL_VALUE.match(value):
        raise ValueError(f"label value {value!r} must match {LABEL_VALUE.pattern} (≤ 255)")
    return Label(key, value)


def parse_labels(node: yaml.Node, at: At) -> list[Label]:
    """`labels`/`tags`: a comma- or space-separated string, a map, or a list of strings/pairs."""
    texts: list[tuple[str, At]] = []
    if isinstance(node, yaml.ScalarNode):
        text = string(node, at)
        sep = "," if "," in text else None
        texts = [(t, at) for t in text.split(sep) if t.strip()]
    elif isinstance(node, yaml.SequenceNode):
        for item, item_at in items(node, at):
            if isinstance(item, yaml.ScalarNode):
                texts.append((string(item, item_at), item_at))
            else:
                texts.extend((f"{k}={v}", a) for k, v, a in _env_map(item, item_at))
    else:
        texts = [(f"{k}={v}", a) for k, v, a in _env_map(node, at)]
    labels = []
    for text, text_at in texts:
        try:
            labels.append(parse_label(text))
        except ValueError as exc:
            text_at.fail(str(exc))
    return labels


def cron_of(expression: str) -> str:
    """The five-field cron form of `expression` (descriptors such as `@daily` expanded); a
    `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix is kept as `CRON_TZ=<zone> ` (the runtime's
    scheduler reads the fields in that zone).

    Raises:
        ValueError: not a valid five-field cron expression or descriptor.
    """
    zone, text = "", expression.strip()
    head, _, rest = text.partition(" ")
    if head.startswith(("CRON_TZ=", "TZ=")):  # robfig/cron's time zone prefix
        zone, text = head.partition("=")[2], rest.strip()
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {zone!r} in {expression!r}") from exc
    cron = _DESCRIPTORS.get(text.lower(), text)
    try:
        CronSim(cron, datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
    except CronSimError as exc:
        raise ValueError(f"invalid cron expression {expression!r}: {exc}") from exc
    return f"CRON_TZ={zone} {cron}" if zone else cron


def parse_schedule(node: yaml.Node, at: At) -> tuple[Schedule, ...]:
    """`schedule`: one cron expression or a list of them (start schedules only)."""
    if isinstance(node, yaml.MappingNode):
        at.fail("only cron start schedules (a string or a list) are supported")
    out = []
    for index, text in enumerate(strings(node, at)):
        try:
            out.append(Schedule(text, cron_of(text)))
        except ValueError as exc:
            place = (
                at.child(node.value[index], at.field, index=index)
                if isinstance(node, yaml.SequenceNode)
                else at
            )
            place.fail(str(exc))
    return tuple(out)


def json_value(node: yaml.Node, at: At) -> object:
    """Plain JSON-compatible data (for `with:`); YAML-only types (dates, sets) are refused."""
    value = plain(node)
    if not _is_json(value):
        at.fail("must be JSON-compatible data (strings, numbers, booleans, null, lists, maps)")
    return value


def _is_json(value: object) -> bool:
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False
