"""One step's work, run inside a durable step: preconditions, then the shell command or
script, or the registered Python action. Returns a JSON result; never raises for a failure of
the work itself (the interpreter decides retries and continueOn from the result)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether.runtime.dag.shell import ShellResult, argv_for, run_command, run_script
from tether.specs.dag import Action, Precondition, Shell, Step, substitute

Actions = Mapping[str, Callable[..., Any]]


@dataclass(frozen=True)
class StepInput:
    """Everything a step's work needs, already resolved from the run's state."""

    scope: Mapping[str, str]
    positional: Sequence[str]
    task_outputs: Mapping[str, Mapping[str, str]]

    def expand(self, text: str) -> str:
        return substitute(text, self.scope, self.positional, self.task_outputs)


async def run_work(step: Step, given: StepInput, actions: Actions) -> dict[str, Any]:
    """The step's result: `status` succeeded / failed / skipped, plus what it produced."""
    for cond in step.preconditions:
        if not await _holds(cond, given):
            return {"status": "skipped", "reason": f"precondition not met: {cond.condition}"}
    work = step.work
    if isinstance(work, Shell):
        return await _shell(step, work, given)
    if isinstance(work, Action):
        return await _action(step, work, given, actions)
    raise TypeError(f"step {step.name!r} has no work to run here")  # call / task: not here


async def _shell(step: Step, work: Shell, given: StepInput) -> dict[str, Any]:
    env = dict(given.scope)
    cwd = given.expand(work.dir) if work.dir else None
    timeout = float(step.timeout_sec) if step.timeout_sec else None
    results: list[ShellResult] = []
    if work.script is not None:
        interpreter = work.commands[0] if work.commands else (work.shell or "sh")
        script = given.expand(work.script)
        results.append(await run_script(script, interpreter, env=env, cwd=cwd, timeout=timeout))
    else:
        for command in work.commands:
            argv = argv_for(given.expand(command), work.shell)
            res = await run_command(argv, env=env, cwd=cwd, timeout=timeout)
            results.append(res)
            if res.exit_code != 0:
                break
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
    if ok and step.output:
        out["outputs"] = {step.output: stdout.rstrip("\n")}
    return out


def unknown_action(name: str) -> str:
    """The refusal of a `run:` that names no registered action (Dagu's `run:` is shell text;
    here a shell command is `command:` or `script:`)."""
    return (
        f"`run: {name}` names no registered action; "
        "for a shell command (Dagu's `run:`) use `command` or `script`"
    )


async def _action(step: Step, work: Action, given: StepInput, actions: Actions) -> dict[str, Any]:
    fn = actions.get(work.name)
    if fn is None:
        return {"status": "failed", "error": unknown_action(work.name)}
    kwargs = {k: _expand_value(v, given) for k, v in work.with_.items()}
    try:
        async with asyncio.timeout(float(step.timeout_sec) if step.timeout_sec else None):
            if inspect.iscoroutinefunction(fn):
                value = await fn(**kwargs)
            else:
                value = await asyncio.to_thread(fn, **kwargs)
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


def _expand_value(value: Any, given: StepInput) -> Any:
    if isinstance(value, str):
        return given.expand(value)
    if isinstance(value, list):
        return [_expand_value(v, given) for v in value]
    if isinstance(value, dict):
        return {k: _expand_value(v, given) for k, v in value.items()}
    return value


async def _holds(cond: Precondition, given: StepInput) -> bool:
    """A command precondition holds when it exits 0; a comparison when the expanded
    condition equals `expected` (or matches `re:…`); `negate` inverts either."""
    if cond.expected is None:
        res = await run_command(argv_for(given.expand(cond.condition), None), env=given.scope)
        held = res.exit_code == 0
    else:
        actual = await _evaluate(given.expand(cond.condition), given)
        expected = given.expand(cond.expected)
        if expected.startswith("re:"):
            held = re.fullmatch(expected[3:], actual) is not None
        else:
            held = actual == expected
    return held != cond.negate


async def _evaluate(text: str, given: StepInput) -> str:
    """Shell-expand `text` (`$VAR`, backticks, `$(…)`) when it asks for it."""
    if "`" not in text and "$" not in text:
        return text
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    res = await run_command(argv_for(f'printf %s "{quoted}"', None), env=given.scope)
    return res.stdout
