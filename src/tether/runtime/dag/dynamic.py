"""A DAG run's values computed once, before its first step (the caller records them as the
durable `dag:eval` step, so a resumed run sees the same): Dagu's backtick commands in parameter
defaults and `env` values, and a rich parameter's `eval` (Dagu v2). Then the parameters are
checked against their declared types and constraints.

Only text written in the DAG runs. A value the run was started with (an MCP client's params,
`tether runs start`, a parent's `call`) is data: it is never searched for commands, and a
command written in the DAG reads it from its environment (`bind_references`), never as text.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from tether.runtime.context import Context
from tether.runtime.dag.environment import RunEnvironment
from tether.runtime.dag.shell import DEFAULT_SHELL, ShellResult, argv_for, run_command
from tether.runtime.errors import StepFailed
from tether.specs.dag import (
    DagSpec,
    EnvVar,
    Param,
    bind_params,
    split_params,
    substitute,
    supplied_positions,
)
from tether.specs.dag.commands import BACKTICK_COMMAND, pieces
from tether.specs.dag.params import ParamRules
from tether.specs.dag.substitute import bind_references, expand_plain
from tether.specs.errors import INLINE

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True)
class Evaluation:
    """What text is evaluated with: the DAG's variables (`scope`; the environment of its
    commands, over `process`), the run's positional values (their arguments), the human
    tasks' outputs, and the directory its commands run in."""

    scope: Mapping[str, str]
    positional: Sequence[str] = ()
    outputs: Mapping[str, Mapping[str, str]] | None = None
    process: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cwd: str | None = None


async def run_substitution(command: str, at: Evaluation) -> ShellResult:
    """Run a command substitution's own text, as written in the DAG, with `sh -c`: the run's
    variables in its environment, its positional values as `$1` …; a reference the shell
    cannot read becomes a variable of its own (`bind_references`)."""
    text, bound = bind_references(command, at.scope, at.outputs)
    env = {**at.process, **at.scope, **bound}
    argv = [*argv_for(text, None), DEFAULT_SHELL, *at.positional]
    return await run_command(argv, env=env, cwd=at.cwd)


async def expand_evaluated(text: str, at: Evaluation) -> tuple[str, str | None]:
    """`text` (a comparison's condition, a parameter's `eval`) expanded: its plain text here
    (`expand_plain`), each command substitution (`` `…` ``, `$(…)`) replaced by its stdout
    less trailing newlines, as a shell does. Returns the value and the first command that
    exited non-zero (None: none did)."""
    out: list[str] = []
    failed = None
    for piece in pieces(text):
        if not piece.command:
            out.append(expand_plain(piece.text, at.scope, at.positional, at.outputs))
            continue
        res = await run_substitution(piece.text, at)
        if res.exit_code != 0 and failed is None:
            failed = piece.text
        out.append(res.stdout.rstrip("\n"))
    return "".join(out), failed


async def prepare_values(
    ctx: Context,
    dag: DagSpec,
    params: str | list[str] | dict[str, str] | None,
    environment: RunEnvironment,
) -> tuple[Sequence[str], Mapping[str, str], Mapping[str, str] | None]:
    """The run's positional and named parameter values, and its `env` values when they were
    evaluated here (else None: the caller evaluates them), from the `params` it was started
    with; `environment`: what the run takes from the server's.

    Raises:
        ValueError: an unknown parameter, an evaluation that failed, or a value that does not
            fit its declaration (the run fails saying so).
    """
    given = split_params(params)
    positional, named = bind_params(dag.params, given)
    supplied = supplied_positions(dag.params, given)
    env_values = None
    if needs_evaluation(dag.params, supplied, dag.env):
        scope = {**environment.variables, **named}
        workdir = dag_workdir(
            dag, functools.partial(substitute, scope=scope, positional=positional)
        )
        try:
            done = await ctx.step(
                evaluate_dynamic, dag.params, positional, supplied, dag.env, workdir,
                environment, name="dag:eval",
            )  # fmt: skip
        except StepFailed as exc:
            raise ValueError(f"evaluating params and env: {exc}") from exc
        positional, named, env_values = done["positional"], done["named"], done["env"]
    if problems := check_params(dag.params, positional, supplied):
        raise ValueError("; ".join(problems))
    return positional, named, env_values


def needs_evaluation(
    declared: Sequence[Param], supplied: Collection[int], env: Sequence[EnvVar]
) -> bool:
    """Whether a parameter the run was not given, or an `env` value, has something to run."""
    params = (p for p in declared if p.position - 1 not in supplied)
    return any(
        (p.rules is not None and p.rules.eval) or BACKTICK_COMMAND.search(p.default) for p in params
    ) or any(BACKTICK_COMMAND.search(var.value) for var in env)


