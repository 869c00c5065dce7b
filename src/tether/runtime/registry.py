"""Registration: `app = tether.App()`, `@app.workflow(...)`, `@app.update(...)`. A workflow is
`async def wf(ctx, input: Model) -> Out`; pydantic validates its input at the edge (before
anything is stored) and publishes the JSON Schemas the tool surfaces show."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal, TypeVar, get_type_hints, overload

from pydantic import TypeAdapter, ValidationError

from tether.runtime import admission
from tether.runtime.dag.catalog import DagCatalog
from tether.runtime.errors import InvalidInput, UpdateNotFound, WorkflowNotFound
from tether.runtime.inputs import ExtraInput, input_type_for
from tether.runtime.policy import NO_RETRY, RetryPolicy, seconds
from tether.runtime.realm.catalog import ProtocolCatalog

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,99}$")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _check_name(name: str, what: str, fn: object = None) -> str:
    if not _NAME.match(name) and getattr(fn, "realm_id", None) != name:  # a protocol's own id
        raise ValueError(
            f"invalid {what} name {name!r}: a letter, then letters, digits, '_' or '-' (max 100)"
        )
    return name


def _param_and_return(fn: Callable[..., Any], what: str) -> tuple[Any, Any]:
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{what} {fn.__qualname__} must be an async function")
    params = list(inspect.signature(fn).parameters.values())
    if len(params) not in (1, 2):
        raise TypeError(f"{what} {fn.__qualname__} must take (ctx) or (ctx, input)")
    try:
        hints = get_type_hints(fn)
    except NameError as exc:
        raise TypeError(
            f"cannot resolve the annotations of {what} {fn.__qualname__}: {exc}; "
            "define its input and output models at module level"
        ) from exc
    input_type = hints.get(params[1].name, Any) if len(params) == 2 else type(None)
    return input_type, hints.get("return", Any)


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False)
    ]


@dataclass(frozen=True)
class UpdateDef:
    name: str
    workflow: str
    fn: Callable[..., Awaitable[Any]]
    input_adapter: TypeAdapter[Any]
    output_adapter: TypeAdapter[Any]
    validator: Callable[[Any], Any] | None
    mcp: bool
    description: str | None

    def input_schema(self) -> dict[str, Any]:
        return self.input_adapter.json_schema()

    def parse_input(self, raw: Any) -> Any:
        """Validate raw JSON input. Raises InvalidInput."""
        try:
            return self.input_adapter.validate_python(raw)
        except ValidationError as exc:
            raise InvalidInput(f"invalid input for update {self.name!r}", _errors(exc)) from exc


@dataclass(frozen=True)
class WorkflowDef:
    name: str
    fn: Callable[..., Awaitable[Any]]
    takes_input: bool
    input_adapter: TypeAdapter[Any]
    output_adapter: TypeAdapter[Any]
    mcp: bool
    description: str | None
    retention_s: int | None
    retry: RetryPolicy
    timeout_s: float | None
    tool: str | None = None
    task_support: Literal["optional", "required"] = "optional"
    tasks: bool = False
    updates: dict[str, UpdateDef] = field(default_factory=dict)
    rules: admission.WorkflowRules = admission.NO_RULES  # queue, labels, schedules

    def input_schema(self) -> dict[str, Any]:
        return self.input_adapter.json_schema()

    def output_schema(self) -> dict[str, Any]:
        return self.output_adapter.json_schema()

    def parse_input(self, raw: Any) -> Any:
        """Validate raw JSON input into the workflow's input type. Raises InvalidInput."""
        try:
            return self.input_adapter.validate_python(raw)
        except ValidationError as exc:
            raise InvalidInput(f"invalid input for workflow {self.name!r}", _errors(exc)) from exc

    def dump_input(self, value: Any) -> Any:
        return self.input_adapter.dump_python(value, mode="json")

    def deadline(self) -> datetime | None:
        """When a run started now must have ended (None: no timeout)."""
        if self.timeout_s is None:
            return None
        return datetime.now(UTC) + timedelta(seconds=self.timeout_s)

    def update(self, name: str) -> UpdateDef:
        try:
            return self.updates[name]
        except KeyError:
            raise UpdateNotFound(f"workflow {self.name!r} has no update {name!r}") from None


