"""The shell runner on its own: output, the output cap, timeouts and cancellation kill the
command's whole process group, and a wide wave of commands runs at once."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from tests.waiting import child, until
from tether.runtime.dag import shell
from tether.runtime.dag.shell import argv_for, run_command


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _gone(pid: int, within: float = 5.0) -> bool:
    async with asyncio.timeout(within):
        while _alive(pid):  # noqa: ASYNC110 — a process ending is no event we can await
            await asyncio.sleep(0.01)
    return True


async def test_output_and_exit_code() -> None:
    res = await run_command(argv_for("echo out; echo err >&2; exit 3", None), env=os.environ)
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert not res.truncated and not res.timed_out


async def test_output_beyond_the_cap_is_read_and_dropped() -> None:
    res = await run_command(
        argv_for("head -c 300000 /dev/zero; echo done >&2", None), env=os.environ, cap=1000
    )
    assert res.exit_code == 0  # the command never blocked on a full pipe
    assert len(res.stdout) == 1000 and res.truncated and res.stderr == "done\n"


async def test_timeout_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cmd = f"sleep 30 & echo $! > {pidfile}; wait"
    res = await run_command(argv_for(cmd, None), env=os.environ, timeout=0.5)
    assert res.timed_out and res.exit_code is None
    assert await _gone(int(pidfile.read_text()))


async def test_cancellation_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cmd = f"sleep 30 & echo $! > {pidfile}; wait"
    task = asyncio.ensure_future(run_command(argv_for(cmd, None), env=os.environ))
    async with asyncio.timeout(5):
        while not pidfile.exists() or not pidfile.read_text().strip():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone(int(pidfile.read_text()))


async def test_an_escaped_descendant_does_not_hold_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A descendant that left the group keeps the pipes open; the step still ends after the
    kill grace periods instead of waiting for it."""
    monkeypatch.setattr(shell, "_KILL_GRACE_S", 0.2)
    began = time.monotonic()
    res = await run_command(
        argv_for("setsid sleep 3 & sleep 30", None), env=os.environ, timeout=0.2
    )
    assert res.timed_out
    assert time.monotonic() - began < 2.0


async def test_a_wide_wave_runs_at_once() -> None:
    began = time.monotonic()
    results = await asyncio.gather(
        *(run_command(argv_for("sleep 1", None), env=os.environ) for _ in range(24))
    )
    assert all(r.exit_code == 0 for r in results)
    assert time.monotonic() - began < 3.0  # in batches of a small thread pool: 4 s or more


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd: Linux only")
async def test_a_command_takes_no_thread() -> None:
    """The loop reads the pipes and a pidfd tells it of the exit: no thread per command."""
    before = threading.active_count()
    task = asyncio.ensure_future(run_command(argv_for("sleep 0.3", None), env=os.environ))
    # the child running: run_command spawned it and set up its watcher in the same step
    await until(lambda: child("sleep 0.3"), what="the command's process")
    assert threading.active_count() == before
    assert (await task).exit_code == 0


async def test_without_a_pidfd_a_thread_waits_for_the_exit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where there is no pidfd (not Linux), a thread waits for the exit; output, exit code and
    the group kill on timeout are the same."""

    def no_pidfd(_pid: int) -> int:
        raise OSError("no pidfd here")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd, raising=False)
    res = await run_command(argv_for("echo out; echo err >&2; exit 3", None), env=os.environ)
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    pidfile = tmp_path / "pid"
    cmd = f"sleep 30 & echo $! > {pidfile}; wait"
    res = await run_command(argv_for(cmd, None), env=os.environ, timeout=0.3)
    assert res.timed_out and res.exit_code is None
    assert await _gone(int(pidfile.read_text()))
