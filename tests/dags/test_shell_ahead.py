"""The next step's shell, started while the current step's command runs (`dag/ahead.py`): a
chain's steps take the shells started for them; a shell started for a step that does not run
(the step before failed or is retried, or the step now runs otherwise) is ended unrun and
reaped; steps that publish a value, and shells that may read a startup file, start nothing
ahead."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import reading_stdin, until
from tether.runtime.dag.ahead import Ahead, Launch, quiet_start
from tether.runtime.dag.shell import GATE_PREFIX, argv_for, run_command
from tether.runtime.registry import App

from .conftest import Start
from .test_run import run_to_end


def _alive(pid: int) -> bool:
    """Whether `pid` is still a process (a zombie not yet reaped counts)."""
    return os.path.exists(f"/proc/{pid}")


def _launch(command: str, step: str = "next", cwd: str | None = None) -> Launch:
    argv = tuple(argv_for(GATE_PREFIX + command, "sh"))
    return Launch(step, argv, dict(os.environ), cwd)


def _started(ahead: Ahead) -> int | None:
    spare = ahead._spare  # the test looks at the waiting shell
    return spare[1][0].pid if spare is not None else None


async def _open() -> None:
    return None


async def _launched(ahead: Ahead) -> int | None:
    """Launch what is planned; the shell starts once the caller pauses."""
    ahead.launch()
    await asyncio.sleep(0)
    return _started(ahead)


async def test_a_shell_taken_runs_its_command_once_its_gate_opens(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    ahead = Ahead()
    ahead.plan(launch := _launch(f"touch {mark}; echo done"))
    pid = await _launched(ahead)
    assert pid is not None and ahead.planned is None
    await until(lambda: reading_stdin(pid), what="the shell at its gate")
    assert not mark.exists()  # started, waiting at its gate
    started = ahead.take(list(launch.argv), launch.env, None)
    assert started is not None and started[0].pid == pid and ahead.taken == 1
    res = await run_command(list(launch.argv), env=launch.env, gate=_open, started=started)
    assert (res.exit_code, res.stdout) == (0, "done\n") and mark.exists()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"env": {"OTHER": "1"}}, id="env"),
        pytest.param({"cwd": "/"}, id="cwd"),
        pytest.param({"argv": "touch elsewhere"}, id="argv"),
    ],
)
async def test_a_shell_started_otherwise_is_ended_unrun(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    mark = tmp_path / "ran"
    launch = _launch(f"touch {mark}")
    ahead = Ahead()
    ahead.plan(launch)
    pid = await _launched(ahead)
    assert pid is not None
    argv = list(argv_for(GATE_PREFIX + change["argv"], "sh")) if "argv" in change else None
    env = {**launch.env, **change.get("env", {})}
    assert ahead.take(argv or list(launch.argv), env, change.get("cwd")) is None
    assert not _alive(pid) and ahead.taken == 0  # ended and reaped at once
    assert not mark.exists()


async def test_discard_and_a_wave_for_another_step_end_the_waiting_shell(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    ahead = Ahead()
    ahead.plan(_launch(f"touch {mark}", step="b"))
    first = await _launched(ahead)
    ahead.keep("b")  # the wave is the step it was started for: it waits on
    assert first is not None and _started(ahead) == first and _alive(first)
    ahead.keep("a")  # another step's wave (a retry of the step before, say)
    assert _started(ahead) is None and not _alive(first)
    ahead.plan(_launch(f"touch {mark}", step="b"))
    second = await _launched(ahead)
    ahead.discard()
    assert second is not None and not _alive(second) and not mark.exists()


async def test_a_shell_that_cannot_start_leaves_nothing(tmp_path: Path) -> None:
    ahead = Ahead()
    ahead.plan(_launch("true", cwd=str(tmp_path / "missing")))
    # the step's own start reports the missing directory, in its turn
    assert await _launched(ahead) is None and ahead.planned is None


async def test_a_shell_starts_at_the_callers_pause_and_not_once_the_run_is_done() -> None:
    ahead = Ahead()
    ahead.plan(_launch("true"))
    ahead.launch()
    assert _started(ahead) is None  # not before the runner pauses (at its gate, or its run)
    await asyncio.sleep(0)
    pid = _started(ahead)
    assert pid is not None
    ahead.plan(_launch("true"))
    ahead.launch()
    ahead.close()  # the run ended before the loop turned
    await asyncio.sleep(0)  # the turn at which the launch would start its shell
    assert _started(ahead) is None and not _alive(pid)


@pytest.mark.parametrize(
    ("shell", "env", "ok"),
    [
        ("sh", {}, True),
        ("/bin/bash", {}, True),
        ("dash", {}, True),
        ("bash", {"BASH_ENV": "/etc/profile"}, False),  # sourced before the gate
        ("sh", {"ENV": "/etc/profile"}, False),
        ("zsh", {}, False),  # reads ~/.zshenv
        ("ksh", {}, False),
    ],
)
def test_which_shells_are_started_ahead(shell: str, env: dict[str, str], ok: bool) -> None:
    assert quiet_start(shell, env) is ok


@pytest.fixture
def ahead_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[int]]]:
    """Every shell started ahead (pid) and every one taken, by any run; once the test is over,
    none of them may still be a process (each ran its step and was reaped, or was ended)."""
    log: dict[str, list[int]] = {"started": [], "taken": []}
    start, take = Ahead._start, Ahead.take

    def recording_start(self: Ahead, planned: Launch) -> None:
        start(self, planned)
        if (pid := _started(self)) is not None:
            log["started"].append(pid)

    def recording_take(self: Ahead, *args: Any) -> Any:
        started = take(self, *args)
        if started is not None:
            log["taken"].append(started[0].pid)
        return started

    monkeypatch.setattr(Ahead, "_start", recording_start)
    monkeypatch.setattr(Ahead, "take", recording_take)
    yield log
    assert not [pid for pid in log["started"] if _alive(pid)]


def _chain(name: str, *steps: str) -> str:
    body = "".join(f"  - name: {s}\n    shell: sh\n{_indent(body)}" for s, body in _split(steps))
    return f"name: {name}\ntype: chain\nsteps:\n{body}"


def _split(steps: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    for text in steps:
        name, _, body = text.partition(":")
        yield name, body.strip()


def _indent(body: str) -> str:
    return "".join(f"    {line}\n" for line in body.splitlines())


async def test_a_chain_takes_each_shell_started_for_it(
    start: Start, tmp_path: Path, ahead_log: dict[str, list[int]]
) -> None:
    log = tmp_path / "log"
    app = App()
    app.dag(_chain("four", *(f"{s}: command: echo {s} $$ >> {log}" for s in "abcd")))
    async with start(app) as rt:
        row = await run_to_end(rt, "four")
    assert row.status == "completed", row.error
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [step for step, _ in lines] == ["a", "b", "c", "d"]
    # b, c and d each ran in the shell started for it while the step before ran
    assert [int(pid) for _, pid in lines[1:]] == ahead_log["taken"] == ahead_log["started"]


async def test_a_failed_step_ends_the_next_steps_shell_unrun(
    start: Start, tmp_path: Path, ahead_log: dict[str, list[int]]
) -> None:
    mark = tmp_path / "b-ran"
    app = App()
    app.dag(_chain("fails", "a: command: sleep 0.2; exit 3", f"b: command: touch {mark}"))
    async with start(app) as rt:
        row = await run_to_end(rt, "fails")
    assert row.status == "failed"
    assert len(ahead_log["started"]) == 1 and ahead_log["taken"] == []
    assert not _alive(ahead_log["started"][0])  # ended and reaped: it can run nothing now
    assert not mark.exists()


async def test_a_retried_step_ends_the_next_steps_shell_and_starts_another(
    start: Start, tmp_path: Path, ahead_log: dict[str, list[int]]
) -> None:
    log, tries = tmp_path / "log", tmp_path / "tries"
    app = App()
    first = (
        f"a: command: echo try >> {tries}; test $(wc -l < {tries}) -ge 2\n"
        "retryPolicy: {limit: 2, intervalSec: 0}"
    )
    app.dag(_chain("retried", first, f"b: command: echo b >> {log}"))
    async with start(app) as rt:
        row = await run_to_end(rt, "retried")
    assert row.status == "completed", row.error
    assert tries.read_text().count("try") == 2 and log.read_text() == "b\n"
    assert len(ahead_log["started"]) == 2 and ahead_log["taken"] == ahead_log["started"][1:]


async def test_continued_after_a_failure_the_next_step_takes_its_shell(
    start: Start, tmp_path: Path, ahead_log: dict[str, list[int]]
) -> None:
    log = tmp_path / "log"
    app = App()
    first = "a: command: exit 1\ncontinueOn: {failure: true}"
    app.dag(_chain("goes_on", first, f"b: command: echo b >> {log}"))
    async with start(app) as rt:
        row = await run_to_end(rt, "goes_on")
    assert log.read_text() == "b\n" and ahead_log["taken"] == ahead_log["started"] != []
    assert row.status in ("completed", "failed")  # Dagu: partially succeeded


async def test_a_step_that_publishes_a_value_starts_nothing_ahead(
    start: Start, ahead_log: dict[str, list[int]]
) -> None:
    app = App()
    first = "a: command: echo hello\noutput: WORD"
    app.dag(_chain("published", first, 'b: command: echo "${WORD}!"'))
    async with start(app) as rt:
        row = await run_to_end(rt, "published")
        steps = await rt.ops.steps(row.id)
    assert row.status == "completed", row.error
    b = next(s for s in steps if s.name == "node:b")
    assert b.result["value"]["stdout"] == "hello!\n"
    assert ahead_log["started"] == []


async def test_a_step_whose_references_get_variables_of_their_own_takes_its_shell(
    start: Start, tmp_path: Path, ahead_log: dict[str, list[int]]
) -> None:
    """A command's references that become variables of their own (`${params.A}`, `$1`) are
    the same when its shell is started ahead as when it runs, so it takes that shell."""
    log = tmp_path / "log"
    app = App()
    steps = (f'{s}: command: echo {s} $$ "${{params.A}}" "$1" >> {log}' for s in "abc")
    app.dag('params: "A=x"\n' + _chain("bound", *steps))
    async with start(app) as rt:
        run = (await rt.ops.start("bound", {"params": {"A": "a value"}})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    lines = [line.split(maxsplit=2) for line in log.read_text().splitlines()]
    assert [(step, rest) for step, _, rest in lines] == [(s, "a value a value") for s in "abc"]
    assert [int(pid) for _, pid, _ in lines[1:]] == ahead_log["taken"] == ahead_log["started"]
