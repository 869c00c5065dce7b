"""One step's work, run inside a durable step: preconditions, then the shell command or
script, or the registered Python function (`run: NAME`). Returns a JSON result; never raises
for a failure of the work itself (the interpreter decides retries and continueOn from the
result)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tether.runtime.dag.ahead import Ahead, Launch, quiet_start
from tether.runtime.dag.dynamic import Evaluation, expand_evaluated, make_dir, missing_dir
from tether.runtime.dag.shell import (
    DEFAULT_SHELL,
    GATE_PREFIX,
    POSIX_SHELLS,
    Gate,
    ShellResult,
    argv_for,
    gateable,
    posix_shell,
    run_command,
    run_script,
)
from tether.runtime.functions import FunctionNotRegistered, Functions
from tether.specs import patterns
from tether.specs.dag import Action, Precondition, Shell, Step, substitute
from tether.specs.dag.substitute import bind_references


@dataclass(frozen=True)
class StepInput:
    """Everything a step's work needs, already resolved from the run's state."""

    scope: Mapping[str, str]
    positional: Sequence[str]
    task_outputs: Mapping[str, Mapping[str, str]]
    workdir: str | None = None  # the DAG's `working_dir`, else its file's directory (Dagu's)
    shell: str | None = None  # the DAG's `shell`: a step's shell when it names none
    # In the environment of the step's processes only, under `scope` (`environment`).
    process: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment of the processes the step starts: its variables over `process`."""
        return {**self.process, **self.scope} if self.process else self.scope

    def shell_for(self, work: Shell) -> str:
        """The shell `work` runs in: its own, else the DAG's or the default (`default_shell`)."""
        return work.shell or default_shell(self.shell, self.scope)

    def expand(self, text: str, quote: Callable[[str], str] | None = None) -> str:
        return substitute(text, self.scope, self.positional, self.task_outputs, quote)

    def shell_text(self, text: str, program: str) -> tuple[str, dict[str, str]]:
        """`text` (a command, or a script) as `program` is to run it, and the environment
        to run it with. A POSIX shell reads every reference from its environment
        (`bind_references`), so no value becomes text it parses. Any other program (`python3`
        given a script, a shebang's interpreter) gets the values put into the text, as Dagu
        does: that text is the DAG author's program, and a value put into a program is code
        (such a program reads a caller's value from its environment instead)."""
        if not posix_shell(program):
            return self.expand(text), dict(self.environ)
        text, bound = bind_references(
            text, self.scope, self.task_outputs, positional=self.positional
        )
        return text, {**self.environ, **bound}


async def run_work(
    step: Step,
    step_input: StepInput,
    functions: Functions,
    gate: Gate | None = None,
    ahead: Ahead | None = None,
) -> dict[str, Any]:
    """The step's result: `status` succeeded / failed / skipped, plus what it produced.
    `gate`: awaited before the step's first side effect (the run's previous write commits
    meanwhile); a lone shell command's shell is started while it is awaited. `ahead`: the
    run's shells started ahead (`ahead`): this step may take one, and starts the next."""
    if gate is not None and not _starts_early(step, step_input):
        await gate()
        gate = None
    if (unmet := await unmet_precondition(step.preconditions, step_input)) is not None:
        return {"status": "skipped", "reason": f"precondition not met: {unmet}"}
    work = step.work
    if isinstance(work, Shell):
        return await _shell(step, work, step_input, gate, ahead)
    if isinstance(work, Action):
        return await _action(step, work, step_input, functions)
    raise TypeError(f"step {step.name!r} has no work to run here")  # call / task: not here


def _starts_early(step: Step, step_input: StepInput) -> bool:
    """Whether the step's shell may start while its gate is awaited: commands (not a script)
    run by a POSIX shell that echoes nothing it runs, and no precondition to check first."""
    work = step.work
    if not isinstance(work, Shell) or work.script is not None or not work.commands:
        return False
    return not step.preconditions and gateable(step_input.shell_for(work), step_input.environ)


def launch_of(step: Step, step_input: StepInput) -> Launch | None:
    """How the step's first command would start behind its gate, to start it ahead
    (`ahead`); None when it would not start before its gate, or its shell may run a startup
    file."""
    work = step.work
    if not isinstance(work, Shell) or not _starts_early(step, step_input):
        return None
    shell = step_input.shell_for(work)
    text, env = step_input.shell_text(work.commands[0], shell)
    argv = argv_for(GATE_PREFIX + text, shell)
    if not quiet_start(argv[0], env):
        return None
    return Launch(step.name, tuple(argv), env, _cwd(work, step_input))


