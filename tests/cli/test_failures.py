"""Every `tether` command, given bad or missing input, fails the way docs/cli.md says: one
line on stderr starting `tether: `, no traceback, and the documented exit code (2: usage or a
bad setting; 1: the command failed). Real subprocesses, as a user runs them. Our choice."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import database_env

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60
USAGE, FAILED = 2, 1
PASSWORD = "pw-Qz81Lx"  # noqa: S105 — a made-up value that must never be printed


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Case:
    """A command line, its exit code, and words its one line must hold. `database`: run it
    against the test's database (`up`), one that does not answer (`down`), or none set."""

    argv: tuple[str, ...]
    code: int
    says: tuple[str, ...]
    database: str | None = None
    env: dict[str, str] = field(default_factory=dict)


NOT_LOADED = ("this command loaded tether.examples:app (the default)", "pass --app MODULE:APP")

CASES = [
    # the command line and the settings
    Case(("serve", "--prot", "8001"), USAGE, ("unrecognized arguments: --prot",)),
    Case(("runs", "list", "--stat", "failed"), USAGE, ("unrecognized arguments: --stat",)),
    Case(("serve",), USAGE, ("TETHER_PORT=eighty",), env={"TETHER_PORT": "eighty"}),
    Case(("dags", "--dags", "{tmp}/nowhere", "list"), USAGE, ("--dags", "no such directory")),
    Case(("runs", "--protocols", "{tmp}/file", "list"), USAGE, ("not a directory",)),
    Case(
        ("worker",),
        USAGE,
        ("TETHER_DAGS=", "no such directory"),
        env={"TETHER_DAGS": "{tmp}/nowhere"},
    ),
    Case(
        ("serve",),
        USAGE,
        ("TETHER_PROTOCOLS=", "no such directory"),
        env={"TETHER_PROTOCOLS": "{tmp}/nowhere"},
    ),
    Case(("runs", "start", "long_job", "{oops"), USAGE, ("not JSON",), "up"),
    Case(("runs", "signal", "ex_nope", "go", "{oops"), USAGE, ("not JSON",), "up"),
    Case(
        ("runs", "approve", "ex_nope", "gate", "--json-inputs", "[1]"),
        USAGE,
        ("must be a JSON object",),
        "up",
    ),
    Case(("runs", "approve", "ex_nope", "gate", "oops"), USAGE, ("expected KEY=VALUE",), "up"),
    Case(("runs", "start", "--batch", "{tmp}/nowhere.jsonl"), USAGE, ("cannot read",), "up"),
    Case(("audit", "--since", "whenever"), USAGE, ("not a duration",), "up"),
    Case(
        ("tokens", "create", "--role", "admin", "--expires", "2001-01-01"),
        USAGE,
        ("in the past",),
        "up",
    ),
    Case(("keys", "rotate"), USAGE, ("TETHER_ENCRYPTION_KEYS is not set",), "up"),
    Case(("keys", "new", "bad kid"), USAGE, ("kid",)),
    # the App and its files
    Case(
        ("runs", "--app", "{tmp}/broken.py:app", "list"),
        FAILED,
        ("cannot load", "NameError", "broken.py, line 2"),
        "up",
    ),
    Case(("runs", "--app", "{tmp}/nowhere.py:app", "list"), FAILED, ("no such file",), "up"),
    Case(("runs", "--app", "no_such_module:app", "list"), FAILED, ("cannot import",), "up"),
    Case(("dags", "validate", "{tmp}/nowhere.yaml"), FAILED, ("No such file or directory",)),
    Case(("dags", "show", "etl"), FAILED, ("no DAG named 'etl'", "no DAG directory")),
    # no database
    Case(("runs", "list"), FAILED, ("no Tether database in", "run `tether serve`")),
    Case(("tokens", "list"), FAILED, ("no Tether database in",)),
    Case(("audit",), FAILED, ("no Tether database in",)),
    # unknown workflows and runs
    Case(("runs", "start", "nope"), FAILED, ("no workflow named 'nope'", *NOT_LOADED), "up"),
    Case(("dags", "start", "nope"), FAILED, ("no DAG named 'nope'", "pass --app"), "up"),
    *(
        Case(("runs", *argv), FAILED, ("no run 'ex_nope' in PostgreSQL at",), "up")
        for argv in (
            ("show", "ex_nope"),
            ("watch", "ex_nope"),
            ("signal", "ex_nope", "go"),
            ("answer", "ex_nope", "gate", "yes"),
            ("cancel", "ex_nope"),
            ("terminate", "ex_nope"),
            ("retry", "ex_nope"),
            ("resume", "ex_nope", "--from", "a"),
            ("approve", "ex_nope", "gate"),
        )
    ),
    Case(
        ("runs", "--tenant", "acme", "show", "ex_nope"),
        FAILED,
        ("no run 'ex_nope' visible to tenant 'acme'",),
        "up",
    ),
    Case(("runs", "list", "--cursor", "garbage"), FAILED, ("invalid cursor",), "up"),
    Case(("tokens", "revoke", "nobody"), FAILED, ("no live token named 'nobody'",), "up"),
    # the database does not answer
    *(
        Case(argv, FAILED, ("cannot reach PostgreSQL at 127.0.0.1:",), "down")
        for argv in (
            ("migrate",),
            ("runs", "list"),
            ("runs", "start", "long_job"),
            ("dags", "start", "nope"),
            ("tokens", "list"),
            ("audit",),
            ("worker",),
            ("serve", "--port", "0"),
        )
    ),
    Case(
        ("keys", "rotate"),
        FAILED,
        ("cannot reach PostgreSQL at 127.0.0.1:",),
        "down",
        env={"TETHER_ENCRYPTION_KEYS": "k1:" + base64.b64encode(b"K" * 32).decode()},
    ),
]


