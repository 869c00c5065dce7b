"""A DAG run's values computed once, before its first step (the caller records them as the
durable `dag:eval` step, so a resumed run sees the same): Dagu's backtick commands in parameter
defaults and `env` values, and a rich parameter's `eval` (Dagu v2). Then the parameters are
checked against their declared types and constraints.

Only text written in the DAG runs. A value the run was started with (an MCP client's params,
`tether runs start`, a parent's `call`) is data: it is never searched for commands, and where
a reference puts it into text a shell reads, it is quoted for that shell first.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from tether.runtime.context import Context
from tether.runtime.dag.shell import argv_for, run_command
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
from tether.specs.dag.loader import INLINE
from tether.specs.dag.model import BACKTICK_COMMAND
from tether.specs.dag.params import ParamRules


async def prepare_values(
    ctx: Context, dag: DagSpec, params: str | list[str] | dict[str, str] | None
) -> tuple[Sequence[str], Mapping[str, str], Mapping[str, str] | None]:
    """The run's positional and named parameter values, and its `env` values when they were
    evaluated here (else None: the caller evaluates them), from the `params` it was started
    with.

    Raises:
        ValueError: an unknown parameter, an evaluation that failed, or a value that does not
            fit its declaration (the run fails saying so).
    """
    given = split_params(params)
    positional, named = bind_params(dag.params, given)
    supplied = supplied_positions(dag.params, given)
    env_values = None
    if needs_evaluation(dag.params, supplied, dag.env):
        scope = {**os.environ, **named}
        workdir = dag_workdir(
            dag, functools.partial(substitute, scope=scope, positional=positional)
        )
        try:
            done = await ctx.step(
                evaluate_dynamic, dag.params, positional, supplied, dag.env, workdir,
                name="dag:eval",
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
) -> dict[str, Any]:
    """The run's parameter values and `env` values, evaluated. A parameter the run was not
    given (`supplied`: 0-based positions it was) takes its `eval`'s output (`$(…)`, backticks,
    `${NAME}` of earlier parameters; a failure falls back to the default, and without one fails
    the run), or has each backtick command of its default replaced by the command's trimmed
    stdout. Env entries are evaluated top to bottom, each command seeing the entries before
    it. A backtick command that fails fails the run (Dagu refuses to load the DAG). Commands
    run in `workdir` (the DAG's working directory), made when missing."""
    cwd = _existing(workdir)
    values = list(positional)
    scope = dict(os.environ)
    for param in declared:
        index = param.position - 1
        if index not in supplied:
            if param.rules is not None and param.rules.eval:
                values[index] = await _eval(param, scope, values, cwd)
            elif BACKTICK_COMMAND.search(param.default):
                values[index] = await _substitute_commands(param.default, os.environ, cwd)
        if param.name is not None:
            scope[param.name] = values[index]
    named = {p.name: values[p.position - 1] for p in declared if p.name is not None}
    scope = {**os.environ, **named}
    env_values: dict[str, str] = {}
    for var in env:
        expand = functools.partial(substitute, scope=scope, positional=values)
        value = await _substitute_commands(var.value, scope, cwd, expand)
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


async def _eval(
    param: Param, scope: Mapping[str, str], values: Sequence[str], cwd: str | None
) -> str:
    """A parameter's `eval`, expanded by a shell. It failed when the shell did, or when it
    printed nothing and wrote an error (a command substitution that failed: its status does
    not reach the shell's)."""
    rules = param.rules or ParamRules()
    text = substitute(rules.eval or "", scope, values, quote=for_heredoc)
    res = await run_command(expansion_argv(text), env=scope, cwd=cwd)
    value = res.stdout.removesuffix("\n").strip()
    if res.exit_code == 0 and (value or not res.stderr.strip()):
        return value
    if rules.has_default:
        return param.default
    raise ValueError(f"parameter {param.name!r}: eval failed and it has no default")


def expansion_argv(text: str) -> list[str]:
    """A shell command printing `text` shell-expanded as a double-quoted string would be
    (`$VAR`, `$(…)`, backticks), with a newline after it. It goes in a here-document, so the
    text's own quotes need no escaping; what was put into it must be `for_heredoc` quoted."""
    end = "__TETHER_TEXT_END__"
    while end in text:
        end += "_"
    return argv_for(f"cat <<{end}\n{text}\n{end}", None)


def for_heredoc(value: str) -> str:
    """`value` as literal text in an unquoted here-document (its `\\`, `$` and backticks
    escaped): a value put into shell text is data, never a command."""
    for char in ("\\", "$", "`"):
        value = value.replace(char, "\\" + char)
    return value


async def _substitute_commands(
    text: str, env: Mapping[str, str], cwd: str | None, expand: Callable[[str], str] = str
) -> str:
    """`text` with each backtick command written in it replaced by its trimmed stdout; the
    rest of the text, and each command, go through `expand` (`${NAME}` references) apart, so
    a value put in never becomes a command of its own."""
    out, last = [], 0
    for match in BACKTICK_COMMAND.finditer(text):
        command = expand(match[1])
        res = await run_command(argv_for(command, None), env=env, cwd=cwd)
        if res.exit_code != 0:
            raise ValueError(f"command substitution `{command}` exited {res.exit_code}")
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
