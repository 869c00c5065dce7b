"""The README runs as written: its "Writing workflows" example is imported from README.md and
driven to its result on a real PostgreSQL, and every shell command it shows is run — the CLI
lines, the curl discover call against a real `tether serve`, `tokens new`, `migrate`,
`worker` — with only placeholders (RUN_ID, KEY, the port, the database URL) filled in."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from tests.conftest import database_env, direct_url
from tests.e2e.conftest import free_port
from tests.waiting import healthy
from tether.loader import load_app
from tether.runtime import errors as rt_errors
from tether.runtime.service import running
from tether.runtime.worker import WorkerSettings
from tether.storage.notify import READY_CHANNEL

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text("utf-8")
FAST = WorkerSettings(concurrency=4, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)
TIMEOUT = 60  # seconds for one test's waits


# --- reading the README ----------------------------------------------------------------------


def blocks(lang: str) -> list[str]:
    """The README's fenced code blocks of `lang`, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.S | re.M)


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else len(README)]


def commands(block: str) -> list[str]:
    """A shell block's command lines: continuations joined, `# comments` dropped."""
    out, pending = [], ""
    for line in block.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quoted argument continues on the next line
            continue
        pending = ""
        if words:
            out.append(shlex.join(words))
    return out


def cli_block() -> str:
    """The Quick start's `tether runs` block."""
    (block,) = [b for b in blocks("sh") if "runs answer" in b]
    return block


def readme_commands() -> list[str]:
    return [c for b in blocks("sh") for c in commands(b)]


def as_argv(command: str, **fill: str) -> list[str]:
    """`.venv/bin/tether ARGS` as `python -m tether ARGS`, placeholders filled in."""
    words = shlex.split(command)
    if words[-1] == "&":  # started in the background: the test keeps the process itself
        words.pop()
    assert words[0] == ".venv/bin/tether", command
    return [sys.executable, "-m", "tether", *(fill.get(w, w) for w in words[1:])]


def test_every_readme_command_is_one_this_module_runs() -> None:
    """Each shell line in the README is either run by a test here or named as run elsewhere;
    a new line fails this test until a test runs it (our choice)."""
    run_here = {
        *commands(cli_block()),  # the CLI block: test_the_cli_block_drives_runs_to_the_end
        *commands(section("Security").split("```sh\n")[1].split("```")[0]),
        *commands(section("Operating it").split("```sh\n")[1].split("```")[0]),
    }
    elsewhere = {
        "make serve",  # `tether serve` on the embedded default: tests/e2e/test_embedded.py
        "make test",  # runs this suite
        # installs requirements/lock.txt and the package into .venv (what `make` does first)
        "python3 -m venv .venv && .venv/bin/pip install --require-hashes --no-deps -r "
        "requirements/lock.txt",
        ".venv/bin/pip install --no-deps --no-build-isolation -e .",
        ".venv/bin/tether serve",  # tests/e2e/test_embedded.py
        ".venv/bin/python -m pytest",  # runs this suite
    }
    curl = [c for c in readme_commands() if c.startswith("curl ")]
    assert len(curl) == 1  # test_the_readme_curl_discovers_a_real_server
    rest = set(readme_commands()) - run_here - set(curl)
    assert rest == {shlex.join(shlex.split(c, comments=True)) for c in elsewhere}


# --- the Writing workflows example -----------------------------------------------------------


@pytest.fixture
def example_app(tmp_path: Path) -> Any:
    (code,) = [b for b in blocks("python") if "def review(" in b]
    assert "def review(" in section("Writing workflows")
    path = tmp_path / "readme_example.py"
    path.write_text(code, "utf-8")
    return load_app(f"{path}:app")


async def skip_sleep(db_url: str, run_id: str) -> None:
    """Move a sleeping run's timer to now: its recorded wake-up time and the row's `wake_at`,
    then the notification a worker listens for — what the hour passing would do."""
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        async with conn.transaction():
            moved = await conn.execute(
                "UPDATE steps SET result = jsonb_set(result, '{until}', to_jsonb($2::text)) "
                "WHERE execution_id = $1 AND kind = 'sleep' AND NOT done",
                run_id,
                past,
            )
            assert moved == "UPDATE 1"
            await conn.execute(
                "UPDATE executions SET wake_at = now() WHERE id = $1 AND status = 'waiting'",
                run_id,
            )
            await conn.execute("SELECT pg_notify($1, $2)", READY_CHANNEL, run_id)
    finally:
        await conn.close()


