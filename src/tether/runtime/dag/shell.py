"""Shell steps: run a command or script in a subprocess with a timeout, killing its whole
process group on timeout or cancellation, and keep its output (capped).

`TETHER_STEP_OUTPUT_BYTES` (default 1 MiB) caps what is kept of stdout and of stderr each; the
rest is read and dropped, so a chatty command never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from asyncio import AbstractEventLoop
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

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


#: Put before a command the shell is started with ahead of its turn (`run_command`'s `gate`):
#: it reads one line from stdin, the gate, before anything else runs; at end of file (the
#: worker is gone, or the gate failed) the shell exits without running the command. On the
#: command's own first line, so line numbers in its messages are as written.
GATE_PREFIX: Final = "read -r TETHER_GATE || exit 125; unset TETHER_GATE; exec </dev/null; "
POSIX_SHELLS: Final = frozenset({"sh", "bash", "zsh", "ksh", "ash", "dash"})
_TRACING: Final = frozenset({"xtrace", "verbose"})

Gate = Callable[[], Awaitable[None]]
Started = tuple[subprocess.Popen[bytes], int]  # a shell waiting at its gate, and the gate


def gateable(shell: str, env: Mapping[str, str]) -> bool:
    """Whether a command may be run through `GATE_PREFIX` by `shell` (may carry flags): a
    POSIX shell that echoes no command it runs (no -x/-v, no xtrace in SHELLOPTS), so the
    gate leaves the command's output as it would be."""
    return _gateable(shell, env.get("SHELLOPTS", ""))


@functools.lru_cache(maxsize=64)
def _gateable(shell: str, shellopts: str) -> bool:
    words = _split(shell)
    if not words or os.path.basename(words[0]) not in POSIX_SHELLS:
        return False
    flags = [w for w in words[1:] if w[:1] in "-+" and w[1:2] != "-"]
    if any("x" in f or "v" in f for f in flags) or _TRACING & set(words[1:]):
        return False
    return not _TRACING & set(shellopts.split(":"))


def posix_shell(program: str) -> bool:
    """Whether `program` (a shell or an interpreter, with flags; `env [-S] [NAME=…] PROGRAM`
    too, as a shebang line names one) is a POSIX shell (`POSIX_SHELLS`)."""
    try:
        words = _split(program)
    except ValueError:  # unbalanced quotes: its start fails, as the step's own start reports
        return False
    if words and os.path.basename(words[0]) == "env":
        words = tuple(w for w in words[1:] if w[:1] != "-" and "=" not in w)
    return bool(words) and os.path.basename(words[0]) in POSIX_SHELLS


def one_word(value: str) -> str:
    """`value` quoted as one word of a shell's command line (`argv_for` splits it); an empty
    value stays empty (it adds no word)."""
    return shlex.quote(value) if value else value


def argv_for(command: str, shell: str | None) -> list[str]:
    """`shell -c command` (the shell may carry flags, e.g. `bash -e`)."""
    return [*_split(shell or DEFAULT_SHELL), "-c", command]


@functools.lru_cache(maxsize=64)
def _split(shell: str) -> tuple[str, ...]:
    return tuple(shlex.split(shell))


