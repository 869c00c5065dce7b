"""Shell steps: run a command or script in a subprocess with a timeout, killing its whole
process group on timeout or cancellation, and keep its output (capped).

`TETHER_STEP_OUTPUT_BYTES` (default 1 MiB) caps what is kept of stdout and of stderr each; the
rest is read and dropped, so a chatty command never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import tempfile
import threading
from asyncio import AbstractEventLoop
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

DEFAULT_OUTPUT_BYTES: Final = 1024 * 1024
DEFAULT_SHELL: Final = "sh"
_KILL_GRACE_S: Final = 2.0


def output_cap() -> int:
    """Bytes kept of each stream (`TETHER_STEP_OUTPUT_BYTES`)."""
    raw = os.environ.get("TETHER_STEP_OUTPUT_BYTES")
    return int(raw) if raw and raw.isdigit() and int(raw) > 0 else DEFAULT_OUTPUT_BYTES


@dataclass(frozen=True)
class ShellResult:
    exit_code: int | None  # None: killed on timeout
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool


def argv_for(command: str, shell: str | None) -> list[str]:
    """`shell -c command` (the shell may carry flags, e.g. `bash -e`)."""
    return [*shlex.split(shell or DEFAULT_SHELL), "-c", command]


async def run_command(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    timeout: float | None = None,
    cap: int | None = None,
) -> ShellResult:
    """Run `argv` in its own process group; on timeout or cancellation the group is killed
    (SIGTERM, then SIGKILL after a grace period).

    The child is spawned as `subprocess.run` spawns it, and a thread of its own reads its
    pipes and reaps it (one thread per command, so a wide wave runs all its commands at
    once). This costs about what a bare `subprocess.run` does, where asyncio's subprocess
    transports cost half as much again (and uvloop's several times as much)."""
    limit = cap or output_cap()
    # Popen forks here, on the loop, as asyncio's own subprocess transport does.
    proc = subprocess.Popen(  # noqa: S603, ASYNC220 — the DAG's own command, as written
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        ended = _Collector(proc, limit, asyncio.get_running_loop())
    except BaseException:  # no reader (out of threads or descriptors): nothing may outlive us
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(ended.done), timeout)
        except TimeoutError:
            timed_out = True
            await _kill_group(proc, ended)
        code, out, err, cut = await ended.done
    except BaseException:
        await asyncio.shield(_kill_group(proc, ended))
        raise
    return ShellResult(None if timed_out else code, _decode(out), _decode(err), cut, timed_out)


async def run_script(
    script: str,
    interpreter: str,
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    timeout: float | None = None,
) -> ShellResult:
    """Write `script` to a temporary file and run `interpreter FILE`."""
    fd, path = tempfile.mkstemp(prefix="tether-step-", suffix=".sh")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(script)
        argv = [*shlex.split(interpreter), path]
        return await run_command(argv, env=env, cwd=cwd, timeout=timeout)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _Collector:
    """Reads a child's stdout and stderr (keeping `limit` bytes of each, dropping the rest so
    the child never blocks on a full pipe) until both close, then reaps it; `done` resolves
    on the event loop to `(exit code, stdout, stderr, truncated)`. `stop()` makes the reader
    give up on pipes that escaped descendants of a killed group still hold open."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: int, loop: AbstractEventLoop):
        self.done: asyncio.Future[tuple[int, bytes, bytes, bool]] = loop.create_future()
        self._proc = proc
        self._limit = limit
        self._loop = loop
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._open = True
        threading.Thread(target=self._run, name=f"tether-shell-{proc.pid}", daemon=True).start()

    def stop(self) -> None:
        with self._lock:
            if self._open:
                os.write(self._wake_w, b"x")

    def _run(self) -> None:
        try:
            value: Any = self._collect()
            settle: Callable[[Any], None] = self.done.set_result
        except BaseException as exc:  # noqa: BLE001 — handed to the awaiting coroutine
            value, settle = exc, self.done.set_exception
        finally:
            with self._lock:
                self._open = False
                os.close(self._wake_r)
                os.close(self._wake_w)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            self._loop.call_soon_threadsafe(_settle, self.done, settle, value)

    def _collect(self) -> tuple[int, bytes, bytes, bool]:
        out, err = self._proc.stdout, self._proc.stderr
        assert out is not None and err is not None  # noqa: S101 — PIPE given
        kept = {out.fileno(): bytearray(), err.fileno(): bytearray()}
        cut = False
        try:
            with selectors.DefaultSelector() as sel:
                for fd in (*kept, self._wake_r):
                    sel.register(fd, selectors.EVENT_READ)
                while len(sel.get_map()) > 1:
                    ready = [key.fd for key, _ in sel.select()]
                    if self._wake_r in ready:
                        break
                    for fd in ready:
                        chunk = os.read(fd, 65536)
                        if not chunk:
                            sel.unregister(fd)
                        room = max(self._limit - len(kept[fd]), 0)
                        kept[fd] += chunk[:room]
                        cut = cut or len(chunk) > room
            return self._proc.wait(), bytes(kept[out.fileno()]), bytes(kept[err.fileno()]), cut
        finally:
            out.close()
            err.close()


def _settle(done: asyncio.Future[Any], settle: Callable[[Any], None], value: Any) -> None:
    if not done.done():
        settle(value)


async def _kill_group(proc: subprocess.Popen[bytes], ended: _Collector) -> None:
    if ended.done.done():  # reaped: its group id may belong to someone else by now
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(ended.done), _KILL_GRACE_S)
            return
    ended.stop()  # the group is dead; a descendant that left it still holds the pipes
    with contextlib.suppress(Exception):
        await ended.done


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
