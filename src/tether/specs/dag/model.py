"""The DAG spec data model: frozen dataclasses the runtime interprets (never raw YAML).

Every step is addressed by its `name` (which defaults to its `id`); every reference in the
model (`depends`, `rewind_to`) is already resolved to a step name of the same DAG.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from tether.specs.dag.commands import BACKTICK_COMMAND, has_command
from tether.specs.dag.params import ParamRules

DagType = Literal["graph", "chain"]
HandlerEvent = Literal["success", "failure", "exit"]
ScalarType = Literal["string", "integer", "number", "boolean"]
Scalar = str | int | float | bool
EMPTY: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True)
class Param:
    """One declared parameter: `$<position>` always, `${name}` when named; `default` may be ''."""

    position: int
    name: str | None
    default: str
    rules: ParamRules | None = None  # a rich entry's type, constraints and `eval` (Dagu v2)


@dataclass(frozen=True)
class EnvVar:
    """One DAG `env` entry; values may use `${NAME}` of params and earlier entries."""

    name: str
    value: str


@dataclass(frozen=True)
class Label:
    """A label `key` or `key=value` (keys lowercased)."""

    key: str
    value: str | None = None

    def __str__(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


@dataclass(frozen=True)
class Schedule:
    """One cron start schedule: `expression` as written, `cron` its five-field form."""

    expression: str
    cron: str


@dataclass(frozen=True)
class Precondition:
    """Run `condition` as a command (no `expected`), or compare its expanded text to `expected`.

    `expected` starting with `re:` is a regular expression; `negate` inverts the result.
    """

    condition: str
    expected: str | None = None
    negate: bool = False

    @property
    def runs_command(self) -> bool:
        """Whether checking it runs a command written in the DAG: a command precondition, or
        a comparison whose condition holds `` `…` `` or `$(…)` (`commands.pieces`)."""
        return self.expected is None or has_command(self.condition)


@dataclass(frozen=True)
class ContinueOn:
    """When a failed or skipped step lets its dependents run anyway."""

    failure: bool = False
    skipped: bool = False
    exit_codes: tuple[int, ...] = ()
    output: tuple[str, ...] = ()  # substrings, or `re:<regex>`
    mark_success: bool = False


#: A step's `continue_on` when it sets none: one shared instance (steps are many, and a spec
#: crosses from the worker that read it as one object per distinct value).
NEVER_CONTINUE: Final = ContinueOn()


@dataclass(frozen=True)
class RetryPolicy:
    """Automatic retries of a failed step: `limit` more attempts, `interval_sec` apart.

    `exit_codes` empty means any non-zero exit retries. `backoff` multiplies the interval per
    retry (None = constant), capped by `max_interval_sec` when set.
    """

    limit: int
    interval_sec: int = 0
    exit_codes: tuple[int, ...] = ()
    backoff: float | None = None
    max_interval_sec: int | None = None


@dataclass(frozen=True)
class Approval:
    """A gate after the step's work: approve / reject / push back (`rewind_to` is a step name).

    Tether's own fields (not Dagu's): who decides it by vote — `approvers` by name, or the
    members of `approver_role` — how many must approve (`quorum`), and whether whoever started
    the run may approve it (`allow_self_approval`; None: refused once any of the others is
    given, else not checked)."""

    prompt: str | None = None
    input: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    rewind_to: str | None = None
    approvers: tuple[str, ...] | None = None
    approver_role: str | None = None
    quorum: int | None = None
    allow_self_approval: bool | None = None


@dataclass(frozen=True)
class FormProperty:
    """One scalar field of a human task form (checked by Dagu's scalar rules)."""

    name: str
    type: ScalarType
    title: str | None = None
    description: str | None = None
    default: Scalar | None = None
    enum: tuple[Scalar, ...] = ()
    one_of: tuple[Scalar, ...] = ()  # the `const` of each option
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None


@dataclass(frozen=True)
class Form:
    """A flat object form (normalized: explicit `additional_properties`, resolved types)."""

    properties: tuple[FormProperty, ...] = ()
    required: tuple[str, ...] = ()
    additional_properties: bool = False
    title: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class PushBack:
    """How a human task may be pushed back: `rewind_to` (an upstream step) and a feedback form."""

    rewind_to: str
    form: Form | None = None


@dataclass(frozen=True)
class Shell:
    """Run shell: each of `commands` in turn, or `script` (fed to `commands[0]` when given)."""

    commands: tuple[str, ...] = ()
    script: str | None = None
    shell: str | None = None
    dir: str | None = None


@dataclass(frozen=True)
class Call:
    """Start DAG `dag` as a sub-run with its own id; `params` as a Dagu params string/list."""

    dag: str
    params: tuple[Param, ...] = ()


@dataclass(frozen=True)
class Action:
    """Call the Python function registered as `name` (`@app.function`) with keyword args `with_`."""

    name: str
    with_: Mapping[str, object] = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True)
