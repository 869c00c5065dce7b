"""Waiting for an event the test cannot await directly (a row, a file, a process's state, a
log line): re-check a condition every few milliseconds until it holds, within an overall time
limit. A test that asserts something did not happen first waits here for an event that would
have come after it."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import platform
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import httpx
import psutil  # type: ignore[import-untyped]  # no stubs in the dev dependencies

T = TypeVar("T")

_WAITING_ON_A_LOCK = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'
"""
#: read(2)'s system call number, as /proc/PID/syscall shows it
_READ = {"x86_64": "0", "aarch64": "63"}.get(platform.machine(), "0")


@overload
async def until(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = ...,
    every: float = ...,
    what: str = ...,
) -> T: ...


@overload
async def until(
    check: Callable[[], T | None], *, timeout: float = ..., every: float = ..., what: str = ...
) -> T: ...


async def until(
    check: Callable[[], object],
    *,
    timeout: float = 10.0,
    every: float = 0.02,
    what: str = "the condition",
) -> object:
    """Call `check` (a function or a coroutine function) every `every` seconds until it returns
    a truthy value, and return that value (never None). Raises AssertionError naming `what` after
    `timeout` seconds."""
    last: object = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                last = check()
                if inspect.isawaitable(last):
                    last = await last
                if last:
                    return last
                await asyncio.sleep(every)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})") from None


def healthy(
    proc: subprocess.Popen[Any],
    port: int,
    *,
    timeout: float = 60.0,
    log: Callable[[], str] | None = None,
) -> None:
    """Return once the server process `proc` answers 200 on `/healthz` at 127.0.0.1:`port`
    (its start-up is polled: there is no event to wait on). Raises AssertionError when `proc`
    exits first (with `log()` as the message, when given) or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, log() if log else "the server exited during start-up"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the server did not answer /healthz in {timeout} s"
        time.sleep(0.1)


def reading_stdin(pid: int) -> bool:
    """Whether process `pid` is blocked in read(2) on its standard input (Linux: its current
    system call, in /proc/PID/syscall, is read on descriptor 0)."""
    try:
        call = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:  # it has ended
        return False
    return call[:2] == [_READ, "0x0"]


def child(text: str, of: int | None = None) -> int | None:
    """The pid of a process under `of` (this process by default; at any depth) whose command
    line contains `text`, if any."""
    try:
        below = psutil.Process(of).children(recursive=True)
    except psutil.Error:  # `of` has ended
        return None
    for proc in below:
        with contextlib.suppress(psutil.Error):
            if text in " ".join(proc.cmdline()):
                return int(proc.pid)
    return None


def ended(pid: int) -> bool:
    """Whether process `pid` has ended (gone, or a zombie left to be reaped)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def at_gate(text: str, of: int | None = None) -> int | None:
    """The pid of the shell under `of` (as `child`) whose command line contains `text` once it
    waits at its gate (`GATE_PREFIX`: blocked reading its stdin, before its command)."""
    pid = child(text, of)
    return pid if pid is not None and reading_stdin(pid) else None


async def waiting_on_a_lock(db: Any) -> bool:
    """Whether some session of this database waits for a lock (a row, an advisory lock);
    `db` is a pool or a connection not inside a transaction (a transaction keeps one
    snapshot of pg_stat_activity)."""
    return bool(await db.fetchval(_WAITING_ON_A_LOCK))