async def test_the_writing_workflows_example_runs_as_written(db_url: str, example_app: Any) -> None:
    """The README's `review` workflow: its step summarises, it waits for the `publish`
    approval (the required ticket is enforced), sleeps an hour durably (moved forward in the
    database here), and returns the ticket."""
    async with (
        asyncio.timeout(TIMEOUT),
        running(
            db_url, example_app, worker_settings=FAST, janitor_interval_s=None, run_migrations=False
        ) as rt,
    ):
        started = await rt.ops.start("review", {"title": "Q3 plan", "body": "three short words"})
        run_id = started.execution.id
        parked = await rt.ops.wait_until(run_id, lambda r: bool(r.waits), timeout=TIMEOUT)
        assert parked.current.details == "waiting for approval of Q3 plan (3 words)"
        (wait,) = parked.current.waits
        assert (wait["kind"], wait["name"], wait["required"]) == ("approval", "publish", ["ticket"])
        with pytest.raises(rt_errors.AnswerRejected, match="ticket"):
            await rt.ops.answer(run_id, wait["key"], {"decision": "approve"}, by="test")
        await rt.ops.answer(
            run_id, wait["key"], {"decision": "approve", "ticket": "CHG-42"}, by="test"
        )
        asleep = await rt.ops.wait_until(
            run_id, lambda r: r.status == "waiting" and not r.waits, timeout=TIMEOUT
        )
        wake_at = asleep.current.wake_at
        assert wake_at is not None and wake_at - datetime.now(UTC) > timedelta(minutes=59)
        await skip_sleep(db_url, run_id)
        done = await rt.ops.wait_for_end(run_id, timeout=TIMEOUT)
    assert done.current.status == "completed"
    assert done.current.output == "published with CHG-42"


async def test_a_push_back_in_the_example_continues_as_new(db_url: str, example_app: Any) -> None:
    """Pushing the README example back ends the run `continued_as_new`; its handle follows to
    the successor (same business id), which asks for approval again."""
    async with (
        asyncio.timeout(TIMEOUT),
        running(
            db_url, example_app, worker_settings=FAST, janitor_interval_s=None, run_migrations=False
        ) as rt,
    ):
        started = await rt.ops.start("review", {"title": "Q3 plan", "body": "draft"})
        first = started.execution
        parked = await rt.ops.wait_until(first.id, lambda r: bool(r.waits), timeout=TIMEOUT)
        (wait,) = parked.current.waits
        await rt.ops.answer(first.id, wait["key"], {"decision": "push_back"}, by="test")
        again = await rt.ops.wait_until(
            first.id, lambda r: r.id != first.id and bool(r.waits), timeout=TIMEOUT
        )
    assert again.current.business_id == first.business_id
    assert [w["name"] for w in again.current.waits] == ["publish"]


# --- the shell commands ----------------------------------------------------------------------


