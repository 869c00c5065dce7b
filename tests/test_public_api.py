"""The public API: the API reference (docs/api) renders exactly the names the public packages
export, and each rendered object's docstring documents its parameters, results and errors.

The pages are read as mkdocstrings reads them (`::: identifier` and its options), and the
docstrings as its Python handler parses them (griffe, Google style, with the options in
mkdocs.yml), so what is checked here is what the reference shows.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import griffe
import yaml

import tether

REPO = Path(__file__).resolve().parents[1]
API_PAGES = REPO / "docs/api"
# The packages whose `__all__` is public (tether/__init__.py's docstring states the rule).
PUBLIC_PACKAGES = ("tether", "tether.testing", "tether.client")
_DIRECTIVE = re.compile(r"^::: (\S+)\s*$")
_WAIT_SPEC = {"answer_schema", "channel", "descriptor", "extra", "keeps_keys", "kind", "parse"}
# Members of public classes that only Tether's own layers use: not on the API pages, so they
# may change. Every other member without a leading underscore is rendered, or documented in
# its class's docstring; a new one must be put on a page or here.
INTERNAL_MEMBERS: dict[str, set[str]] = {
    "tether.App": {
        "create_protocol",
        "dag_env_passthrough",  # set from TETHER_DAG_ENV_PASSTHROUGH by the server
        "dags",
        "functions",
        "get",
        "inline_dag",
        "pass_dag_environment",
        "prompts",
        "protocols",
        "bind_remotes",  # the server binds the settings' remotes when it starts
        "check_dag_remotes",
        "remote_clients",
        "remotes",
        "remove_dag",
        "use_remotes",
        "resources",
        "tools",
        "unreadable_protocols",
        "watch_dags",
        "workflows",
        "notifications",  # the channels declared, read by the runtime when it starts
    },
    "tether.Context": {
        "cancel_requested",
        "first_failure_seq",
        "earlier_writes_committed",
        "note_cancel",
        "park_event_id",
        "take_buffer",
        "wait_any",  # the protocol interpreter's parallel agent steps
    },
    "tether.Exposure": {"tool_name"},
    # what the sender asks of a channel (who gets a message; its secrets, read at start)
    "tether.WebhookChannel": {"recipients", "resolve", "type"},
    "tether.SlackChannel": {"recipients", "resolve", "type"},
    "tether.EmailChannel": {"recipients", "resolve", "type"},
    "tether.ToolContext": {"extras", "principal", "route"},
    "tether.RetryPolicy": {"allows_another", "delay"},
    "tether.Rejected": {"as_error"},  # the stored error of a run a rejection ends
    # how a remote call records its ending (runtime/remote/errors.py)
    **{
        f"tether.{name}": {"extra"}
        for name in (
            "RemoteError",
            "RemoteToolError",
            "RemoteProtocolError",
            "RemoteRejected",
            "RemoteTaskLost",
            "RemoteCancelled",
            "RemoteTimeout",
            "RemoteUnavailable",
            "UnknownRemote",
        )
    },
    "tether.Signal": _WAIT_SPEC,
    "tether.Approval": _WAIT_SPEC,
    "tether.HumanTask": _WAIT_SPEC,
    "tether.AgentStep": _WAIT_SPEC,
    "tether.Update": _WAIT_SPEC,
}


@dataclass(frozen=True)
class Directive:
    page: str
    identifier: str
    options: dict[str, Any] = field(default_factory=dict)


def directives() -> list[Directive]:
    """Every `::: identifier` block of the API pages, with its options (mkdocstrings' syntax:
    the block is the indented YAML under the line)."""
    found = []
    for page in sorted(API_PAGES.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            match = _DIRECTIVE.match(line)
            if match is None:
                continue
            block = []
            for following in lines[i + 1 :]:
                if following.strip() and not following.startswith(" "):
                    break
                block.append(following)
            config = yaml.safe_load(textwrap.dedent("\n".join(block))) or {}
            found.append(Directive(page.name, match.group(1), config.get("options") or {}))
    return found


def handler_config() -> dict[str, Any]:
    """The Python handler's configuration in mkdocs.yml."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            python: dict[str, Any] = plugin["mkdocstrings"]["handlers"]["python"]
            return python
    raise AssertionError("mkdocs.yml does not configure mkdocstrings")


