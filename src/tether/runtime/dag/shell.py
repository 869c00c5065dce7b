"""Shell steps: run a command or script in a subprocess with a timeout, killing its whole
process group on timeout or cancellation, and keep its output (capped).

`TETHER_STEP_OUTPUT_BYTES` (default 1 MiB) caps what is kept of stdout and of stderr each; the
rest is read and dropped, so a chatty command never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import tempfile
from collections.abc import Mapping
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
    (SIGTERM, then SIGKILL after a grace period)."""
    limit = cap or output_cap()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None  # noqa: S101 — PIPE given
    reads = asyncio.ensure_future(
        asyncio.gather(_read(proc.stdout, limit), _read(proc.stderr, limit))
    )
    timed_out = False
    try:
        done, _ = await asyncio.wait({reads}, timeout=timeout)
        if not done:
            timed_out = True
            await _kill_group(proc)
        (out, cut_out), (err, cut_err) = await reads
        code = None if timed_out else await proc.wait()
    except BaseException:
        reads.cancel()
        await asyncio.shield(_kill_group(proc))
        raise
    return ShellResult(code, _decode(out), _decode(err), cut_out or cut_err, timed_out)


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


async def _read(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > max(room, 0):
            cut = True
    return bytes(kept), cut


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    for sig, wait in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            async with asyncio.timeout(wait):
                await proc.wait()
            return
        except TimeoutError:
            continue


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
