"""One step of a DAG spec: its name, its work (shell, sub-DAG call, Python action or human task)
and its policies. References (`depends`, `rewind_to`) stay as written here; `graph` resolves them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final

import yaml

from tether.specs.dag.humantask import parse_human_task
from tether.specs.dag.model import (
    A2A_ASK,
    EMPTY,
    MCP_CALL,
    NEVER_CONTINUE,
    Action,
    Call,
    RemoteCall,
    Shell,
    Step,
    Work,
)
from tether.specs.dag.nodes import (
    At,
    Fields,
    integer,
    is_null,
    items,
    nonblank,
    string,
    strings,
)
from tether.specs.dag.policies import (
    parse_approval,
    parse_continue_on,
    parse_preconditions,
    parse_retry_policy,
)
from tether.specs.dag.values import NAME_RE, json_value, parse_env, parse_params

_RESERVED_IDS: Final = frozenset(("env", "params", "args", "stdout", "stderr", "output", "outputs"))
_MAX_ID: Final = 40
_MAX_NAME: Final = 255
ACTION_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:[.:-][A-Za-z0-9_]+)*$")
HUMAN_TASK: Final = "human.task"
DAG_RUN: Final = "dag.run"  # Dagu v2's spelling of `call` (`with: {dag, params}`)
_NOT_ON_HUMAN_TASK: Final = (
    "retryPolicy",
    "retry_policy",
    "timeoutSec",
    "timeout_sec",
    "approval",
    "output",
    "command",
    "script",
    "shell",
    "dir",
    "workingDir",
    "working_dir",
    "call",
    "run",
)
_HINTS: Final = {
    "executor": "only shell, `call`, `run` and `action: human.task`, `dag.run` or `mcp.call` steps",
    "signalOnStop": "outside the subset",
    "stdout": "outside the subset",
    "params": "`params` goes with `call: <dag>` (older Dagu's `run: <dag>` is `call:` here)",
}
# Step fields other than the work's own: what may remain on a step that names no work.
_POLICY_KEYS: Final = frozenset(
    (
        "preconditions",
        "precondition",
        "continueOn",
        "continue_on",
        "retryPolicy",
        "retry_policy",
        "timeoutSec",
        "timeout_sec",
        "approval",
        "shell",
        "dir",
        "workingDir",
        "working_dir",
    )
)


@dataclass(frozen=True)
class Draft:
    """A parsed step whose references are not resolved yet, with their places for errors."""

    step: Step
    at: At
    depends_at: tuple[At, ...] = ()
    rewind_at: At | None = None
    explicit_depends: bool = False  # `depends` written, even `[]` (a chain then implies none)
    group: int = 0  # chain position: a step depends on every step of the group before its own


def parse_step(
    node: yaml.Node, at: At, *, handler: bool = False, index: int = 0, taken: set[str] | None = None
) -> Draft:
    """One entry of `steps` (or a `handlerOn` step, which has no depends, gates or tasks).

    A step with neither `name` nor `id` is named as Dagu names it: `cmd_<n>`, `script_<n>`,
    `dag_<n>` (a call) or `step_<n>`, n its 1-based position, raised past the names in `taken`
    (every name and id written in the file), to which the generated name is added.
    """
    fields = Fields(node, at)
    name_f, id_f = fields.take("name"), fields.take("id")
    step_id = _step_id(*id_f) if id_f else None
    name = _step_name(*name_f) if name_f else step_id
    if name is None and taken is None:
        at.fail("a step needs `name` or `id`")
    desc = fields.take("description")
    depends_f = None if handler else fields.take("depends")
    work, rewind_at = _work(fields, at, step_id, handler)
    if name is None:
        name = _generated_name(work, index, taken or set())
    approval, approval_at = (None, None)
    if not handler and (gate := fields.take("approval")):
        approval, approval_at = parse_approval(*gate)
    output, pre = fields.take("output"), fields.take("preconditions", "precondition")
    cont, retry = (
        fields.take("continueOn", "continue_on"),
        fields.take("retryPolicy", "retry_policy"),
    )
    timeout, env = fields.take("timeoutSec", "timeout_sec"), fields.take("env")
    fields.finish(_HINTS)
    depends, depends_at = _depends(*depends_f) if depends_f else ((), ())
    step = Step(
        name=name,
        work=work,
        line=at.line,
        id=step_id,
        description=string(*desc) if desc else None,
        depends=depends,
        output=_output(*output) if output else None,
        preconditions=parse_preconditions(*pre) if pre else (),
        continue_on=parse_continue_on(*cont) if cont else NEVER_CONTINUE,
        retry_policy=parse_retry_policy(*retry) if retry else None,
        timeout_sec=integer(*timeout, minimum=0) or None if timeout else None,
        approval=approval,
        env=parse_env(*env) if env else (),
    )
    return Draft(step, at, depends_at, rewind_at or approval_at, depends_f is not None)


def _generated_name(work: Work, index: int, taken: set[str]) -> str:
    """Dagu's name for an unnamed step (`generateTypedStepName`): kind prefix and position."""
    prefix = "step"
    if isinstance(work, Shell):
        prefix = "script" if work.script is not None else "cmd"
    elif isinstance(work, Call):
        prefix = "dag"
    counter = index + 1
    while f"{prefix}_{counter}" in taken:
        counter += 1
    name = f"{prefix}_{counter}"
    taken.add(name)
    return name


