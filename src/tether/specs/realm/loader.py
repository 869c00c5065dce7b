"""Load a protocol workflow from a file or a string; refuse anything outside the subset.

Top level: `id`, `name`, `version` (a number), `steps` (a map) are required; `description`,
`params_schema`, `protocol{quick_start, rules}`, `x-` keys (carried, never read) and
`extensions` (checked, reported, not loaded: handlers are functions registered with
`@app.function`) are optional. Realm's other top-level fields are refused by name, as is any
unknown key.
Returns the spec and the diagnostics: what Realm accepts with a warning.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Final

import yaml

from tether.specs.errors import INLINE
from tether.specs.realm.blocks import Report, note, schema
from tether.specs.realm.errors import InvalidValue, UnknownField
from tether.specs.realm.graph import topological
from tether.specs.realm.model import Diagnostic, Protocol, Step, WorkflowSpec
from tether.specs.realm.nodes import (
    At,
    Fields,
    compose,
    items,
    nonblank,
    number,
    plain,
    string,
    strings,
)
from tether.specs.realm.steps import check_id, parse_step

OUTSIDE: Final = {
    "services": "services and adapters; use auto steps with a `handler`",
    "mcp_servers": "`realm agent` tool servers",
    "templates": "step templates; write the steps out",
    "profiles_dir": "agent profiles",
    "workflow_context": "prompt context files",
    "context_wrapper": "prompt context files",
    "trigger": "webhook triggers; start runs with `start_run`",
}


def load_file(path: str | Path) -> tuple[WorkflowSpec, list[Diagnostic]]:
    """Parse and validate the protocol workflow in `path`.

    Raises:
        RealmSpecError: the workflow is invalid (the error names the field, file and line).
        OSError: the file cannot be read.
    """
    file = Path(path)
    return load_string(file.read_text(encoding="utf-8"), file=str(file))


def load_string(text: str, *, file: str = INLINE) -> tuple[WorkflowSpec, list[Diagnostic]]:
    """Parse and validate a protocol workflow held in a string (`create_workflow`).

    Raises:
        RealmSpecError: the workflow is invalid (the error names the field and line).
    """
    report: Report = []
    root = compose(text, file)
    fields = Fields(root, At(file, root.start_mark.line + 1, "", ""))
    for name, _, at in fields.drain(lambda n: n in OUTSIDE)[:1]:
        at.fail(f"field {name!r} is outside Tether's subset of Realm's format "
                f"({OUTSIDE[name]})", UnknownField)  # fmt: skip
    if extensions_f := fields.take("extensions"):
        _code_modules(*extensions_f, report)
    extensions = _extensions(fields, report)
    workflow_id = _id(fields)
    name_f = fields.take("name") or fields.at.fail("missing required field 'name'")
    version = fields.take("version") or fields.at.fail("missing required field 'version'")
    description = fields.take("description")
    params = fields.take("params_schema")
    protocol = fields.take("protocol")
    steps_f = fields.take("steps") or fields.at.fail("missing required field 'steps'")
    fields.finish()
    steps = _steps(*steps_f, report)
    return WorkflowSpec(
        id=workflow_id,
        name=nonblank(*name_f),
        version=number(*version),
        steps=steps,
        order=topological(steps, file),
        finalizers=tuple(s.id for s in steps.values() if s.execution == "finalizer"),
        description=string(*description) if description else None,
        params_schema=schema(*params) if params else None,
        protocol=_protocol(*protocol) if protocol else Protocol(),
        extensions=extensions,
        file=file,
        source=text,
    ), report


def _id(fields: Fields) -> str:
    taken = fields.take("id") or fields.at.fail("missing required field 'id'")
    value = nonblank(*taken)
    if "/" in value or value != value.strip():
        taken[1].fail("a workflow id must not contain '/' or surrounding spaces")
    return value


def _extensions(fields: Fields, report: Report) -> MappingProxyType[str, object]:
    """Top-level `x-` keys: carried, never read (Realm names them); `x-realm-` is reserved."""
    out: dict[str, object] = {}
    for name, node, at in fields.drain(lambda n: n.startswith("x-")):
        if name.startswith("x-realm-"):
            at.fail(f"{name!r}: names starting with 'x-realm-' are reserved", UnknownField)
        out[name] = plain(node)
        note(report, "extension_key", f"extension key {name!r} carried, never read", at)
    return MappingProxyType(out)


def _code_modules(node: yaml.Node, at: At, report: Report) -> None:
    """`extensions`: Realm's code modules. Tether's handlers are functions registered with
    `@app.function`, so the paths are checked (relative, as Realm requires) and reported, never
    loaded."""
    for path in strings(node, at):
        if not path.strip() or path.startswith("/"):
            at.fail(f"'extensions' entry {path!r} must be a path relative to the workflow")
    note(report, "extensions_not_loaded", "'extensions' are not loaded: Tether runs the "
         "functions registered with @app.function under the names the steps give", at)  # fmt: skip


def _protocol(node: yaml.Node, at: At) -> Protocol:
    fields = Fields(node, at)
    quick, rules = fields.take("quick_start"), fields.take("rules")
    fields.finish()
    quick_start = string(*quick) if quick else None
    return Protocol(
        quick_start=quick_start or None,  # an empty string is ignored
        rules=tuple(string(n, a) for n, a in items(*rules)) if rules else None,
    )


def _steps(node: yaml.Node, at: At, report: Report) -> MappingProxyType[str, Step]:
    if not isinstance(node, yaml.MappingNode):
        at.fail("'steps' must be a map from step name to step")
    fields = Fields(node, at)
    ids = frozenset(fields.remaining())
    if not ids:
        at.fail("a workflow needs at least one step", InvalidValue)
    out: dict[str, Step] = {}
    for step_id, step_node, step_at in fields.drain():
        check_id(step_id, step_at)
        out[step_id] = parse_step(step_id, step_node, step_at, ids, report)
    return MappingProxyType(out)