class HumanTask:
    """A processless step that waits for a person to fill `form` (or acknowledge)."""

    prompt: str
    form: Form | None = None
    push_back: PushBack | None = None


#: Tether's own action (not Dagu's): a tool of a remote MCP server, as a durable remote task.
MCP_CALL: Final = "mcp.call"
#: Tether's own action (not Dagu's): a message to a remote A2A agent, as a durable remote task.
A2A_ASK: Final = "a2a.ask"


@dataclass(frozen=True)
class RemoteCall:
    """Tether's own `action: mcp.call` (not Dagu's): call tool `tool` of the remote named
    `remote` with `arguments`, as a durable remote task; or `action: a2a.ask` (`action`):
    send the A2A agent `remote` the text `message`, with `arguments` as its data when there
    is any (`tool` is empty). `remote_line`: where `with.remote` is written (a remote that is
    not configured is refused naming it)."""

    remote: str
    tool: str
    arguments: Mapping[str, object] = field(default_factory=lambda: EMPTY)
    remote_line: int = 0
    action: str = MCP_CALL
    message: str = ""


Work = Shell | Call | Action | HumanTask | RemoteCall


@dataclass(frozen=True)
class Step:
    """One step. `depends` holds resolved step names (chain order included)."""

    name: str
    work: Work
    line: int
    id: str | None = None
    description: str | None = None
    depends: tuple[str, ...] = ()
    output: str | None = None
    preconditions: tuple[Precondition, ...] = ()
    continue_on: ContinueOn = NEVER_CONTINUE
    retry_policy: RetryPolicy | None = None
    timeout_sec: int | None = None
    approval: Approval | None = None
    env: tuple[EnvVar, ...] = ()  # the step's own env, over the DAG's and upstream outputs

    @property
    def runs_shell(self) -> bool:
        """Whether the step runs shell text written in the DAG: a `command` / `script`, or a
        precondition that runs a command."""
        return isinstance(self.work, Shell) or any(p.runs_command for p in self.preconditions)


@dataclass(frozen=True)
class DagSpec:
    """A whole DAG. `order` is a topological order of step names (file order among peers)."""

    name: str
    file: str
    steps: tuple[Step, ...]
    order: tuple[str, ...]
    type: DagType = "graph"
    description: str | None = None
    params: tuple[Param, ...] = ()
    env: tuple[EnvVar, ...] = ()
    handlers: Mapping[HandlerEvent, Step] = field(default_factory=lambda: MappingProxyType({}))
    queue: str | None = None
    max_active_runs: int | None = None
    labels: tuple[Label, ...] = ()
    schedules: tuple[Schedule, ...] = ()
    mcp: bool = False
    preconditions: tuple[Precondition, ...] = ()  # not all met: the run ends `aborted`
    working_dir: str | None = None  # the steps' directory; relative: to the file's directory
    shell: str | None = None  # the shell of every shell step that names none
    # Found once, where the spec is built (for an inline spec, the document worker), so the
    # serving process, which checks them, reads an attribute instead of walking every step:
    #: Whether any step or handler runs shell (see `shell_steps` for their names), or a
    #: parameter's default or an `env` value holds a backtick command (`command_fields`).
    runs_shell: bool = field(init=False, repr=False, compare=False)
    #: The names of the functions its steps and handlers call (`run:`).
    function_names: frozenset[str] = field(init=False, repr=False, compare=False)
    #: The names of the remotes its steps and handlers call (`mcp.call`, `a2a.ask`).
    remote_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        steps = every_step(self)
        shell = bool(self.command_fields) or any(s.runs_shell for s in steps)
        object.__setattr__(self, "runs_shell", shell)
        names = frozenset(s.work.name for s in steps if isinstance(s.work, Action))
        object.__setattr__(self, "function_names", names)
        remotes = frozenset(s.work.remote for s in steps if isinstance(s.work, RemoteCall))
        object.__setattr__(self, "remote_names", remotes)

    @property
    def command_fields(self) -> tuple[str, ...]:
        """`params`, `env`, `preconditions` (the DAG's) when they run shell text: a backtick
        command in a default or value, or in a parameter's `eval` (or its `$(…)`), a
        precondition's command."""
        params = any(
            BACKTICK_COMMAND.search(p.default)
            or (p.rules is not None and p.rules.eval and has_command(p.rules.eval))
            for p in self.params
        )
        env = any(BACKTICK_COMMAND.search(e.value) for e in self.env)
        pre = any(p.runs_command for p in self.preconditions)
        return tuple(k for k, v in (("params", params), ("env", env), ("preconditions", pre)) if v)

    def step(self, name: str) -> Step:
        """The step called `name` (or with that `id`).

        Raises:
            KeyError: no such step.
        """
        for step in self.steps:
            if name in (step.name, step.id):
                return step
        raise KeyError(name)


def every_step(dag: DagSpec) -> tuple[Step, ...]:
    """The DAG's steps in file order, then its handlers."""
    return (*dag.steps, *dag.handlers.values())