def _step_id(node: yaml.Node, at: At) -> str:
    """An `id`, trimmed (as Dagu does): at most 40 characters, not a reserved word."""
    step_id = nonblank(node, at).strip()
    if step_id.lower() in _RESERVED_IDS:
        at.fail(f"step id {step_id!r} is a reserved word ({', '.join(sorted(_RESERVED_IDS))})")
    if len(step_id) > _MAX_ID:
        at.fail(f"a step id must be at most {_MAX_ID} characters")
    return step_id


def _step_name(node: yaml.Node, at: At) -> str:
    """A `name`, trimmed (as Dagu does): at most 255 bytes of UTF-8; digits are a name."""
    name = nonblank(node, at, allow_scalars=True).strip()
    if len(name.encode()) > _MAX_NAME:
        at.fail(f"a step name must be at most {_MAX_NAME} bytes")
    return name


def _depends(node: yaml.Node, at: At) -> tuple[tuple[str, ...], tuple[At, ...]]:
    """`depends`: one step name/id or a list of them (`[]` or null = explicitly none); a
    number or boolean names the step of that name (`depends: [42]`), as in Dagu."""
    if is_null(node):
        return (), ()
    if isinstance(node, yaml.SequenceNode):
        pairs = [(string(n, a, allow_scalars=True), a) for n, a in items(node, at)]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    return (string(node, at, allow_scalars=True),), (at,)


def _output(node: yaml.Node, at: At) -> str:
    """`NAME`, `$NAME` (Dagu strips the `$`) or `${NAME}`."""
    name = string(node, at).strip().removeprefix("$")
    if name.startswith("{") and name.endswith("}"):
        name = name[1:-1]
    if not NAME_RE.match(name):
        at.fail(f"an output variable name must match {NAME_RE.pattern}")
    return name


def _work(fields: Fields, at: At, step_id: str | None, handler: bool) -> tuple[Work, At | None]:
    """The step's one kind of work; a step with none, or with two, is refused."""
    kinds = [
        k
        for k, keys in (
            ("shell", ("command", "script")),
            ("call", ("call",)),
            ("run", ("run",)),
            ("action", ("action",)),
        )
        if fields.has(*keys)
    ]
    if not kinds:
        if published := fields.take("output"):  # Dagu's output-only step publishes a mapping
            published[1].fail(
                "a step that only publishes `output` values is outside the subset; "
                "a step needs one of `command`, `script`, `call`, `run` or `action`"
            )
        fields.drain(lambda key: key in _POLICY_KEYS)
        fields.finish(_HINTS)  # a field outside the subset (`executor` …) is named first
        at.fail("a step needs one of `command`, `script`, `call`, `run` or `action`")
    if len(kinds) > 1:
        at.fail(f"a step has one kind of work; found {' and '.join(kinds)}")
    kind = kinds[0]
    if kind == "shell":
        return _shell(fields), None
    if kind == "call":
        call = fields.take("call") or at.fail("unreachable")
        params = fields.take("params")
        return Call(nonblank(*call), parse_params(*params) if params else ()), None
    if kind == "run":
        return _run(fields, at), None
    if (action := fields.peek("action")) is not None and action.value == DAG_RUN:
        return _dag_run(fields, at), None
    if action is not None and action.value == MCP_CALL:
        return _mcp_call(fields, at), None
    if action is not None and action.value == A2A_ASK:
        return _a2a_ask(fields, at), None
    return _human_task(fields, at, step_id, handler)


def _mcp_call(fields: Fields, at: At) -> RemoteCall:
    """`action: mcp.call` with `with: {remote, tool, arguments}` (Tether's own action)."""
    remote, tool, arguments = _remote_action(fields, at, MCP_CALL, "tool", "arguments")
    return RemoteCall(nonblank(*remote).strip(), nonblank(*tool).strip(), arguments, remote[1].line)


def _a2a_ask(fields: Fields, at: At) -> RemoteCall:
    """`action: a2a.ask` with `with: {remote, message, data}` (Tether's own action)."""
    remote, message, data = _remote_action(fields, at, A2A_ASK, "message", "data")
    return RemoteCall(
        nonblank(*remote).strip(),
        "",
        data,
        remote[1].line,
        action=A2A_ASK,
        message=nonblank(*message),
    )