def run(argv: list[str], db_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env={**os.environ, **database_env(db_url), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    return proc


def runs_json(db_url: str, *args: str) -> Any:
    return orjson.loads(
        run([sys.executable, "-m", "tether", "runs", "--json", *args], db_url).stdout
    )


class Server:
    """`tether serve` (or any `tether` command) as a subprocess with this test's database."""

    def __init__(self, db_url: str, log: Path, argv: list[str], **env: str) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env={**os.environ, **database_env(db_url), "TETHER_POLL_S": "0.1", **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_healthy(self, port: int) -> None:
        healthy(
            self.proc,
            port,
            timeout=TIMEOUT,
            log=lambda: self.log.read_text("utf-8", errors="replace"),
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def wait_for(db_url: str, run_id: str, done: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    row: dict[str, Any] = {}
    while time.monotonic() < deadline:
        row = runs_json(db_url, "show", run_id)
        if done(row):
            return row
        time.sleep(0.1)  # polls another process's progress through the CLI, bounded
    raise AssertionError(f"run {run_id} never got {what}: {row}")


def test_the_cli_block_drives_runs_to_the_end(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    """The README's CLI lines, run as written against `tether serve`'s workers: long_job
    completes, document_review waits for `publish`, `runs show` names it, and `runs answer`
    with its key and the README's JSON completes it with the ticket."""
    port = free_port()
    server = Server(
        db_url,
        tmp_path / "serve.log",
        [sys.executable, "-m", "tether", "serve", "--port", str(port)],
    )
    servers.append(server)
    server.wait_healthy(port)
    start_job, start_review, list_runs, show, answer = commands(cli_block())
    job = run(as_argv(start_job), db_url)
    review = run(as_argv(start_review), db_url)
    ids = {r["workflow"]: r["id"] for r in runs_json(db_url, "list")["items"]}
    assert ids.keys() == {"long_job", "document_review"}
    assert ids["long_job"] in job.stdout and ids["document_review"] in review.stdout
    listed = run(as_argv(list_runs), db_url).stdout
    assert ids["long_job"] in listed and ids["document_review"] in listed
    run_id = ids["document_review"]
    parked = wait_for(db_url, run_id, lambda r: bool(r["waits"]), "an open wait")
    (wait,) = parked["waits"]
    shown = run(as_argv(show, RUN_ID=run_id), db_url).stdout
    assert "publish" in shown and "approval" in shown
    run(as_argv(answer, RUN_ID=run_id, KEY=wait["key"]), db_url)
    ended = wait_for(db_url, run_id, lambda r: r["status"] == "completed", "completed")
    assert ended["output"]["ticket"] == "CHG-42"
    assert ended["output"]["decision"] == "approved"
    job_row = wait_for(db_url, ids["long_job"], lambda r: r["status"] == "completed", "done")
    assert job_row["output"] == {"steps": 3, "total": 14}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_readme_curl_discovers_a_real_server(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    """The README's curl line, as written but for the port, against `tether serve`."""
    port = free_port()
    server = Server(
        db_url,
        tmp_path / "serve.log",
        [sys.executable, "-m", "tether", "serve", "--port", str(port), "--no-workers"],
    )
    servers.append(server)
    server.wait_healthy(port)
    (curl,) = [c for c in readme_commands() if c.startswith("curl ")]
    argv = [w.replace(":8000/", f":{port}/") for w in shlex.split(curl)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    result = orjson.loads(out.stdout)["result"]
    assert "2026-07-28" in result["supportedVersions"]
    assert "io.modelcontextprotocol/tasks" in result["capabilities"]["extensions"]


def test_tokens_new_prints_a_token_the_server_then_requires(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    """`tether tokens new ci-bot operator` as in the README: its entry in TETHER_API_TOKENS
    makes the server refuse a call without the token and serve one with it."""
    (line,) = commands(section("Security").split("```sh\n")[1].split("```")[0])
    out = run(as_argv(line), db_url).stdout
    token = re.search(r"(tt_\S+)", out)
    entry = re.search(r"(ci-bot:operator:[0-9a-f]{64})", out)
    assert token and entry, out
    port = free_port()
    server = Server(
        db_url,
        tmp_path / "serve.log",
        [sys.executable, "-m", "tether", "serve", "--port", str(port), "--no-workers"],
        TETHER_API_TOKENS=entry.group(1),
    )
    servers.append(server)
    server.wait_healthy(port)
    (curl,) = [c for c in readme_commands() if c.startswith("curl ")]
    words = shlex.split(curl)
    body = words[words.index("-d") + 1]
    headers = {
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "server/discover",
    }
    url = f"http://127.0.0.1:{port}/mcp"
    assert httpx.post(url, content=body, headers=headers).status_code == 401
    auth = {**headers, "Authorization": f"Bearer {token.group(1)}"}
    assert "result" in httpx.post(url, content=body, headers=auth).json()


def test_the_operating_block_runs_http_and_workers_apart(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    """The README's migrate / `serve --no-workers` / `worker` lines on one database (the
    example URL replaced by the test's): a run started through the CLI is executed by the
    separate worker, and the HTTP-only server answers /healthz."""
    export, migrate, serve, worker = commands(
        section("Operating it").split("```sh\n")[1].split("```")[0]
    )
    assert export.startswith("export TETHER_DATABASE_URL=postgresql://")
    assert "up to date" in run(as_argv(migrate), db_url).stdout
    port = free_port()
    serve_argv = as_argv(serve, **{"8000": str(port)})
    assert "--no-workers" in serve_argv
    http = Server(db_url, tmp_path / "serve.log", serve_argv)
    servers.append(http)
    workers = Server(db_url, tmp_path / "worker.log", as_argv(worker))
    servers.append(workers)
    http.wait_healthy(port)
    started = runs_json(db_url, "start", "long_job", '{"steps": 2, "pause_seconds": 0}')
    done = wait_for(db_url, started["id"], lambda r: r["status"] == "completed", "completed")
    assert done["output"] == {"steps": 2, "total": 5}
    assert workers.proc.poll() is None and http.proc.poll() is None


def test_the_readme_links_nothing_outside_the_repository() -> None:
    """Every relative link in README.md points at a file in this repository (our choice: the
    README must work from a clone)."""
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    relative = [t for t in targets if "://" not in t]
    assert relative, "the README links its docs"
    for target in relative:
        path = (REPO / target).resolve()
        assert path.is_relative_to(REPO) and path.exists(), target
    assert "../" not in README
