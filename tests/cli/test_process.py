"""`tether` as a user runs it: real subprocesses against a real PostgreSQL — exit codes, one-line
errors, quiet output, Ctrl-C on `serve`, and `runs watch` following a run a worker drives."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
import pytest

from tests.conftest import database_env
from tests.e2e.conftest import free_port
from tests.waiting import healthy
from tether.examples import app as examples
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
FAST = WorkerSettings(concurrency=2, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)
TIMEOUT = 60


def env(**extra: str) -> dict[str, str]:
    """The suite's environment without its TETHER_* variables, plus `extra`; with a
    TETHER_DATABASE_URL, also how the suite reaches that database (behind a pooler: its
    statement cache and direct LISTEN URL)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    url = extra.get("TETHER_DATABASE_URL")
    return {**base, **(database_env(url) if url else {}), **extra}


def tether(*args: str, cwd: Path = REPO, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_runs_never_create_a_database(tmp_path: Path) -> None:
    """With no server data directory, `runs` names the directory it looked in and exits 1;
    nothing is created."""
    data = tmp_path / "nowhere"
    proc = tether("runs", "list", cwd=tmp_path, TETHER_DATA_DIR=str(data))
    assert proc.returncode == 1, proc.stderr
    assert str(data / "pg") in proc.stderr and "Traceback" not in proc.stderr
    assert not data.exists()


def test_a_bad_setting_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    proc = tether("serve", cwd=tmp_path, TETHER_PORT="eighty")
    assert proc.returncode == 2
    assert proc.stderr.startswith("tether: TETHER_PORT=eighty: ")
    assert proc.stderr.count("\n") == 1


def test_an_invalid_log_level_is_a_usage_error() -> None:
    proc = tether("--log-level", "LOUD", "tokens", "new", "x", "reader")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_tokens_need_neither_an_app_nor_a_database(tmp_path: Path) -> None:
    proc = tether("tokens", "new", "bot", "reader", cwd=tmp_path, TETHER_APP="no.such:app")
    assert proc.returncode == 0, proc.stderr
    assert "bot:reader:" in proc.stdout and not (tmp_path / ".tether").exists()


def test_invalid_input_prints_each_violation(db_url: str) -> None:
    """A typo'd field is refused (unknown fields are forbidden by default) and each violation
    is printed as `field: message`, as MCP returns them."""
    proc = tether("runs", "start", "long_job", '{"stepz": 2}', TETHER_DATABASE_URL=db_url)
    assert proc.returncode == 1
    assert "InvalidInput" in proc.stderr
    assert "  stepz: Extra inputs are not permitted" in proc.stderr.splitlines()
    bad = tether("runs", "start", "long_job", '{"steps": 0}', TETHER_DATABASE_URL=db_url)
    assert "  steps: Input should be greater than or equal to 1" in bad.stderr.splitlines()


def test_start_without_input_takes_the_input_defaults(db_url: str) -> None:
    """`runs start WF` with no JSON starts with `{}` (the input model's defaults), as a tool
    call without arguments does; a workflow whose input has a required field says which."""
    proc = tether("runs", "start", "long_job", "--json", TETHER_DATABASE_URL=db_url)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["workflow"] == "long_job"
    bad = tether("runs", "start", "document_review", TETHER_DATABASE_URL=db_url)
    assert bad.returncode == 1 and "  title: Field required" in bad.stderr.splitlines()


def test_the_app_comes_from_tether_app(db_url: str, tmp_path: Path) -> None:
    """`runs` finds the App through TETHER_APP without `--app`; a missing one is one line."""
    proc = tether("runs", "start", "long_job", "{}", TETHER_DATABASE_URL=db_url, TETHER_APP="x:y")
    assert proc.returncode == 1 and "cannot import 'x'" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_the_embedded_server_starts_quietly(tmp_path: Path) -> None:
    """No pgserver INFO lines, initdb output or XDG_RUNTIME_DIR warning unless `--verbose`:
    `migrate` creates the embedded database in a fresh directory and prints only its result."""
    extra = {"TETHER_DATA_DIR": str(tmp_path / "d")}
    plain = env(**extra)
    plain.pop("XDG_RUNTIME_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tether", "migrate"],
        cwd=tmp_path,
        env=plain,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout.startswith("applied")


def interrupted_serve(environ: dict[str, str], *options: str) -> tuple[int, str, str]:
    """`tether OPTIONS serve` with `environ`, sent SIGINT (what Ctrl-C sends) once it answers
    /healthz: its exit code, standard output and standard error."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether", *options, "serve", "--port", str(port)],
        cwd=REPO,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        healthy(proc, port, timeout=TIMEOUT)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def test_ctrl_c_on_serve_exits_130_with_one_line(db_url: str, tmp_path: Path) -> None:
    """SIGINT (what Ctrl-C sends) shuts `tether serve` down cleanly: exit 130, our one line,
    no traceback."""
    code, _, err = interrupted_serve(env(TETHER_DATABASE_URL=db_url))
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.splitlines()[-1] == "tether: interrupted; stopped"
    assert err.count("TETHER_STATE_KEY is not set") == 1


async def watch(db_url: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tether",
        "runs",
        "watch",
        *args,
        cwd=REPO,
        env=env(TETHER_DATABASE_URL=db_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def next_row(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await proc.stdout.readline()
    assert line, (await proc.stderr.read()) if proc.stderr else b""
    row: dict[str, Any] = orjson.loads(line)
    return row


@contextlib.asynccontextmanager
async def review(db_url: str) -> AsyncIterator[tuple[Runtime, str]]:
    """A runtime with a worker, and a `document_review` run started on it (it will wait for
    its approval)."""
    async with (
        asyncio.timeout(TIMEOUT),
        running(db_url, examples, worker_settings=FAST, janitor_interval_s=None) as rt,
    ):
        started = await rt.ops.start("document_review", {"title": "T", "body": "a b"})
        yield rt, started.execution.id


async def test_watch_follows_a_run_to_its_end(db_url: str) -> None:
    """`runs watch --json` prints one line per change — the open approval, then the run
    running again, then completed — and exits 0 with the run."""
    async with review(db_url) as (rt, run_id):
        proc = await watch(db_url, run_id, "--json")
        rows = [await next_row(proc)]
        while not rows[-1]["waits"]:
            rows.append(await next_row(proc))
        (wait,) = rows[-1]["waits"]
        await rt.ops.answer(run_id, wait["key"], {"decision": "approve", "ticket": "C-1"})
        while rows[-1]["status"] != "completed":
            rows.append(await next_row(proc))
        assert await proc.wait() == 0
    assert rows[-1]["output"]["ticket"] == "C-1"
    assert len({(r["status"], r["version"]) for r in rows}) == len(rows)  # one line per change


async def test_watch_until_wait_returns_3_and_a_terminated_run_exits_1(db_url: str) -> None:
    """`--until-wait` returns (exit 3) when the run waits for an answer, printing the wait and
    the command that answers it; a run that ends without success ends the watch with 1."""
    async with review(db_url) as (rt, run_id):
        proc = await watch(db_url, run_id, "--until-wait")
        out, err = await proc.communicate()
        assert proc.returncode == 3, err
        text = out.decode()
        assert "approval 'publish'" in text and f"tether runs answer {run_id} " in text
        follower = await watch(db_url, run_id, "--json")
        await next_row(follower)
        await rt.ops.terminate(run_id, by="test")
        assert await follower.wait() == 1


async def test_a_rejected_answer_prints_each_problem(db_url: str) -> None:
    """`runs answer` with an approval's required input missing is refused in one line per
    problem, exit 1, no traceback; the wait stays open (the new-user trial found a crash)."""
    async with review(db_url) as (rt, run_id):
        proc = await watch(db_url, run_id, "--until-wait")
        assert await proc.wait() == 3
        answer = await asyncio.to_thread(
            tether,
            "runs",
            "answer",
            run_id,
            "publish",
            '{"decision": "approve"}',
            TETHER_DATABASE_URL=db_url,
        )
        assert answer.returncode == 1, answer.stderr
        assert "Traceback" not in answer.stderr
        assert "  ticket: required to approve" in answer.stderr.splitlines()
        assert (await rt.ops.get(run_id)).current.status == "waiting"


# The embedded test server trusts local connections: any password works there.
SECRET_PASSWORD = "pw-Lm47Rt"  # noqa: S105 — a made-up value the test looks for in the logs


def with_password(url: str) -> str:
    """`url` with a password: its own when it has one (an external server checks it), else
    SECRET_PASSWORD."""
    parts = urlsplit(url)
    if parts.password:
        return url
    user = parts.netloc.rpartition("@")[0].split(":", 1)[0] or "postgres"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{SECRET_PASSWORD}@{host}"))


def test_the_server_logs_no_secret_from_start_to_stop(db_url: str) -> None:
    """Our choice: `tether serve --verbose` (every log line of ours, DEBUG up) says nothing of
    the database password, the state key, the token entries or the encryption keys, from
    start through a served request to shutdown."""
    url = with_password(db_url)
    password = urlsplit(url).password
    secrets_ = {
        "TETHER_DATABASE_URL": url,
        "TETHER_STATE_KEY": "state-Pw93Xs",
        "TETHER_API_TOKENS": "ci:operator:" + "cd" * 32,
        "TETHER_ENCRYPTION_KEYS": "k1:" + base64.b64encode(b"E" * 32).decode(),
    }
    code, out, err = interrupted_serve(env(**secrets_, TETHER_ACCESS_LOG="true"), "--verbose")
    assert code == 130, err
    logged = out + err
    assert "serving tether.examples:app" in logged and "GET /healthz" in logged
    for name, value in secrets_.items():
        secret = password if name == "TETHER_DATABASE_URL" else value.split(":")[-1]
        assert secret
        assert secret not in logged, name


def test_a_server_that_cannot_reach_its_database_does_not_print_the_password() -> None:
    """Our choice: the failure names what went wrong, not the URL that holds the password."""
    url = f"postgresql://tether:{SECRET_PASSWORD}@127.0.0.1:{free_port()}/tether"
    proc = tether("--verbose", "serve", "--port", str(free_port()), TETHER_DATABASE_URL=url)
    assert proc.returncode != 0
    assert proc.stderr.strip()
    assert SECRET_PASSWORD not in proc.stdout + proc.stderr


async def serve_in_background(*args: str, **extra: str) -> asyncio.subprocess.Process:
    """`tether serve ARGS` (its stderr piped), once it answers /healthz."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tether",
        "serve",
        *args,
        "--port",
        str(port),
        cwd=REPO,
        env=env(**extra),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(TIMEOUT), httpx.AsyncClient() as http:
        while True:
            assert proc.returncode is None
            try:
                if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return proc
            except httpx.TransportError:
                await asyncio.sleep(0.1)  # polls a subprocess's start-up; no event to wait on


def appears(path: Path) -> None:
    """Return once `path` exists (written by another process: polled), within TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


async def line_with(proc: asyncio.subprocess.Process, words: str) -> tuple[str, list[str]]:
    """Read stderr until a line holds `words`: that line, and every line read."""
    assert proc.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(TIMEOUT):
        while True:
            line = (await proc.stderr.readline()).decode()
            assert line, f"stderr ended before {words!r}: {seen}"
            seen.append(line.rstrip("\n"))
            if words in line:
                return seen[-1], seen


async def test_serve_says_once_where_it_serves_and_what(db_url: str) -> None:
    """The banner: the MCP URL, /metrics, the database's host (never its password) and what
    it serves; no console line for a server with a database URL (our choice)."""
    url = with_password(db_url)
    proc = await serve_in_background(TETHER_DATABASE_URL=url, TETHER_STATE_KEY="k")
    try:
        _, seen = await line_with(proc, "Ctrl-C stops it")
        proc.send_signal(signal.SIGINT)
        _, rest = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = "\n".join(seen) + rest.decode()
    (head,) = [line for line in seen if "serving tether.examples:app" in line]
    assert head.endswith("serving tether.examples:app: 3 workflows, no DAGs, no protocols")
    rows = {line.split()[0]: line.split()[-1] for line in seen if line.startswith("  ")}
    assert rows["MCP"].startswith("http://127.0.0.1:") and rows["MCP"].endswith("/mcp")
    assert rows["metrics"] == rows["MCP"].removesuffix("/mcp") + "/metrics"
    host = urlsplit(db_url).netloc.rpartition("@")[2]
    assert f"  database  PostgreSQL at {host}" in text
    assert "console" not in rows and SECRET_PASSWORD not in text
    assert text.count("serving tether.examples:app") == 1


async def test_a_second_ctrl_c_stops_at_once_and_the_next_server_finishes_the_run(
    db_url: str, tmp_path: Path
) -> None:
    """The first Ctrl-C says what it waits for (the run whose step is running); a second one
    ends the process at once, mid-step, exit 130. No run is lost: its lease expires and a new
    server runs the step again and finishes the run."""
    from tests.apps.held import app as held

    proc = await serve_in_background(
        "tests/apps/held.py:app",
        TETHER_DATABASE_URL=db_url,
        TETHER_STATE_KEY="k",
        TETHER_LEASE_S="1",
        TETHER_SHUTDOWN_GRACE_S="3600",  # the first Ctrl-C alone would wait an hour
    )
    started = tmp_path / "started"
    try:
        run = await asyncio.to_thread(
            tether,
            "runs",
            "--app",
            "tests/apps/held.py:app",
            "--json",
            "start",
            "held",
            orjson.dumps(str(tmp_path)).decode(),
            TETHER_DATABASE_URL=db_url,
        )
        assert run.returncode == 0, run.stderr
        run_id = orjson.loads(run.stdout)["id"]
        await asyncio.to_thread(appears, started)
        proc.send_signal(signal.SIGINT)
        first, _ = await line_with(proc, "tether: stopping")
        assert first == (
            "tether: stopping: finishing 1 run in flight, up to 3600 s; Ctrl-C again to stop now"
        )
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(TIMEOUT):
            _, rest = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130
    last = rest.decode().splitlines()[-1]
    assert last.startswith("tether: stopped now; the run in flight resumes on the next server")
    assert not (tmp_path / "release").exists()  # the step was still holding when it stopped
    (tmp_path / "release").touch()
    async with running(db_url, held, worker_settings=FAST, janitor_interval_s=None) as rt:
        ended = (await rt.ops.wait_for_end(run_id, timeout=TIMEOUT)).current
    assert ended.status == "completed"
    assert ended.output == os.getpid()  # the step ran again, in the new server
    assert len(started.read_text(encoding="utf-8").splitlines()) == 2