async def run_command(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    timeout: float | None = None,
    cap: int | None = None,
    gate: Gate | None = None,
    started: Started | None = None,
    then: Callable[[], None] | None = None,
) -> ShellResult:
    """Run `argv` in its own process group; on timeout or cancellation the group is killed
    (SIGTERM, then SIGKILL after a grace period).

    With `gate`, argv's command starts with `GATE_PREFIX`: the shell is started at once
    and waits, reading its stdin, while `gate()` is awaited (the run's previous write
    commits); then it is given its line and runs the command (the timeout counts from
    there). If `gate()` raises, the shell is given end of file, killed and reaped, and the
    error is raised: the command never ran. `started`: that shell, already started with
    exactly this argv, env and cwd, waiting at its gate (`ahead.Ahead.take`). `then` is
    called once this command's shell is started, before its gate is awaited
    (`ahead.Ahead.launch`: the next step's shell starts at the runner's first pause).

    The child is spawned as `subprocess.run` spawns it; the event loop reads its pipes and
    learns of its exit from a pidfd (Linux), so a command costs no thread and no hand-off
    between threads (a wide wave runs all its commands at once). Where there is no pidfd, a
    thread of its own waits for the exit."""
    limit = cap or output_cap()
    if gate is None:
        proc = _spawn(argv, env, cwd, subprocess.DEVNULL)
    else:
        proc, gate_out = started or start_gated(argv, env, cwd)
    if then is not None:
        then()
    if gate is not None:
        await _open_gate(proc, gate, gate_out)
    try:
        ended = _Collector(proc, limit, asyncio.get_running_loop())
    except BaseException:  # no watcher (out of descriptors or threads): nothing may outlive us
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await ended.ended()
        except TimeoutError:
            timed_out = True
            await _kill_group(proc, ended)
        code, out, err, cut = await ended.done
    except BaseException:
        await asyncio.shield(_kill_group(proc, ended))
        raise
    return ShellResult(None if timed_out else code, _decode(out), _decode(err), cut, timed_out)


def _spawn(
    argv: list[str], env: Mapping[str, str], cwd: str | None, stdin: int
) -> subprocess.Popen[bytes]:
    """Start `argv` in a session (process group) of its own, stdout and stderr piped. A bare
    program name is looked up on the step's PATH once (`_found`), not by trying each
    directory in the forked child every time; argv[0] stays as written."""
    found = _found(argv[0], env.get("PATH"))
    try:
        return _popen(argv, env, cwd, stdin, found)
    except FileNotFoundError:
        if found is None:
            raise
        _found.cache_clear()  # moved since it was found: look again
        return _popen(argv, env, cwd, stdin, None)


def _popen(
    argv: list[str], env: Mapping[str, str], cwd: str | None, stdin: int, exe: str | None
) -> subprocess.Popen[bytes]:
    # Popen forks here, on the loop, as asyncio's own subprocess transport does.
    return subprocess.Popen(  # noqa: S603 — the DAG's own command, as written
        argv,
        executable=exe,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )


@functools.lru_cache(maxsize=64)
def _found(program: str, path: str | None) -> str | None:
    """The file a bare `program` name runs on `path` (a PATH value); None for a path, for a
    PATH with a relative directory (the child's working directory would decide), or when not
    found: Popen then looks it up itself."""
    dirs = (path if path is not None else os.defpath).split(os.pathsep)
    if os.sep in program or not program or not all(os.path.isabs(d) for d in dirs):
        return None
    return shutil.which(program, path=os.pathsep.join(dirs))


def start_gated(argv: list[str], env: Mapping[str, str], cwd: str | None) -> Started:
    """Start `argv` (a command behind `GATE_PREFIX`) with its stdin the read end of a new
    pipe; returns the process and the pipe's write end (its gate)."""
    gate_in, gate_out = os.pipe()
    try:
        proc = _spawn(argv, env, cwd, gate_in)
    except BaseException:
        os.close(gate_out)
        raise
    finally:
        os.close(gate_in)
    return proc, gate_out


def abandon(proc: subprocess.Popen[bytes], gate_out: int) -> None:
    """End a shell waiting at its gate, unrun: it reads end of file and exits before the
    command (killed anyway), and is reaped at once."""
    os.close(gate_out)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()  # it ran nothing that could hold its pipes


async def _open_gate(proc: subprocess.Popen[bytes], gate: Gate, gate_out: int) -> None:
    """Let the waiting shell go on once `gate()` returns; if it raises, end the shell
    (`abandon`) and raise."""
    try:
        await gate()
    except BaseException:
        abandon(proc, gate_out)
        raise
    try:
        with contextlib.suppress(BrokenPipeError):  # it died meanwhile: its end is collected
            os.write(gate_out, b"\n")
    finally:
        os.close(gate_out)