async def evaluate_dynamic(
    declared: Sequence[Param],
    positional: Sequence[str],
    supplied: Collection[int],
    env: Sequence[EnvVar],
    workdir: str | None = None,
    environment: RunEnvironment | None = None,
) -> dict[str, Any]:
    """The run's parameter values and `env` values, evaluated. A parameter the run was not
    given (`supplied`: 0-based positions it was) takes its `eval`'s value (`$(…)`, backticks,
    `${NAME}` of earlier parameters; a failure falls back to the default, and without one fails
    the run), or has each backtick command of its default replaced by the command's trimmed
    stdout. Env entries are evaluated top to bottom, each command seeing the entries before
    it. A backtick command that fails fails the run (Dagu refuses to load the DAG). Commands
    run in `workdir` (the DAG's working directory), made when missing, with what the run
    takes from the server's `environment` (default: nothing)."""
    inherited = environment or RunEnvironment()
    base = functools.partial(Evaluation, process=inherited.process, cwd=_existing(workdir))
    values = list(positional)
    scope = dict(inherited.variables)
    for param in declared:
        index = param.position - 1
        if index not in supplied:
            if param.rules is not None and param.rules.eval:
                values[index] = await _eval(param, base(dict(scope), tuple(values)))
            elif BACKTICK_COMMAND.search(param.default):
                at = base(inherited.variables)
                values[index] = await _substitute_commands(param.default, at)
        if param.name is not None:
            scope[param.name] = values[index]
    named = {p.name: values[p.position - 1] for p in declared if p.name is not None}
    scope = {**inherited.variables, **named}
    env_values: dict[str, str] = {}
    for var in env:
        expand = functools.partial(substitute, scope=scope, positional=values)
        at = base(dict(scope), tuple(values))
        value = await _substitute_commands(var.value, at, expand)
        scope[var.name] = env_values[var.name] = value
    return {"positional": values, "named": named, "env": env_values}


def check_params(
    declared: Sequence[Param], values: Sequence[str], supplied: Collection[int]
) -> list[str]:
    """Why the run's parameter values do not fit their rich entries (empty: they do). A
    `required` parameter needs a value: given, a default, or an `eval`."""
    problems = []
    for param in declared:
        if param.rules is None:
            continue
        label = param.name or f"${param.position}"
        given = param.position - 1 in supplied or param.rules.has_default or param.rules.eval
        if not given:
            if param.rules.required:
                problems.append(f"parameter {label!r} is required")
            continue
        value = values[param.position - 1]
        problems += [f"parameter {label!r} {p}" for p in param.rules.problems(value)]
    return problems


async def _eval(param: Param, at: Evaluation) -> str:
    """A parameter's `eval` (`expand_evaluated`), trimmed. It failed when one of its commands
    did (exited non-zero)."""
    rules = param.rules or ParamRules()
    value, failed = await expand_evaluated(rules.eval or "", at)
    if failed is None:
        return value.strip()
    if rules.has_default:
        return param.default
    raise ValueError(f"parameter {param.name!r}: eval failed and it has no default")


async def _substitute_commands(
    text: str, at: Evaluation, expand: Callable[[str], str] = str
) -> str:
    """`text` with each backtick command written in it replaced by its trimmed stdout
    (`run_substitution`); the rest of the text goes through `expand` (`${NAME}` references),
    so a value put in never becomes a command of its own.

    Raises:
        ValueError: a command exited non-zero.
    """
    out, last = [], 0
    for match in BACKTICK_COMMAND.finditer(text):
        res = await run_substitution(match[1], at)
        if res.exit_code != 0:
            raise ValueError(f"command substitution `{match[1]}` exited {res.exit_code}")
        out += [expand(text[last : match.start()]), res.stdout.strip()]
        last = match.end()
    return "".join([*out, expand(text[last:])])


def dag_workdir(dag: DagSpec, expand: Callable[[str], str]) -> str | None:
    """The DAG's `working_dir` (`${VAR}` and `~` expanded), relative to the file's directory;
    without one, Dagu runs a file's steps in its directory (an inline spec: the worker's)."""
    base = os.path.dirname(os.path.abspath(dag.file)) if dag.file != INLINE else None
    if dag.working_dir is None:
        return base
    return os.path.join(base or "", os.path.expanduser(expand(dag.working_dir)))


def _existing(path: str | None) -> str | None:
    """`path`, made when missing (as Dagu makes a DAG's working directory at the start); None
    when there is none, or it cannot be made."""
    if path is not None and missing_dir(path):
        make_dir(path)
    return path if path is not None and not missing_dir(path) else None


def missing_dir(path: str) -> bool:
    return not os.path.isdir(path)  # one stat, as the command's start makes anyway


def make_dir(path: str) -> None:
    """Create the working directory `path` (and its parents) as Dagu does; one that cannot be
    made is left for the command's start to report (the step fails naming it)."""
    with contextlib.suppress(OSError):
        os.makedirs(path, mode=0o750, exist_ok=True)
