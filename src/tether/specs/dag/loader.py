"""Load a DAG spec from a file or a string into a `DagSpec`; refuse anything outside the subset.

The subset (Dagu's YAML): name, description, params, env, type (graph | chain), steps,
handlerOn (success / failure / exit), queue, maxActiveRuns, labels / tags, schedule; plus
Tether's `mcp: true` and the `run: <action>` step kind. Both of Dagu's spellings of a
two-word field are accepted (`handlerOn` / `handler_on`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from pathlib import Path
from types import MappingProxyType
from typing import Final, cast

import yaml

from tether.specs import yaml_nodes
from tether.specs.dag.errors import InvalidReference, InvalidValue, InvalidYaml, LimitExceeded
from tether.specs.dag.graph import resolve
from tether.specs.dag.model import DagSpec, DagType, HandlerEvent, Label, Step
from tether.specs.dag.nodes import (
    At,
    Fields,
    boolean,
    compose,
    integer,
    items,
    nonblank,
    string,
    strings,
)
from tether.specs.dag.policies import parse_preconditions
from tether.specs.dag.steps import Draft, parse_step
from tether.specs.dag.values import parse_env, parse_labels, parse_params, parse_schedule
from tether.specs.errors import INLINE, SpecLimitExceeded
from tether.specs.limits import MAX_STEPS_SETTING, SpecLimits, over_steps
from tether.specs.yaml_nodes import STR

DAG_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]+$")
DAG_NAME_MAX: Final = 40  # characters (Dagu's limit)
_EVENTS: Final[tuple[HandlerEvent, ...]] = ("success", "failure", "exit")
_HINTS: Final = {
    "timeoutSec": "DAG-level timeoutSec is outside the subset; set it per step",
    "dotenv": "outside the subset",
    "secrets": "outside the subset",
}


def load_file(path: str | Path) -> DagSpec:
    """Parse and validate the DAG spec in `path`; its name defaults to the file's stem.

    Raises:
        DagSpecError: the spec is invalid (the error names the field, file and line).
        OSError: the file cannot be read.
    """
    file = Path(path)
    return load_string(file.read_text(encoding="utf-8"), file=str(file), default_name=file.stem)


def load_string(
    text: str,
    *,
    file: str = INLINE,
    default_name: str | None = None,
    limits: SpecLimits | None = None,
) -> DagSpec:
    """Parse and validate a DAG spec held in a string (inline specs); same model as a file.

    `limits`: for a caller-supplied spec, checked before the work they bound (the size before
    the text is read, depth and aliases while it is composed, the step count before any
    step is parsed).

    Raises:
        DagSpecError: the spec is invalid (the error names the field and line);
            LimitExceeded when it is over one of `limits`.
    """
    try:
        root = compose(text, file, limits)
    except InvalidYaml:
        _refuse_a_document(text, file, default_name, limits)  # names a field outside the subset
        raise
    return _parse(root, file, default_name, limits)


def check_size(text: str, limits: SpecLimits, *, file: str = INLINE) -> None:
    """Refuse a spec whose text is over `limits.max_bytes`, the first check `load_string`
    makes, without reading it (see `yaml_nodes.check_size`): a caller that hands the text
    elsewhere to be loaded can refuse an oversized one before it goes.

    Raises:
        LimitExceeded: naming the setting and its value.
    """
    yaml_nodes.check_size(text, file, limits, LimitExceeded)


def _refuse_a_document(
    text: str, file: str, default_name: str | None, limits: SpecLimits | None
) -> None:
    """In a file of several YAML documents (Dagu's local sub-DAGs, outside the subset), raise
    the first field outside the subset that a document holds (UnknownField), so the refusal
    names it; otherwise the caller refuses the several documents."""
    try:
        docs = yaml_nodes.compose_documents(text, file, loader=yaml.SafeLoader, limits=limits)
    except (yaml.YAMLError, UnicodeEncodeError, SpecLimitExceeded, RecursionError):
        return
    for doc in docs:
        if isinstance(doc, yaml.MappingNode):
            with contextlib.suppress(InvalidValue, InvalidReference):
                _parse(doc, file, default_name or "document", limits)


def _parse(
    root: yaml.MappingNode, file: str, default_name: str | None, limits: SpecLimits | None
) -> DagSpec:
    fields = Fields(root, At(file, root.start_mark.line + 1, "", ""))
    name = _name(fields, default_name)
    description = fields.take("description")
    params = fields.take("params")
    env = fields.take("env")
    dag_type = _type(fields)
    steps_f = fields.take("steps") or fields.at.fail("a DAG needs `steps`", InvalidValue)
    handlers_f = fields.take("handlerOn", "handler_on")
    queue = fields.take("queue")
    max_runs = fields.take("maxActiveRuns", "max_active_runs")
    labels = _labels(fields)
    schedule = fields.take("schedule")
    mcp = fields.take("mcp")
    workdir, shell = fields.take("working_dir", "workingDir"), fields.take("shell")
    pre = fields.take("preconditions", "precondition")
    fields.finish(_HINTS)
    entries = _step_nodes(*steps_f)
    if limits is not None and (why := over_steps(len(entries), limits)):
        raise LimitExceeded(
            why,
            setting=MAX_STEPS_SETTING,
            maximum=limits.max_steps,
            field="steps",
            path="steps",
            file=file,
            line=steps_f[1].line,
        )
    taken = {k for n, _, _ in entries for k in _written_names(n)}
    drafts = [
        dataclasses.replace(parse_step(n, a, index=i, taken=taken), group=g)
        for i, (n, a, g) in enumerate(entries)
    ]
    if not drafts:
        steps_f[1].fail("a DAG needs at least one step")
    if dag_type is None:  # Dagu 1.17-2.9 default to a chain; 2.10 to a graph (see docs)
        grouped = len({d.group for d in drafts}) < len(drafts)
        dag_type = "chain" if grouped or not any(d.explicit_depends for d in drafts) else "graph"
    steps, order = resolve(drafts, dag_type)
    return DagSpec(
        name=name,
        file=file,
        steps=steps,
        order=order,
        type=dag_type,
        description=string(*description) if description else None,
        params=parse_params(*params) if params else (),
        env=parse_env(*env) if env else (),
        handlers=_handlers(*handlers_f) if handlers_f else MappingProxyType({}),
        queue=nonblank(*queue) if queue else None,
        max_active_runs=_max_runs(*max_runs) if max_runs else None,
        labels=labels,
        schedules=parse_schedule(*schedule) if schedule else (),
        mcp=boolean(*mcp) if mcp else False,
        preconditions=parse_preconditions(*pre) if pre else (),
        working_dir=nonblank(*workdir) if workdir else None,
        shell=" ".join(strings(*shell)) if shell else None,
    )


def dag_name_problem(name: str) -> str | None:
    """Why `name` cannot name a DAG, else None: Dagu's rule, letters, digits, `_`, `.` and
    `-`, at most 40 characters, and neither `.` nor `..` (the name is also a file and a
    directory name)."""
    if not DAG_NAME.match(name) or name in (".", ".."):
        return f"a DAG name must match {DAG_NAME.pattern} and be neither '.' nor '..'"
    if len(name) > DAG_NAME_MAX:
        return f"a DAG name has at most {DAG_NAME_MAX} characters"
    return None


def _name(fields: Fields, default: str | None) -> str:
    taken = fields.take("name")
    if taken is None:
        if default is None:
            fields.at.fail("an inline DAG needs `name`")
        if problem := dag_name_problem(default):
            at = dataclasses.replace(fields.at, path="name", field="name")
            at.fail(f"{problem}; the DAG takes the name {default!r} by default")
        return default
    name = nonblank(*taken)
    if problem := dag_name_problem(name):
        taken[1].fail(problem)
    return name


def _type(fields: Fields) -> DagType | None:
    taken = fields.take("type")
    if taken is None:
        return None
    kind = string(*taken)
    if kind not in ("graph", "chain"):
        taken[1].fail("type must be `graph` or `chain`")
    return cast(DagType, kind)


def _labels(fields: Fields) -> tuple[Label, ...]:
    """`labels` and its older alias `tags`, merged (both may be present), duplicates dropped."""
    labels: list[Label] = []
    for key in ("labels", "tags"):
        if taken := fields.take(key):
            labels.extend(parse_labels(*taken))
    return tuple(dict.fromkeys(labels))


def _max_runs(node: yaml.Node, at: At) -> int | None:
    """A positive limit; 0 or -1 mean no limit (None)."""
    value = integer(node, at, minimum=-1)
    return value if value > 0 else None


def _handlers(node: yaml.Node, at: At) -> MappingProxyType[HandlerEvent, Step]:
    fields = Fields(node, at)
    out: dict[HandlerEvent, Step] = {}
    for event in _EVENTS:
        if taken := fields.take(event):
            draft: Draft = parse_step(_named(taken[0], event), taken[1], handler=True)
            out[event] = draft.step
    fields.finish({"cancel": "outside the subset", "abort": "outside the subset"})
    return MappingProxyType(out)


def _step_nodes(node: yaml.Node, at: At) -> list[tuple[yaml.Node, At, int]]:
    """`steps` as Dagu accepts them, each with its chain group: a list of step mappings or
    command strings (a string is `{command: it}`), where a nested list is a group of steps
    that run side by side in a chain; or a mapping of name → step (older Dagu; the key is
    the step's name)."""
    if isinstance(node, yaml.MappingNode):
        fields = Fields(node, at)
        return [
            (_with_key(value, "name", name), place, i)
            for i, (name, value, place) in enumerate(fields.drain())
        ]
    out = []
    for group, (item, item_at) in enumerate(items(node, at)):
        members = items(item, item_at) if isinstance(item, yaml.SequenceNode) else [(item, item_at)]
        if not members:
            item_at.fail("a group of steps must not be empty")
        for member, member_at in members:
            if isinstance(member, yaml.SequenceNode):
                member_at.fail("a group of steps holds steps, not lists")
            if isinstance(member, yaml.ScalarNode) and member.tag == STR:
                member = _mapping_of("command", member)
            out.append((member, member_at, group))
    return out


def _written_names(node: yaml.Node) -> list[str]:
    if not isinstance(node, yaml.MappingNode):
        return []
    return [
        str(v.value).strip()
        for k, v in node.value
        if isinstance(k, yaml.ScalarNode) and k.value in ("name", "id")
        if isinstance(v, yaml.ScalarNode)
    ]


def _mapping_of(key: str, value: yaml.Node) -> yaml.MappingNode:
    return yaml.MappingNode(
        "tag:yaml.org,2002:map",
        [(yaml.ScalarNode(STR, key, value.start_mark, value.end_mark), value)],
        value.start_mark,
        value.end_mark,
    )


def _with_key(node: yaml.Node, key: str, text: str) -> yaml.Node:
    """`node` (a step mapping) with `key: text` set, replacing a `key` written in it."""
    if not isinstance(node, yaml.MappingNode):
        return node  # refused as "must be a mapping" by the step parser
    mark = node.start_mark
    pair = (yaml.ScalarNode(STR, key, mark, mark), yaml.ScalarNode(STR, text, mark, mark))
    rest = [
        (k, v) for k, v in node.value if not (isinstance(k, yaml.ScalarNode) and k.value == key)
    ]
    return yaml.MappingNode(node.tag, [pair, *rest], node.start_mark, node.end_mark)


def _named(node: yaml.Node, event: str) -> yaml.Node:
    """A handler step without a name is called `on<Event>` (Dagu's naming)."""
    if isinstance(node, yaml.MappingNode) and not _written_names(node):
        return _with_key(node, "name", f"on{event.capitalize()}")
    return node


def shell_steps(dag: DagSpec) -> tuple[str, ...]:
    """Names of the steps and handlers that run shell (`command` / `script`, or a precondition
    that runs a command), in file order.

    A surface that accepts inline specs refuses a non-empty answer unless the operator set
    `TETHER_INLINE_SHELL`, naming these steps.
    """
    handlers = [s for s in dag.handlers.values() if s.runs_shell]
    return tuple(s.name for s in [*dag.steps, *handlers] if s.runs_shell)
