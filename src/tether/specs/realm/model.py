"""The protocol-workflow data model: frozen dataclasses the runtime interprets (never raw YAML).

A `WorkflowSpec` is Realm's `workflow.yaml` (a strict subset), already validated: every step
reference resolves, every condition is parsed, every schema is a checked draft-07 document.
Steps are addressed by their key in the `steps` map (`Step.id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from tether.specs.errors import INLINE
from tether.specs.realm.schemas import Schema

Execution = Literal["agent", "auto", "guard", "finalizer"]
TriggerRule = Literal[
    "all_success", "all_failed", "all_done", "one_failed", "one_success", "none_failed"
]
Trust = Literal["auto", "human_confirmed", "human_reviewed"]
OnExpiry = Literal["settle_default", "abort"]
Outcome = Literal["complete", "fail", "abort", "always", "completed_with_failed_steps"]
Backoff = Literal["fixed", "linear", "exponential"]
ExhaustionMode = Literal["fail", "default"]
TraceValidationMode = Literal["warn", "enforce"]
Operator = Literal["==", "!=", ">", ">=", "<", "<="]
ConditionField = Literal["when", "preconditions", "abort_unless"]
PathRoot = Literal["step", "params", "settlement"]
ChoicesSource = Literal["gate", "input_schema", "default"]
Scalar = str | int | float | bool | None
EMPTY: Mapping[str, object] = MappingProxyType({})

DEFAULT_TIMEOUT_SECONDS = 3600  # an `auto` step's one attempt, when `timeout_seconds` is unset
DEFAULT_THRESHOLD = 6  # refused answers that end an agent step
DEFAULT_CHOICES = ("approve", "reject")
DEFAULT_REMINDER_MAX = 3
RESERVED_STEP_IDS = frozenset({"run", "context", "$settlement"})


@dataclass(frozen=True)
class Diagnostic:
    """Something the loader accepted but reports (Realm prints these as warnings).

    `code` is stable (`gate_inert`, `unknown_gate_key`, `extension_key`, …); `path` is the
    dotted field (`steps.approve.gate.on_expiry`) and `line` its 1-based line (0 if none).
    """

    code: str
    message: str
    path: str
    line: int


@dataclass(frozen=True)
class ConditionPath:
    """Where a condition reads its value.

    `root` is `step` (`<step>.<field>…`, reading that step's output), `params`
    (`run.params.<name>…`) or `settlement` (`$settlement.<step>.<field>`). `step` is the step
    read (None for params); `keys` are the remaining dotted segments (a digit string selects a
    list item). `text` is the path as written.
    """

    root: PathRoot
    step: str | None
    keys: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Condition:
    """One condition: `<path> <op> <value>`, or a bare path (`op` None, truthiness).

    `value` is the literal: quoted or bare-word text (str), a number, `true`/`false`, or `null`
    (None). `field` is where it was written; it decides how missing values and `null` are read
    (see `conditions.evaluate`).
    """

    text: str
    field: ConditionField
    path: ConditionPath
    op: Operator | None = None
    value: Scalar = None


@dataclass(frozen=True)
class Settlement:
    """`$settlement.<step>`: how a completed or failed step settled (none for skipped ones)."""

    failed: bool = False
    settled_by_default: bool = False
    validation_rejections: int = 0


@dataclass(frozen=True)
class Retry:
    """An `auto` step's `retry` block. Only errors marked retryable are retried.

    `on_timeout` (retry a timed-out attempt) requires the step to be `idempotent`.
    `max_delay_ms` None is no cap; `total_timeout_seconds` None bounds the tries only by their
    own timeouts and waits.
    """

    max_attempts: int = 1
    backoff: Backoff = "fixed"
    base_delay_ms: float = 0
    max_delay_ms: float | None = None
    on_timeout: bool = False
    total_timeout_seconds: int | None = None


@dataclass(frozen=True)
class ValidationExhaustion:
    """An agent step's budget of refused answers (always present on agent steps).

    At `threshold` refusals the step ends: `fail` fails it (`VALIDATION_EXHAUSTED`);
    `default` completes it with `default_output` (checked against `output_schema` at load).
    """

    threshold: int = DEFAULT_THRESHOLD
    mode: ExhaustionMode = "fail"
    default_output: object = None


@dataclass(frozen=True)
class Gate:
    """The human gate of a step whose `trust` is `human_confirmed` / `human_reviewed`.

    `choices` are the effective ones: `gate.choices`, else the enum of
    `input_schema.properties.choice`, else approve/reject (`choices_source` says which).
    `message` is a template rendered strictly when the gate opens (else the step's `prompt`).
    `on_expiry` is None without `timeout_seconds` (Realm ignores it there, with a diagnostic);
    `default_choice` is set only with `on_expiry: settle_default`.
    """

    choices: tuple[str, ...] = DEFAULT_CHOICES
    choices_source: ChoicesSource = "default"
    message: str | None = None
    owner: str | None = None
    resolution_messages: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout_seconds: int | None = None
    on_expiry: OnExpiry | None = None
    default_choice: str | None = None
    reminder_seconds: int | None = None
    reminder_max: int = DEFAULT_REMINDER_MAX


@dataclass(frozen=True)
class Step:
    """One step. Fields that do not apply to `execution` keep their defaults.

    Ordering (not finalizers): `depends_on`, `trigger_rule`, `when` (false → skipped),
    `preconditions` (false → blocked, retryable).
    agent: `prompt`, `instructions`, `input_schema` / `output_schema` (an answer must fit
    both), `exhaustion`, `trace_schema`, `trace_validation_mode`; `llm_timeout_seconds` and
    `structured_output` are carried for `create_workflow` (only `realm agent` uses them).
    auto: `handler` (an `@app.function` name, resolved by the runtime; None is a pass-through
    step, useful to carry a gate: it records its one dependency's output, the run's params
    with no dependency, `{}` with several), `input_map` (name →
    path or template), `config`, `timeout_seconds` (None → `DEFAULT_TIMEOUT_SECONDS`),
    `retry`, `idempotent`; `input_schema` checks the built input; `prompt` / `instructions`
    are shown at its gate.
    guard: `abort_unless` (all true → complete, any false → abort the run), `abort_message`.
    finalizer: `handler`, `on_outcome`, `config`, `timeout_seconds`.
    agent + auto: `trust`, `gate` (None when trust is `auto`), `display`.
    """

    id: str
    execution: Execution
    description: str
    line: int = 0
    depends_on: tuple[str, ...] = ()
    trigger_rule: TriggerRule = "all_success"
    when: tuple[Condition, ...] = ()
    preconditions: tuple[Condition, ...] = ()
    prompt: str | None = None
    instructions: str | None = None
    input_schema: Schema | None = None
    output_schema: Schema | None = None
    exhaustion: ValidationExhaustion | None = None
    trace_schema: Schema | None = None
    trace_validation_mode: TraceValidationMode = "warn"
    llm_timeout_seconds: int | None = None
    structured_output: bool = False
    handler: str | None = None
    input_map: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    config: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    timeout_seconds: int | None = None
    retry: Retry | None = None
    idempotent: bool = False
    trust: Trust = "auto"
    gate: Gate | None = None
    display: str | None = None
    abort_unless: tuple[Condition, ...] = ()
    abort_message: str | None = None
    on_outcome: tuple[Outcome, ...] = ()

    @property
    def gated(self) -> bool:
        """The step stops for a person (its `trust` opens a gate)."""
        return self.gate is not None

    @property
    def effective_timeout(self) -> int | None:
        """Seconds one attempt may take: set, else 3600 on auto steps, else no limit."""
        if self.timeout_seconds is not None:
            return self.timeout_seconds
        return DEFAULT_TIMEOUT_SECONDS if self.execution == "auto" else None


@dataclass(frozen=True)
class Protocol:
    """`protocol`: replaces what `get_workflow_protocol` says (None / empty → the defaults)."""

    quick_start: str | None = None
    rules: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WorkflowSpec:
    """A loaded workflow. `steps` keeps file order; `order` is a topological order of the
    non-finalizer steps (ties in file order); `finalizers` are the finalizer ids in file order.
    `extensions` holds the top-level `x-` keys (carried, never read). `source` is the text it
    was loaded from (for hashing by `create_workflow`)."""

    id: str
    name: str
    version: int | float
    steps: Mapping[str, Step]
    order: tuple[str, ...]
    finalizers: tuple[str, ...] = ()
    description: str | None = None
    params_schema: Schema | None = None
    protocol: Protocol = Protocol()
    extensions: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    file: str = INLINE
    source: str = ""

    def step(self, step_id: str) -> Step:
        """The step named `step_id` (KeyError if none)."""
        return self.steps[step_id]

    @property
    def agent_steps(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps.values() if s.execution == "agent")