@dataclass(frozen=True)
class ToolDef:
    """A plain (not durable) MCP tool: `async def fn(ctx, args: Model) -> Any`. The MCP layer
    decides what `ctx` offers; the runtime only keeps the registration."""

    name: str
    fn: Callable[..., Awaitable[Any]]
    takes_input: bool
    input_adapter: TypeAdapter[Any]
    description: str | None
    title: str | None
    annotations: dict[str, Any] | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None

    def schema(self) -> dict[str, Any]:
        if self.input_schema is not None:
            return self.input_schema
        schema = self.input_adapter.json_schema()
        return schema if schema.get("type") == "object" else {"type": "object"}


@dataclass(frozen=True)
class PromptDef:
    """An MCP prompt: `async def fn(ctx, arguments: dict[str, str]) -> dict` returning a
    GetPromptResult body (`messages`, optional `description`)."""

    name: str
    fn: Callable[..., Awaitable[dict[str, Any]]]
    description: str | None
    arguments: tuple[dict[str, Any], ...]
    completions: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class ResourceDef:
    """An MCP resource (or URI template with `{name}` parts): `async def fn(ctx, uri,
    **parts) -> list[dict]` returning its contents."""

    uri: str
    name: str
    fn: Callable[..., Awaitable[list[dict[str, Any]]]]
    description: str | None
    mime_type: str | None
    template: bool