def _cwd(work: Shell, step_input: StepInput) -> str | None:
    return (
        os.path.join(step_input.workdir or "", step_input.expand(work.dir))
        if work.dir
        else step_input.workdir
    )


async def _shell(
    step: Step, work: Shell, step_input: StepInput, gate: Gate | None, ahead: Ahead | None
) -> dict[str, Any]:
    try:
        results = await _run_shell(step, work, step_input, gate, ahead)
    except OSError as exc:  # the shell, interpreter or `dir` is missing: the step fails (Dagu)
        return {"status": "failed", "error": f"cannot start the command: {exc}"}
    return _shell_result(step, results)


async def _run_shell(
    step: Step, work: Shell, step_input: StepInput, gate: Gate | None, ahead: Ahead | None
) -> list[ShellResult]:
    cwd = _cwd(work, step_input)
    if cwd is not None and missing_dir(cwd):  # Dagu creates a missing working directory
        if gate is not None:
            await gate()  # nothing of the step's before the run's previous write commits
            gate = None
        make_dir(cwd)
    then = ahead.launch if ahead is not None else None
    timeout = float(step.timeout_sec) if step.timeout_sec else None
    results: list[ShellResult] = []
    shell = step_input.shell_for(work)
    if work.script is not None:
        interpreter = work.commands[0] if work.commands else _shebang(work.script, work) or shell
        script, env = step_input.shell_text(work.script, interpreter)
        ran = run_script(script, interpreter, env=env, cwd=cwd, timeout=timeout, then=then)
        results.append(await ran)
    else:
        for command in work.commands:
            text, env = step_input.shell_text(command, shell)
            argv = argv_for(text if gate is None else GATE_PREFIX + text, shell)
            started = ahead.take(argv, env, cwd) if gate and ahead else None
            res = await run_command(
                argv, env=env, cwd=cwd, timeout=timeout, gate=gate, started=started, then=then
            )
            gate = then = None  # the first command passed the gate and started the next shell
            results.append(res)
            if res.exit_code != 0:
                break
    return results


STEP_FLUSH_ENV: Final = "TETHER_DAG_STEP_FLUSH"


