"""DAG specs: a strict subset of Dagu's YAML, parsed into frozen `DagSpec` data.

Load with `load_file` / `load_string`; every refusal is a `DagSpecError` naming the field,
file and line. `schema.json` beside this module publishes the format as a JSON Schema.
"""

from __future__ import annotations

from tether.specs.dag.errors import (
    DagSpecError,
    InvalidReference,
    InvalidValue,
    InvalidYaml,
    LimitExceeded,
    UnknownField,
)
from tether.specs.dag.graph import downstream_of, output_order, upstream_of
from tether.specs.dag.loader import check_size, load_file, load_string, shell_steps
from tether.specs.dag.model import (
    Action,
    Approval,
    Call,
    ContinueOn,
    DagSpec,
    EnvVar,
    Form,
    FormProperty,
    HumanTask,
    Label,
    Param,
    Precondition,
    PushBack,
    RemoteCall,
    RetryPolicy,
    Schedule,
    Shell,
    Step,
    Work,
    every_step,
)
from tether.specs.dag.policies import retry_delay
from tether.specs.dag.substitute import (
    bind_params,
    evaluate_env,
    split_params,
    step_scope,
    substitute,
    supplied_positions,
)
from tether.specs.dag.values import cron_of, parse_label

__all__ = [
    "Action",
    "Approval",
    "Call",
    "ContinueOn",
    "DagSpec",
    "DagSpecError",
    "EnvVar",
    "Form",
    "FormProperty",
    "HumanTask",
    "InvalidReference",
    "InvalidValue",
    "InvalidYaml",
    "Label",
    "LimitExceeded",
    "Param",
    "Precondition",
    "PushBack",
    "RemoteCall",
    "RetryPolicy",
    "Schedule",
    "Shell",
    "Step",
    "UnknownField",
    "Work",
    "bind_params",
    "check_size",
    "cron_of",
    "downstream_of",
    "evaluate_env",
    "every_step",
    "load_file",
    "load_string",
    "output_order",
    "parse_label",
    "retry_delay",
    "shell_steps",
    "split_params",
    "step_scope",
    "substitute",
    "supplied_positions",
    "upstream_of",
]