def clean_env() -> dict[str, str]:
    """This process's environment without TETHER_* settings, its PYTHONPATH made absolute (the
    commands run in another directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    paths = [str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _fill(text: str, tmp: Path) -> str:
    return text.replace("{tmp}", str(tmp))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A directory with a broken App module and a plain file."""
    (tmp_path / "broken.py").write_text("import tether\nx = undefined_name\n", "utf-8")
    (tmp_path / "file").write_text("not a directory\n", "utf-8")
    return tmp_path


def problems(case: Case, code: int | None, out: str, err: str, workspace: Path) -> list[str]:
    """What is wrong with one command's outcome (nothing, when it failed as documented)."""
    lines = err.splitlines()
    found = []
    if code != case.code:
        found.append(f"exit {code}, not {case.code}")
    if len(lines) != 1 or not lines[0].startswith("tether"):
        found.append(f"{len(lines)} lines on stderr")
    if "Traceback" in err + out:
        found.append("a traceback")
    found += [f"no {w!r}" for w in case.says if _fill(w, workspace) not in (lines or [""])[0]]
    if PASSWORD in err + out:
        found.append("the password")
    return found


async def outcome(case: Case, workspace: Path, db_url: str) -> tuple[int | None, str, str]:
    """Run the case's command line in `workspace`; its exit code, stdout and stderr."""
    env = clean_env()
    env["TETHER_DATA_DIR"] = str(workspace / "data")
    if case.database == "up":
        env |= database_env(db_url)
    elif case.database == "down":
        env["TETHER_DATABASE_URL"] = f"postgresql://u:{PASSWORD}@127.0.0.1:{closed_port()}/x"
    env |= {k: _fill(v, workspace) for k, v in case.env.items()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tether",
        *(_fill(a, workspace) for a in case.argv),
        cwd=workspace,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(TIMEOUT):
        out, err = await proc.communicate()
    return proc.returncode, out.decode(), err.decode()


async def test_every_failure_is_one_line_with_the_documented_exit_code(
    workspace: Path, db_url: str
) -> None:
    """For each case: one `tether…` line on stderr naming the problem, no traceback, never the
    database password, the exit code docs/cli.md gives; and no command created a database.
    The commands run a few at a time (each is a new interpreter)."""
    slots = asyncio.Semaphore(4)

    async def check(case: Case) -> str | None:
        async with slots:
            code, out, err = await outcome(case, workspace, db_url)
        found = problems(case, code, out, err, workspace)
        return f"tether {' '.join(case.argv)}: {', '.join(found)}\n{err}" if found else None

    failed = [f for f in await asyncio.gather(*(check(c) for c in CASES)) if f]
    assert not failed, "\n".join(failed)
    assert not (workspace / "data").exists()


def test_verbose_adds_the_traceback_above_the_same_line(db_url: str) -> None:
    """`--verbose` shows where the failure came from; the last line is the one line."""
    env = clean_env()
    proc = subprocess.run(
        [sys.executable, "-m", "tether", "--verbose", "runs", "start", "nope"],
        cwd=REPO,
        env={**env, **database_env(db_url)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == FAILED
    assert "Traceback" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("tether: WorkflowNotFound: no workflow named")