async def run_script(
    script: str,
    interpreter: str,
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    timeout: float | None = None,
    then: Callable[[], None] | None = None,
) -> ShellResult:
    """Write `script` to a temporary file and run `interpreter FILE` (`then`: as for
    `run_command`)."""
    fd, path = tempfile.mkstemp(prefix="tether-step-", suffix=".sh")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(script)
        argv = [*shlex.split(interpreter), path]
        return await run_command(argv, env=env, cwd=cwd, timeout=timeout, then=then)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _Collector:
    """Reads a child's stdout and stderr on the event loop (keeping `limit` bytes of each,
    dropping the rest so the child never blocks on a full pipe) and watches for its exit;
    once both pipes have closed and it has exited, reaps it: `done` resolves to `(exit code,
    stdout, stderr, truncated)`. The child is reaped only then, so its process group id stays
    its own while the group may still be killed. `stop()` gives up on pipes that escaped
    descendants of a killed group still hold open."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: int, loop: AbstractEventLoop):
        self.done: asyncio.Future[tuple[int, bytes, bytes, bool]] = loop.create_future()
        self._proc = proc
        self._limit = limit
        self._loop = loop
        out, err = proc.stdout, proc.stderr
        assert out is not None and err is not None  # noqa: S101 — PIPE given
        self._pipes = {out.fileno(): out, err.fileno(): err}
        self._kept = {fd: bytearray() for fd in self._pipes}
        self._cut = False
        self._exited = False
        self._pidfd: int | None = None
        self._waiters: list[asyncio.Future[None]] = []
        try:
            self._watch_exit()
            for fd in self._pipes:
                os.set_blocking(fd, False)
                loop.add_reader(fd, self._read, fd)
        except BaseException:
            self._close()
            raise

    def ended(self) -> asyncio.Future[None]:
        """A future of its own, resolved as `done` is: cancelling it leaves `done` alone (as
        shielding `done` would, one hand-off between callbacks fewer)."""
        waiter: asyncio.Future[None] = self._loop.create_future()
        if self.done.done():
            waiter.set_result(None)
        else:
            self._waiters.append(waiter)
        return waiter

    def stop(self) -> None:
        for fd in list(self._pipes):
            self._drop(fd)
        self._settle()

    def _watch_exit(self) -> None:
        try:
            self._pidfd = os.pidfd_open(self._proc.pid)
        except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
            threading.Thread(
                target=_wait_exit, args=(self._proc.pid, self._loop, self._on_exit), daemon=True
            ).start()
            return
        self._loop.add_reader(self._pidfd, self._on_exit)

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(exc)
            return
        if not chunk:
            self._drop(fd)
            self._settle()
            return
        kept = self._kept[fd]
        room = max(self._limit - len(kept), 0)
        kept += chunk[:room]
        self._cut = self._cut or len(chunk) > room

    def _on_exit(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
        self._exited = True
        self._settle()

    def _drop(self, fd: int) -> None:
        pipe = self._pipes.pop(fd, None)
        if pipe is not None:
            self._loop.remove_reader(fd)
            pipe.close()

    def _settle(self) -> None:
        if self._pipes or not self._exited or self.done.done():
            return
        try:
            code = self._proc.wait()  # it has exited: this reaps it at once
        except BaseException as exc:  # noqa: BLE001 — handed to the awaiting coroutine
            self._fail(exc)
            return
        self._close()
        out, err = (bytes(kept) for kept in self._kept.values())
        self.done.set_result((code, out, err, self._cut))
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        self._close()
        if not self.done.done():
            self.done.set_exception(exc)
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _close(self) -> None:
        for fd in list(self._pipes):
            self._drop(fd)
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


def _wait_exit(pid: int, loop: AbstractEventLoop, on_exit: Callable[[], None]) -> None:
    """Without a pidfd: wait in a thread until `pid` has exited, leaving it to be reaped."""
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
        loop.call_soon_threadsafe(on_exit)


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