def _remote_action(
    fields: Fields, at: At, action: str, what: str, mapping: str
) -> tuple[tuple[yaml.Node, At], tuple[yaml.Node, At], Mapping[str, object]]:
    """What the remote actions share: `with.remote` and `with.<what>` (both required, returned
    as written), `with.<mapping>` (a JSON mapping, empty when absent), nothing else in `with`,
    and no preconditions."""
    _, action_at = fields.take("action") or at.fail("unreachable")
    needs = f"`action: {action}` needs"
    config = fields.take("with") or action_at.fail(f"{needs} `with.remote`")
    if pre := fields.take("preconditions", "precondition"):
        pre[1].fail(f"`preconditions` are not supported on an `{action}` step")
    options = Fields(*config)
    remote = options.take("remote") or config[1].fail(f"{needs} `with.remote`")
    text = options.take(what) or config[1].fail(f"{needs} `with.{what}`")
    given = options.take(mapping)
    options.finish({})
    value = json_value(*given) if given else {}
    if not isinstance(value, dict):
        (given[1] if given else config[1]).fail(f"`with.{mapping}` must be a mapping")
    return remote, text, MappingProxyType(value) if value else EMPTY


def _dag_run(fields: Fields, at: At) -> Call:
    """`action: dag.run` with `with: {dag, params}`: a sub-DAG run, as `call` + `params`."""
    _, action_at = fields.take("action") or at.fail("unreachable")
    config = fields.take("with") or action_at.fail("`action: dag.run` needs `with.dag`")
    options = Fields(*config)
    dag = options.take("dag") or config[1].fail("`action: dag.run` needs `with.dag`")
    params = options.take("params")
    options.finish({})
    return Call(nonblank(*dag), parse_params(*params) if params else ())


def _shell(fields: Fields) -> Shell:
    command, script = fields.take("command"), fields.take("script")
    if command and not any(c.strip() for c in strings(*command, allow_scalars=True)):
        command[1].fail("must not be empty")
    shell, workdir = fields.take("shell"), fields.take("dir", "workingDir", "working_dir")
    return Shell(
        commands=strings(*command, allow_scalars=True) if command else (),
        script=string(*script) if script else None,
        shell=" ".join(strings(*shell)) if shell else None,
        dir=string(*workdir) if workdir else None,
    )


def _run(fields: Fields, at: At) -> Action | Shell:
    """`run: <name>` calls a registered Python action (Tether's step kind); any other `run`
    (text with spaces or shell syntax, several lines, a list) is Dagu v2's canonical spelling
    of `command`, with `with.shell` as its shell."""
    node, run_at = fields.take("run") or at.fail("unreachable")
    if isinstance(node, yaml.ScalarNode) and ACTION_NAME.match(string(node, run_at)):
        return _action(string(node, run_at), fields, at)
    commands = strings(node, run_at, allow_scalars=True)
    if not any(c.strip() for c in commands):
        run_at.fail("must not be empty")
    shell: str | None = None
    if taken := fields.take("with"):
        options = Fields(*taken)
        if chosen := options.take("shell"):
            shell = " ".join(strings(*chosen))
        options.finish({"shell_args": "put the arguments in `with.shell`"})
    base = _shell(fields)  # `shell` and `dir` as a command step reads them (no command here)
    return replace(base, commands=commands, shell=shell or base.shell)


def _action(name: str, fields: Fields, at: At) -> Action:
    args = fields.take("with")
    value = json_value(*args) if args else {}
    if not isinstance(value, dict):
        (args[1] if args else at).fail("`with` must be a mapping of keyword arguments")
    return Action(name, MappingProxyType(value) if value else EMPTY)


def _human_task(
    fields: Fields, at: At, step_id: str | None, handler: bool
) -> tuple[Work, At | None]:
    action_node, action_at = fields.take("action") or at.fail("unreachable")
    if (name := string(action_node, action_at)) != HUMAN_TASK:
        action_at.fail(
            f"`action: {name}` is outside the subset; "
            f"only `action: {HUMAN_TASK}`, `action: {DAG_RUN}`, `action: {MCP_CALL}` and "
            f"`action: {A2A_ASK}` are supported"
        )
    if handler:
        action_at.fail("a handler cannot be a human task")
    if step_id is None:
        action_at.fail("a human task needs an explicit `id`")
    for key in _NOT_ON_HUMAN_TASK:
        if taken := fields.take(key):
            taken[1].fail(f"`{key}` is not allowed on a human task")
    config = fields.take("with") or action_at.fail("a human task needs `with.prompt`")
    return parse_human_task(*config)