@functools.cache
def load(package: str) -> griffe.Module:
    config = handler_config()
    options = config["options"]
    loader = griffe.GriffeLoader(
        search_paths=[str(REPO / path) for path in config["paths"]],
        docstring_parser=griffe.Parser(options["docstring_style"]),
        docstring_options=options.get("docstring_options", {}),
    )
    module = loader.load(package)
    assert isinstance(module, griffe.Module)
    loader.resolve_aliases(implicit=False, external=False)
    return module


def target(obj: griffe.Object | griffe.Alias) -> griffe.Object:
    """The object itself, for an alias (a re-export, an inherited member)."""
    return obj.final_target if isinstance(obj, griffe.Alias) else obj


def sections(obj: griffe.Object | griffe.Alias) -> dict[str, list[Any]]:
    """The docstring's sections by kind ("parameters", "returns", "raises", "attributes")."""
    out: dict[str, list[Any]] = {}
    if obj.docstring is not None:
        for section in obj.docstring.parsed:
            if isinstance(section.value, list):
                out.setdefault(section.kind.value, []).extend(section.value)
    return out


def raised_in(obj: griffe.Object | griffe.Alias) -> set[str]:
    """The exception classes a function raises by name in its body (nested functions, such
    as a decorator's, included), less the BaseException-only signals that unwind a run."""
    defined = target(obj)
    module = importlib.import_module(defined.module.path)
    runtime: Any = module
    for part in defined.path.removeprefix(defined.module.path + ".").split("."):
        runtime = getattr(runtime, part)
    runtime = inspect.unwrap(getattr(runtime, "fget", runtime))
    try:
        source = inspect.getsource(runtime)
    except OSError:  # generated code (a dataclass's __init__) raises nothing of ours
        return set()
    names: set[str] = set()
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = exc.attr if isinstance(exc, ast.Attribute) else getattr(exc, "id", None)
            value = getattr(module, name, getattr(builtins, name, None)) if name else None
            if name and isinstance(value, type) and issubclass(value, Exception):
                names.add(name)
    return names


def documented_names(items: list[Any]) -> set[str]:
    return {str(item.name).lstrip("*") for item in items}


def raises_named(items: list[Any]) -> set[str]:
    return {str(item.annotation).rsplit(".", 1)[-1] for item in items}


def check_function(where: str, obj: griffe.Object | griffe.Alias) -> Iterator[str]:
    fn = target(obj)
    assert isinstance(fn, griffe.Function), where
    if not fn.docstring:
        yield f"{where}: no docstring"
        return
    if "property" in fn.labels:
        return  # its docstring says what it is; it takes nothing and raises nothing
    found = sections(fn)
    params = {p.name for p in fn.parameters if p.name not in ("self", "cls")}
    documented = documented_names(found.get("parameters", []))
    for name in sorted(params - documented):
        yield f"{where}: parameter {name!r} is not documented"
    for name in sorted(documented - params):
        yield f"{where}: documents {name!r}, which it does not take"
    returns = str(fn.returns)
    if returns not in ("None", "NoReturn") and not found.get("returns"):
        yield f"{where}: returns {returns} but has no Returns section"
    for name in sorted(raised_in(fn) - raises_named(found.get("raises", []))):
        yield f"{where}: raises {name} but its Raises section does not say so"


def check_class(
    where: str, cls: griffe.Object | griffe.Alias, options: dict[str, Any]
) -> Iterator[str]:
    if not cls.docstring:
        yield f"{where}: no docstring"
        return
    found = sections(cls)
    if options.get("merge_init_into_class", True):
        init = cls.all_members.get("__init__")
        init_fn = target(init) if init is not None else None
        params = set()
        if isinstance(init_fn, griffe.Function):
            params = {p.name for p in init_fn.parameters if p.name != "self"}
        documented = documented_names(found.get("parameters", []) + found.get("attributes", []))
        for name in sorted(params - documented):
            yield f"{where}: constructor parameter {name!r} is not documented"
        raised: set[str] = set()
        for name in ("__init__", "__post_init__"):
            if name in cls.members and cls.members[name].is_function:
                raised |= raised_in(cls.members[name])
        for name in sorted(raised - raises_named(found.get("raises", []))):
            yield f"{where}: its constructor raises {name} but Raises does not say so"
    members = options.get("members")
    pool = cls.all_members if options.get("inherited_members") else cls.members
    if members is None:
        members = [n for n in pool if not n.startswith("_")]
    for name in members or []:
        member = pool.get(name)
        if member is None:
            yield f"{where}: the page lists {name!r}, which it does not render"
        elif member.is_function:
            yield from check_function(f"{where}.{name}", member)
        elif not member.docstring:
            yield f"{where}.{name}: no docstring"