class App(DagCatalog, ProtocolCatalog):
    """Workflows, DAGs (DagCatalog), step protocols (ProtocolCatalog); `tether serve mod:app`."""

    def __init__(self, name: str = "tether") -> None:
        self.name = name
        self._workflows: dict[str, WorkflowDef] = {}
        DagCatalog.__init__(self)
        ProtocolCatalog.__init__(self)
        self._tools: dict[str, ToolDef] = {}
        self.prompts: dict[str, PromptDef] = {}
        self.resources: dict[str, ResourceDef] = {}

    @property
    def tools(self) -> Mapping[str, ToolDef]:
        return MappingProxyType(self._tools)

    def prompt(
        self,
        name: str,
        *,
        description: str | None = None,
        arguments: list[dict[str, Any]] | None = None,
        completions: dict[str, list[str]] | None = None,
    ) -> Callable[[F], F]:
        """Register an MCP prompt."""

        def register(func: F) -> F:
            if name in self.prompts:
                raise ValueError(f"prompt {name!r} is registered twice")
            self.prompts[name] = PromptDef(
                name,
                func,
                description or inspect.getdoc(func),
                tuple(arguments or ()),
                {k: tuple(v) for k, v in (completions or {}).items()},
            )
            return func

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register an MCP resource; a URI with `{part}` placeholders is a template."""

        def register(func: F) -> F:
            if uri in self.resources:
                raise ValueError(f"resource {uri!r} is registered twice")
            self.resources[uri] = ResourceDef(
                uri,
                name or func.__name__,
                func,
                description or inspect.getdoc(func),
                mime_type,
                "{" in uri,
            )
            return func

        return register

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a plain MCP tool (runs inline, not durable) — for quick answers that need
        no durability; long work belongs in a workflow."""

        def register(func: F) -> F:
            tool_name = _check_name(name or func.__name__, "tool")
            if tool_name in self._tools:
                raise ValueError(f"tool {tool_name!r} is registered twice")
            input_type, _ = _param_and_return(func, "tool")
            self._tools[tool_name] = ToolDef(
                name=tool_name,
                fn=func,
                takes_input=input_type is not type(None),
                input_adapter=TypeAdapter(input_type if input_type is not type(None) else Any),
                description=description or inspect.getdoc(func),
                title=title,
                annotations=annotations,
                input_schema=input_schema,
                output_schema=output_schema,
            )
            return func

        return register

    @property
    def workflows(self) -> Mapping[str, WorkflowDef]:
        return MappingProxyType(self._workflows)

    def get(self, name: str) -> WorkflowDef:
        """Raises WorkflowNotFound."""
        try:
            return self._workflows[name]
        except KeyError:
            raise WorkflowNotFound(f"no workflow named {name!r}") from None

    @overload
    def workflow(self, fn: F) -> F: ...

    @overload
    def workflow(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        mcp: bool = False,
        description: str | None = None,
        retention: timedelta | float | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | float | None = None,
        tool: bool | str = False,
        task_support: Literal["optional", "required"] = "optional",
        tasks: bool = False,
        extra_input: ExtraInput = "forbid",
        queue: str | None = None,
        max_active_runs: int | None = None,
        labels: Sequence[str] | Mapping[str, str] | None = None,
        schedule: str | Sequence[str] | None = None,
    ) -> Callable[[F], F]: ...

    def workflow(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        mcp: bool = False,
        description: str | None = None,
        retention: timedelta | float | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | float | None = None,
        tool: bool | str = False,
        task_support: Literal["optional", "required"] = "optional",
        tasks: bool = False,
        extra_input: ExtraInput = "forbid",
        queue: str | None = None,
        max_active_runs: int | None = None,
        labels: Sequence[str] | Mapping[str, str] | None = None,
        schedule: str | Sequence[str] | None = None,
    ) -> Any:
        """Register `async def wf(ctx, input: Model) -> Out` under `name` (default: its name).

        `retention`: row lifetime after the end (None: forever); `retry`: run-level retry;
        `timeout`: still live this long after it started → `timed_out`. `mcp`: serve the
        generated tool set (start_, _status, _watch, signal_, answer_, _update_); `tool`: also
        the workflow itself as one tool (a task with the Tasks extension, else it runs to the
        end; `task_support="required"` refuses that with -32021); `tasks`: its runs as tasks
        without tools (`mcp`/`tool` imply it). `extra_input`: an undeclared input field is
        refused (`"forbid"`, the default, on every surface) or `"ignore"`d (a model's own
        `model_config["extra"]` wins). `queue`, `max_active_runs`, `labels`, `schedule`:
        admission (docs/admission.md)."""

        def register(func: F) -> F:
            wf_name = _check_name(name or func.__name__, "workflow", func)
            if wf_name in self._workflows:
                raise ValueError(f"workflow {wf_name!r} is registered twice")
            input_type, output_type = _param_and_return(func, "workflow")
            retention_s = seconds(retention)
            rules = admission.workflow_options(wf_name, queue, max_active_runs, labels, schedule)
            self._workflows[wf_name] = WorkflowDef(
                name=wf_name,
                fn=func,
                takes_input=input_type is not type(None),
                input_adapter=TypeAdapter(input_type_for(input_type, extra_input)),
                output_adapter=TypeAdapter(output_type),
                mcp=mcp,
                description=description or inspect.getdoc(func),
                retention_s=int(retention_s) if retention_s is not None else None,
                retry=retry or NO_RETRY,
                timeout_s=seconds(timeout),
                tool=(wf_name if tool is True else (tool or None)),
                task_support=task_support,
                tasks=tasks,
                rules=rules,
            )
            return func

        return register(fn) if fn is not None else register

    def update(
        self,
        workflow: str,
        name: str | None = None,
        *,
        validator: Callable[[Any], Any] | None = None,
        mcp: bool = False,
        description: str | None = None,
    ) -> Callable[[F], F]:
        """Register `async def handler(ctx, input: Model) -> Out` as an update of `workflow`.

        `validator(input)` runs before admission: raise ValueError (or return a string
        reason) to refuse the update without touching the run.
        """

        def register(func: F) -> F:
            wf = self.get(workflow)
            up_name = _check_name(name or func.__name__, "update")
            if up_name in wf.updates:
                raise ValueError(f"update {up_name!r} of {workflow!r} is registered twice")
            input_type, output_type = _param_and_return(func, "update")
            wf.updates[up_name] = UpdateDef(
                name=up_name,
                workflow=workflow,
                fn=func,
                input_adapter=TypeAdapter(input_type),
                output_adapter=TypeAdapter(output_type),
                validator=validator,
                mcp=mcp,
                description=description or inspect.getdoc(func),
            )
            return func

        return register
