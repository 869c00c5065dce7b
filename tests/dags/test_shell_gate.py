"""The shell runner's gate (`run_command(gate=...)`): a chain's next command is started while
the previous step's result commits, and runs only once that commit is in; a gate that fails
means the command never ran. Its output is what it would have been without the gate."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.waiting import at_gate, until
from tether.runtime.dag.shell import GATE_PREFIX, argv_for, gateable, run_command


def _gated(command: str, shell: str = "sh -e") -> list[str]:
    return argv_for(GATE_PREFIX + command, shell)


async def test_the_command_runs_only_once_the_gate_opens(tmp_path: Path) -> None:
    """The shell is started at once, then waits: nothing of the command has happened while
    the gate is shut; once it opens, the command runs, its stdin still /dev/null."""
    mark = tmp_path / "ran"
    shut = asyncio.Event()
    waited: list[bool] = []

    async def gate() -> None:
        # blocked reading stdin: had it not waited, `touch` would have run before `cat` read
        await until(lambda: at_gate(str(mark)), what="the shell at its gate")
        waited.append(mark.exists())
        shut.set()

    res = await run_command(_gated(f"touch {mark}; cat; echo done"), env=os.environ, gate=gate)
    assert waited == [False] and shut.is_set()
    assert (res.exit_code, res.stdout, res.stderr) == (0, "done\n", "")
    assert mark.exists()


async def test_a_failed_gate_means_the_command_never_ran(tmp_path: Path) -> None:
    mark = tmp_path / "ran"

    async def gate() -> None:
        await until(lambda: at_gate(str(mark)), what="the shell at its gate")
        raise RuntimeError("the previous write failed")

    with pytest.raises(RuntimeError, match="previous write failed"):
        await run_command(_gated(f"touch {mark}"), env=os.environ, gate=gate)
    assert not mark.exists()  # run_command reaped the shell before it raised


async def test_cancelled_at_the_gate_the_command_never_runs(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    never = asyncio.Event()

    async def gate() -> None:
        await never.wait()

    task = asyncio.create_task(run_command(_gated(f"touch {mark}"), env=os.environ, gate=gate))
    await until(lambda: at_gate(str(mark)), what="the shell at its gate")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not mark.exists()  # run_command reaped the shell before it raised


@pytest.mark.parametrize(
    "command",
    [
        "echo out; echo err >&2; exit 3",
        "true\nno_such_command_for_tether_tests\necho after",  # errexit on line 2: its number
        'echo "$0 $# ${TETHER_GATE-unset}"',  # $0, no arguments, the gate's variable gone
        "read -r line || echo eof",  # stdin is /dev/null again
        "# a comment first\necho ok",
    ],
)
async def test_gated_output_is_the_ungated_output(command: str) -> None:
    async def gate() -> None:
        return None

    plain = await run_command(argv_for(command, "sh -e"), env=os.environ)
    gated = await run_command(_gated(command), env=os.environ, gate=gate)
    assert (gated.exit_code, gated.stdout, gated.stderr) == (
        plain.exit_code,
        plain.stdout,
        plain.stderr,
    )


@pytest.mark.parametrize(
    ("shell", "env", "ok"),
    [
        ("sh", {}, True),
        ("/bin/bash -e", {}, True),
        ("bash -o pipefail", {}, True),
        ("zsh -eu", {}, True),
        ("bash -x", {}, False),  # would trace the gate into stderr
        ("sh -ex", {}, False),
        ("bash -o xtrace", {}, False),
        ("sh -v", {}, False),
        ("bash", {"SHELLOPTS": "braceexpand:xtrace"}, False),
        ("python3", {}, False),
        ("fish", {}, False),
        ("", {}, False),
    ],
)
def test_which_shells_take_the_gate(shell: str, env: dict[str, str], ok: bool) -> None:
    assert gateable(shell, env) is ok


def test_a_bare_program_is_looked_up_once_on_the_steps_path(tmp_path: Path) -> None:
    """`_found`: the step's PATH decides (not the worker's); a relative directory in it, or a
    path, leaves the lookup to Popen in the child's working directory."""
    from tether.runtime.dag.shell import _found

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tether-test-tool"
    tool.write_text("#!/bin/sh\necho mine\n")
    tool.chmod(0o755)
    assert _found("tether-test-tool", f"{bin_dir}:/usr/bin") == str(tool)
    assert _found("tether-test-tool", "/usr/bin") is None
    assert _found("tether-test-tool", f"bin:{bin_dir}") is None  # relative: the child's cwd
    assert _found("./tether-test-tool", str(bin_dir)) is None


async def test_a_program_found_on_the_steps_path_runs_with_its_argv0(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tether-test-tool2"
    tool.write_text('#!/bin/sh\necho "ran as $0"\n')
    tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    res = await run_command(["tether-test-tool2"], env=env)
    assert (res.exit_code, res.stdout) == (0, f"ran as {tool}\n")  # the kernel's #! argv
    res = await run_command(["sh", "-c", 'echo "$0"'], env=env)
    assert res.stdout == "sh\n"  # argv[0] as written
