"""Registration: `app = tether.App()`, `@app.workflow(...)`, `@app.update(...)`,
`@app.function(...)`. A workflow is `async def wf(ctx, input: Model) -> Out`; pydantic validates
its input at the edge (before anything is stored) and publishes the JSON Schemas the tool
surfaces show. How a workflow is served over MCP is one `Exposure` (runtime/exposure.py); the
functions declarative steps call are one registry (runtime/functions.py). The App's other kinds
of registration are mixed in from their own modules: DAGs (runtime/dag/catalog.py), protocols
(runtime/realm/catalog.py), remotes (runtime/remote/config.py), and plain tools, prompts and
resources (runtime/mcp_primitives.py)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final, TypeVar, overload

from pydantic import TypeAdapter, ValidationError

from tether.runtime import admission, clock
from tether.runtime.dag.catalog import DagCatalog
from tether.runtime.errors import InvalidInput, UpdateNotFound, WorkflowNotFound
from tether.runtime.exposure import NOT_EXPOSED, Exposure
from tether.runtime.functions import Functions
from tether.runtime.inputs import ExtraInput, input_type_for
from tether.runtime.mcp_primitives import PrimitiveCatalog
from tether.runtime.notify.channels import EVERY_WORKFLOW, Channel, Declared
from tether.runtime.policy import NO_RETRY, RetryPolicy, seconds
from tether.runtime.realm.catalog import ProtocolCatalog
from tether.runtime.registration_rules import check_name, param_and_return
from tether.runtime.remote.config import RemoteCatalog

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
U = TypeVar("U", bound=Callable[..., Any])  # a user function: sync or async
#: `App.workflow`'s keywords that `expose=Exposure(...)` replaced, and the option each became.
_EXPOSURE_OPTIONS: Final = MappingProxyType(
    {"mcp": "tool_set", "tool": "tool", "task_support": "task_support", "tasks": "tasks"}
)


def _replaced_keywords(given: Mapping[str, Any]) -> str:
    """Why `App.workflow` refuses keywords: the ones `expose=Exposure(...)` replaced, with the
    spelling that says the same; any other is a keyword it never took."""
    unknown = sorted(set(given) - set(_EXPOSURE_OPTIONS))
    if unknown:
        return f"App.workflow() got an unexpected keyword argument {unknown[0]!r}"
    options = ", ".join(f"{_EXPOSURE_OPTIONS[k]}={v!r}" for k, v in given.items())
    said = ", ".join(f"{k}=" for k in given)
    return f"App.workflow({said}...) is now spelled expose=tether.Exposure({options})"


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
    takes_input: bool = True

    def input_schema(self) -> dict[str, Any]:
        return self.input_adapter.json_schema()

    async def call(self, ctx: Any, raw: Any) -> Any:
        """Run the handler on the raw input: `(ctx, input)`, or `(ctx)` for a handler that
        takes no input. Raises InvalidInput, and whatever the handler raises."""
        value = self.parse_input(raw)
        return await (self.fn(ctx, value) if self.takes_input else self.fn(ctx))

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
    description: str | None
    retention_s: int | None
    retry: RetryPolicy
    timeout_s: float | None
    expose: Exposure = NOT_EXPOSED
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
        return clock.now() + timedelta(seconds=self.timeout_s)

    def update(self, name: str) -> UpdateDef:
        try:
            return self.updates[name]
        except KeyError:
            raise UpdateNotFound(f"workflow {self.name!r} has no update {name!r}") from None


class App(DagCatalog, ProtocolCatalog, RemoteCatalog, PrimitiveCatalog):
    """What a Tether server serves: workflows, updates, DAGs, protocols, plain MCP tools,
    prompts and resources, registered by name.

    Make one at module level and point the server at it: `tether serve module:app`. Every
    process that runs the app (`tether serve`, `tether worker`) must import the same
    registrations, since a run is resumed by the name it was started under.

    Example:
        ```python
        app = tether.App()

        @app.workflow(expose=tether.Exposure(tool_set=True))
        async def review(ctx: tether.Context, pr: PullRequest) -> Verdict: ...

        @app.function()
        def lint(path: str) -> dict[str, int]: ...  # `run: lint` in a DAG
        ```

    Args:
        name: The server's name, as MCP clients see it in `serverInfo`.

    Attributes:
        name: The server's name, as MCP clients see it in `serverInfo`.
        allow_create_workflow: Whether MCP clients may register protocols with the
            `create_workflow` tool (default False); see the Realm tools guide.
        max_created_workflows: How many workflows `create_workflow` may register in this
            process (default 1000); each one stays until the process ends.
    """

    def __init__(self, name: str = "tether") -> None:
        self.name = name
        self._workflows: dict[str, WorkflowDef] = {}
        self._functions = Functions()  # before the catalogs, which hand it to their runs
        DagCatalog.__init__(self)
        ProtocolCatalog.__init__(self)
        RemoteCatalog.__init__(self)
        PrimitiveCatalog.__init__(self)
        self.notifications = Declared()  # channels, and the workflows each hears of

    @property
    def functions(self) -> Functions:
        """The registry `function` fills (live: a function registered while the app is
        served is found by the next step that names it)."""
        return self._functions

    def function(self, name: str | None = None) -> Callable[[U], U]:
        """Register a Python function that declarative workflows call by name.

        A DAG step calls it with `run: <name>`, its `with:` values (JSON data) as keyword
        arguments; a protocol `auto` step calls it with `handler: <name>`, with one dict,
        `{"params", "steps", "config"}` (the step's input, the outputs of the steps completed
        so far, and its `config`). The return value is the step's output. The function may be
        sync (it runs in a worker thread, so it never holds the server's event loop) or
        `async`. Arguments that do not fit the parameters it declares fail the step without
        calling it. A step naming a function that is not registered fails naming the
        registered ones (a protocol step waits instead, until the server has it).

        `action` and `handler` are other spellings of this decorator, named after the two
        file formats; this is the one to use.

        Args:
            name: The function's name in DAG and protocol files (default: its `__name__`).

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            ValueError: A function of that name is already registered.
            TypeError: What it decorates is not callable, is a generator (sync or `async`),
                or its parameters cannot be read.
        """

        def register(fn: U) -> U:
            self._functions.register(fn, name)
            return fn

        return register

    def action(self, name: str | None = None) -> Callable[[U], U]:
        """The same decorator as [`function`][tether.App.function], under the name DAG files
        give the steps that call it (`run: <name>`); use `function`.

        Args:
            name: The function's name in DAG and protocol files (default: its `__name__`).

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            ValueError: A function of that name is already registered.
            TypeError: What it decorates is not callable, is a generator, or its parameters
                cannot be read.
        """
        return self.function(name)

    def handler(self, name: str | None = None) -> Callable[[U], U]:
        """The same decorator as [`function`][tether.App.function], under the name protocol
        files give it (`handler: <name>`); use `function`.

        Args:
            name: The function's name in DAG and protocol files (default: its `__name__`).

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            ValueError: A function of that name is already registered.
            TypeError: What it decorates is not callable, is a generator, or its parameters
                cannot be read.
        """
        return self.function(name)

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
        expose: Exposure | None = None,
        description: str | None = None,
        retention: timedelta | float | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | float | None = None,
        extra_input: ExtraInput = "forbid",
        queue: str | None = None,
        max_active_runs: int | None = None,
        labels: Sequence[str] | Mapping[str, str] | None = None,
        schedule: str | Sequence[str] | None = None,
        notify: Sequence[Channel] = (),
    ) -> Callable[[F], F]: ...

    def workflow(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        expose: Exposure | None = None,
        description: str | None = None,
        retention: timedelta | float | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | float | None = None,
        extra_input: ExtraInput = "forbid",
        queue: str | None = None,
        max_active_runs: int | None = None,
        labels: Sequence[str] | Mapping[str, str] | None = None,
        schedule: str | Sequence[str] | None = None,
        notify: Sequence[Channel] = (),
        **removed: Any,
    ) -> Any:
        """Register a workflow: `async def wf(ctx)` or `async def wf(ctx, input: Model) -> Out`.

        Use it bare (`@app.workflow`) or with options
        (`@app.workflow(expose=tether.Exposure(tool_set=True))`). The input
        is validated against its annotated type before a run is created, and the return
        value, typed by the return annotation, is the run's output. The function runs again
        from the top whenever the run is resumed, so it must make the same durable calls
        ([`Context`][tether.Context]) in the same order each time.

        Args:
            fn: The workflow function, when used as a bare decorator.
            name: The workflow's name (default: the function's name): a letter, then
                letters, digits, `_` or `-`, at most 100 characters.
            expose: How MCP clients reach it: its generated tool set, the workflow as one
                tool, its runs as tasks (an [`Exposure`][tether.Exposure]; default: not
                served over MCP).
            description: The tools' description (default: the function's docstring).
            retention: How long an ended run is kept (a `timedelta` or seconds; default:
                forever).
            retry: Run-level retry: when the workflow raises, it runs again and replays the
                calls recorded before the failure (default: no retry).
            timeout: A run still live this long after it started ends `timed_out` (a
                `timedelta` or seconds).
            extra_input: `"forbid"` (default) refuses an input field the model does not
                declare, on every surface; `"ignore"` drops it. A model that sets its own
                `model_config["extra"]` keeps it.
            queue: Runs wait in this admission queue (`TETHER_QUEUES` sets its limit).
            max_active_runs: At most this many runs of the workflow at once (an implicit
                queue of its own); not with `queue`.
            labels: Labels every run carries: `["team=data", "nightly"]` or a mapping.
            schedule: A cron expression (UTC, or a `CRON_TZ=<zone> ` prefix), or several:
                a run starts on each tick.
            notify: Channels told when a run of this workflow waits for an answer, when the
                wait is answered or expires, and when the run ends
                ([`WebhookChannel`][tether.WebhookChannel], ...; see also
                [`notify`][tether.App.notify]).
            **removed: Nothing: the keywords `mcp`, `tool`, `task_support` and `tasks` are
                refused, naming the `expose=Exposure(...)` that replaced them.

        Returns:
            With `fn`, the function itself (registered); without, a decorator that registers
            the function and returns it unchanged.

        Raises:
            ValueError: The name is invalid or already registered, or an admission option
                (`queue`, `max_active_runs`, `labels`, `schedule`) is invalid, or another
                notification channel has the name of one in `notify`.
            TypeError: The function is not `async`, does not take `(ctx)` or `(ctx, input)`,
                or its annotations cannot be resolved (define its models at module level);
                or a keyword it does not take was given; or `notify` holds something else
                than a channel.
        """
        if removed:
            raise TypeError(_replaced_keywords(removed))

        def register(func: F) -> F:
            wf_name = check_name(name or func.__name__, "workflow", func)
            if wf_name in self._workflows:
                raise ValueError(f"workflow {wf_name!r} is registered twice")
            input_type, output_type = param_and_return(func, "workflow")
            retention_s = seconds(retention)
            rules = admission.workflow_options(wf_name, queue, max_active_runs, labels, schedule)
            for channel in notify:
                self.notifications.check(channel)
            self._workflows[wf_name] = WorkflowDef(
                name=wf_name,
                fn=func,
                takes_input=input_type is not type(None),
                input_adapter=TypeAdapter(input_type_for(input_type, extra_input)),
                output_adapter=TypeAdapter(output_type),
                description=description or inspect.getdoc(func),
                retention_s=int(retention_s) if retention_s is not None else None,
                retry=retry or NO_RETRY,
                timeout_s=seconds(timeout),
                expose=expose or NOT_EXPOSED,
                rules=rules,
            )
            for channel in notify:
                self.notifications.add(channel, [wf_name])
            return func

        return register(fn) if fn is not None else register

    def notify(self, *channels: Channel, workflows: Sequence[str] | None = None) -> None:
        """Tell `channels` about every workflow of the app (or those in `workflows`): when a
        run waits for an answer, when the wait is answered or expires, and when a run that
        told them of a wait ends.

        DAGs and protocols are workflows too: with no `workflows`, their runs notify as well.
        A channel names the environment variables that hold its secrets; every serve and
        worker process reads them when it starts (see the notifications guide).

        Args:
            *channels: The channels ([`WebhookChannel`][tether.WebhookChannel],
                [`SlackChannel`][tether.SlackChannel], [`EmailChannel`][tether.EmailChannel]).
            workflows: The names of the workflows they hear of (default: every workflow).

        Raises:
            ValueError: Another channel has the name of one of these, or a workflow name is
                empty.
            TypeError: Something else than a channel was given.
        """
        names: list[object] = [EVERY_WORKFLOW] if workflows is None else list(workflows)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError("workflows must be non-empty names")
        for channel in channels:
            self.notifications.add(channel, [str(n) for n in names])

    def update(
        self,
        workflow: str,
        name: str | None = None,
        *,
        validator: Callable[[Any], Any] | None = None,
        mcp: bool = False,
        description: str | None = None,
    ) -> Callable[[F], F]:
        """Register an update of `workflow`: `async def handler(ctx, input: Model) -> Out`.

        An update changes a running workflow from outside. Its input is validated against
        the model, then by `validator`, before anything is stored. The handler runs once, in
        the run's next decision cycle, with an [`UpdateContext`][tether.UpdateContext] (the
        run it acts on) and the validated input; the caller gets its return value, or its
        error. The workflow sees each completed update through
        [`Context.wait_for_update`][tether.Context.wait_for_update].

        Args:
            workflow: The name of a workflow already registered on this app.
            name: The update's name (default: the function's name).
            validator: Called (or awaited) with the validated input before admission:
                raising `ValueError`, or returning `False` or a string (the reason), refuses
                the update without touching the run.
            mcp: Publish it as the `<workflow>_update_<name>` tool, in the workflow's
                generated tool set (`Exposure(tool_set=True)`).
            description: The tool's description (default: the function's docstring).

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            WorkflowNotFound: No workflow of that name is registered (yet) on this app.
            ValueError: The name is invalid, or the workflow already has an update of that
                name.
            TypeError: The function is not `async`, takes other than one or two
                parameters, or its annotations cannot be resolved.
        """

        def register(func: F) -> F:
            wf = self.get(workflow)
            up_name = check_name(name or func.__name__, "update")
            if up_name in wf.updates:
                raise ValueError(f"update {up_name!r} of {workflow!r} is registered twice")
            input_type, output_type = param_and_return(func, "update")
            wf.updates[up_name] = UpdateDef(
                name=up_name,
                workflow=workflow,
                fn=func,
                input_adapter=TypeAdapter(input_type),
                output_adapter=TypeAdapter(output_type),
                validator=validator,
                mcp=mcp,
                description=description or inspect.getdoc(func),
                takes_input=input_type is not type(None),
            )
            return func

        return register