def check(where: str, obj: griffe.Object | griffe.Alias, options: dict[str, Any]) -> Iterator[str]:
    if obj.is_module:
        if not obj.docstring:
            yield f"{where}: no docstring"
        for name in obj.exports or []:
            yield from check(f"{where}.{name}", obj[str(name)], {})
    elif obj.is_class:
        yield from check_class(where, obj, options)
    elif obj.is_function:
        yield from check_function(where, obj)
    elif not obj.docstring:
        yield f"{where}: no docstring"


def rendered(modules: dict[str, griffe.Module], identifier: str) -> griffe.Object | griffe.Alias:
    """The object a directive renders, looked up in the package that holds it."""
    package = max((p for p in modules if identifier.startswith(p)), key=len)
    path = identifier.removeprefix(package).lstrip(".")
    return modules[package][path] if path else modules[package]


def public_packages() -> list[str]:
    """The public packages that exist (the others are announced, not released)."""
    return [p for p in PUBLIC_PACKAGES if importlib.util.find_spec(p) is not None]


def test_the_api_pages_render_exactly_the_names_tether_exports() -> None:
    """Our choice: each name in `tether.__all__` has one directive on the API pages, and the
    pages render nothing else from `tether` itself."""
    listed = sorted(
        d.identifier.removeprefix("tether.")
        for d in directives()
        if d.identifier.startswith("tether.") and d.identifier not in PUBLIC_PACKAGES
    )
    assert listed == sorted(set(tether.__all__) - {"__version__"})


def test_every_public_package_has_its_api_page() -> None:
    """Our choice: `tether.testing` and `tether.client` each have a page that renders the
    package (its `__all__`) once the package exists."""
    rendered = {d.identifier for d in directives()}
    for package in PUBLIC_PACKAGES[1:]:
        assert (API_PAGES / f"{package.rsplit('.', 1)[-1]}.md").is_file()
        if package in public_packages():
            assert package in rendered, f"docs/api does not render {package}"


def test_every_rendered_object_documents_its_parameters_results_and_errors() -> None:
    """Our choice: every object the API pages render has a docstring; a function's documents
    each parameter, what it returns (unless None) and each exception it raises by name; a
    class's documents what its constructor takes and raises."""
    modules = {package: load(package) for package in public_packages()}
    problems: list[str] = []
    for d in directives():
        problems += check(d.identifier, rendered(modules, d.identifier), d.options)
    assert problems == []


def test_every_member_of_a_rendered_class_is_documented_or_declared_internal() -> None:
    """Our choice: a member of a public class without a leading underscore is on the API
    pages (or in its class's docstring), or named in INTERNAL_MEMBERS; none is left to
    chance."""
    modules = {package: load(package) for package in public_packages()}
    undecided = {}
    for d in directives():
        obj = rendered(modules, d.identifier)
        if not obj.is_class:
            continue
        found = sections(obj)
        shown = set(d.options.get("members") or []) | documented_names(
            found.get("parameters", []) + found.get("attributes", [])
        )
        if d.options.get("members") is None:
            shown |= set(obj.all_members if d.options.get("inherited_members") else obj.members)
        left = {n for n in obj.all_members if not n.startswith("_")} - shown
        left -= INTERNAL_MEMBERS.get(d.identifier, set())
        if left:
            undecided[d.identifier] = sorted(left)
    assert undecided == {}
    assert set(INTERNAL_MEMBERS) <= {d.identifier for d in directives()}


def test_the_checks_catch_an_undocumented_parameter_result_and_error() -> None:
    """Our choice: the docstring check reports a function whose docstring omits its
    parameter, its result and the error it raises, one problem each."""
    module = griffe.load("tether.runtime.waits", search_paths=[str(REPO / "src")])
    fn = module["check_name"]
    fn.docstring = griffe.Docstring("Summary only.", parent=fn, parser=griffe.Parser.google)
    assert list(check_function("check_name", fn)) == [
        "check_name: parameter 'name' is not documented",
        "check_name: returns str but has no Returns section",
        "check_name: raises ValueError but its Raises section does not say so",
    ]