def step_flush() -> bool:
    """Whether a DAG step's result waits for the disk flush when it commits (the operator's
    `TETHER_DAG_STEP_FLUSH`: true/1/yes/on). By default it does not: a worker's crash still
    keeps every finished step, and PostgreSQL's own crash may run the last ones again."""
    return os.environ.get(STEP_FLUSH_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def default_shell(dag_shell: str | None = None, scope: Mapping[str, str] | None = None) -> str:
    """Dagu's shell for a step that names none: the DAG's `shell`, else the run's `$SHELL`
    (`scope`: passed through from the server's environment, or set by the DAG), else `sh`,
    with `-e` (errexit) added for a Unix-like shell (Dagu specs 014/015), so a failing line
    of a multi-line command fails the step. (A step's own `shell` is taken as written.) The
    run's `$SHELL` names one program, whatever it holds (a parameter or an output may set it):
    never a program and arguments of its choosing."""
    variable = (scope or {}).get("SHELL", "").strip()
    if dag_shell:
        shell, program = dag_shell, dag_shell.split()[0]
    elif variable:
        shell, program = shlex.quote(variable), variable
    else:
        shell = program = DEFAULT_SHELL
    name = os.path.basename(program)
    return f"{shell} -e" if name in POSIX_SHELLS and "-e" not in shell.split() else shell


def _shebang(script: str, work: Shell) -> str | None:
    """A script's `#!` interpreter, used when the step names no shell (as in Dagu): as
    written, never with a value put in."""
    if work.shell is None and script.startswith("#!"):
        return script[2:].partition("\n")[0].strip() or None
    return None


def _shell_result(step: Step, results: list[ShellResult]) -> dict[str, Any]:
    last = results[-1]
    stdout = "".join(r.stdout for r in results)
    stderr = "".join(r.stderr for r in results)
    ok = last.exit_code == 0
    out: dict[str, Any] = {
        "status": "succeeded" if ok else "failed",
        "exit_code": last.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": any(r.truncated for r in results),
    }
    if last.timed_out:
        out["error"] = f"timed out after {step.timeout_sec}s (process group killed)"
    elif not ok:
        out["error"] = f"exit status {last.exit_code}"
    if step.output:  # Dagu: TrimSpace'd stdout, published whether or not the command failed
        out["outputs"] = {step.output: stdout.strip()}
    return out


def unknown_action(name: str, missing: FunctionNotRegistered) -> str:
    """The refusal of a `run:` with `with` arguments that names no registered function."""
    return (
        f"`run: {name}` names no registered action ({missing}; with `with` arguments other "
        "than `shell`, it is not Dagu's one-word shell command)"
    )


def as_command(work: Action) -> Shell | None:
    """A one-word `run:` that names no registered function is Dagu's shell command (`run:
    hostname`, `run: "true"`), with `with.shell` as its shell; None when `with` holds other
    arguments (the step then fails naming the action)."""
    if not set(work.with_) <= {"shell"}:
        return None
    shell = work.with_.get("shell")
    words = shell if isinstance(shell, list) else [shell] if shell is not None else []
    return Shell(commands=(work.name,), shell=" ".join(map(str, words)) or None)


async def _action(
    step: Step, work: Action, step_input: StepInput, functions: Functions
) -> dict[str, Any]:
    """Call the function `run:` names with the step's `with:` values as keyword arguments."""
    try:
        fn = functions.lookup(work.name)
    except FunctionNotRegistered as exc:
        if (command := as_command(work)) is not None:
            return await _shell(step, command, step_input, None, None)
        return {"status": "failed", "error": unknown_action(work.name, exc)}
    kwargs = {k: expand_value(v, step_input) for k, v in work.with_.items()}
    try:
        async with asyncio.timeout(float(step.timeout_sec) if step.timeout_sec else None):
            value = await fn.call(**kwargs)
        json.dumps(value)
    except TimeoutError:
        return {"status": "failed", "error": f"timed out after {step.timeout_sec}s"}
    except Exception as exc:  # noqa: BLE001 — user code: its error is the step's failure
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"status": "succeeded", "value": value}
    if step.output:
        text = value if isinstance(value, str) else json.dumps(value)
        out["outputs"] = {step.output: text}
    return out


def expand_value(value: Any, step_input: StepInput) -> Any:
    """`value` (JSON) with every string expanded (`${NAME}`, outputs, parameters)."""
    if isinstance(value, str):
        return step_input.expand(value)
    if isinstance(value, list):
        return [expand_value(v, step_input) for v in value]
    if isinstance(value, dict):
        return {k: expand_value(v, step_input) for k, v in value.items()}
    return value


async def unmet_precondition(conds: Sequence[Precondition], step_input: StepInput) -> str | None:
    """The first of `conds` that does not hold (its condition as written), else None."""
    for cond in conds:
        if not await _holds(cond, step_input):
            return cond.condition
    return None


async def _holds(cond: Precondition, step_input: StepInput) -> bool:
    """A command precondition holds when it exits 0; a comparison when the expanded
    condition equals `expected` (or matches `re:…`); `negate` inverts either."""
    if cond.expected is None:
        text, env = step_input.shell_text(cond.condition, DEFAULT_SHELL)
        argv = argv_for(text, None)
        if step_input.workdir is not None and missing_dir(step_input.workdir):
            make_dir(step_input.workdir)
        res = await run_command(argv, env=env, cwd=step_input.workdir)
        held = res.exit_code == 0
    else:
        actual = await _evaluate(cond.condition, step_input)
        expected = step_input.expand(cond.expected)
        if expected.startswith("re:"):
            held = patterns.search(expected[3:], actual)  # searched, not anchored, as in Dagu
        else:
            held = actual == expected
    return held != cond.negate


async def _evaluate(condition: str, step_input: StepInput) -> str:
    """The condition expanded (`dynamic.expand_evaluated`): its references and `$NAME` put in
    here, and each `` `…` `` / `$(…)` written in it run by a shell, in the DAG's working
    directory. A value put in (a caller's parameter, a step's output) is data: no shell
    parses it. A command that fails gives what it printed."""
    workdir = (
        step_input.workdir if step_input.workdir and not missing_dir(step_input.workdir) else None
    )
    at = Evaluation(
        step_input.scope,
        step_input.positional,
        step_input.task_outputs,
        step_input.process,
        workdir,
    )
    value, _ = await expand_evaluated(condition, at)
    return value
