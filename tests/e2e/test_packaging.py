"""Tether as another project's dependency, and as the container image runs it.

The wheel is built from this checkout's files and installed, with requirements/runtime.txt, into
a new virtual environment outside the clone; a package of its own then serves a workflow from
there. The image's entrypoint and health check (deploy/Containerfile) run as plain processes on
the same installation, as a non-root user, so they are checked wherever containers cannot run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import tether
from tests.mcp_client import McpClient

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "deploy" / "Containerfile"
COMPOSE = REPO / "deploy" / "compose.yaml"
# what the wheel is built from (the Containerfile copies the same)
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "src/")
LISTENING = re.compile(rb"MCP +http://[^:/]+:(\d+)/")
START_TIMEOUT_S = 90.0  # the first start of an embedded PostgreSQL runs initdb
# the image's base PATH, before its ENV puts the virtual environment first
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FLOWS = """
import tether

app = tether.App()


def double(n: int) -> int:
    return 2 * n


@app.workflow(expose=tether.Exposure(tool_set=True))
async def doubled(ctx: tether.Context, n: int) -> int:
    return await ctx.step(double, n)
"""


@dataclass(frozen=True)
class Installed:
    root: Path  # a temporary directory every user may enter
    source: Path  # the checkout's build inputs, copied
    wheel: Path
    venv: Path


def clean_env(**extra: str) -> dict[str, str]:
    """A new shell's environment: no virtual environment, no PYTHONPATH, no TETHER_* setting."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("TETHER_")}
    return {**env, **extra}


def run(*argv: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """Run a command (default: in a new shell's environment); its stdout, or fail the test."""
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=clean_env() if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{shlex.join(map(str, argv))}:\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    """The wheel of this checkout in a new virtual environment: dependencies exactly as
    requirements/runtime.txt pins them (hashes checked), then the wheel alone."""
    root = Path(tempfile.mkdtemp(prefix="tpk", dir="/tmp"))  # short: PostgreSQL's socket path
    root.chmod(0o755)
    try:
        # A copy of the files git knows (committed or not, ignored ones left out): the build
        # sees no stale build/ directory and leaves nothing in the checkout.
        source = root / "source"
        listed = run(
            "git", "-C", REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard"
        )
        for name in listed.split("\0"):
            if name.startswith(BUILD_INPUTS) and (REPO / name).is_file():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, source / name)
        venv = root / "venv"
        run(sys.executable, "-m", "venv", venv)
        pip = (venv / "bin" / "python", "-m", "pip")
        runtime = REPO / "requirements" / "runtime.txt"
        run(*pip, "install", "--quiet", "--require-hashes", "--no-deps", "-r", runtime)
        # the locked pip and setuptools build it, as in the image: no build dependency to fetch
        run(*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", root, source)
        (wheel,) = root.glob("*.whl")
        run(*pip, "install", "--quiet", "--no-deps", wheel)
        run(*pip, "check")
        yield Installed(root=root, source=source, wheel=wheel, venv=venv)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def serving(
    argv: list[str], *, cwd: Path, env: Mapping[str, str]
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """Start a server process; yield its port once uvicorn reports it listening, and the
    process. A process still running at the end is killed."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    log = bytearray()
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while (found := LISTENING.search(log)) is None:
                line = await proc.stderr.readline()
                assert line, f"the server exited before it listened:\n{log.decode()}"
                log += line
        async with asyncio.TaskGroup() as tg:
            # keep reading its log, so a full pipe never blocks it; ends when the process does
            tg.create_task(proc.stderr.read())
            try:
                yield int(found[1]), proc
            finally:
                if proc.returncode is None:
                    proc.kill()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def wheel_version(wheel: Path) -> str:
    """The version a wheel's metadata declares."""
    with zipfile.ZipFile(wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        text = whl.read(name).decode("utf-8")
    versions: list[str] = re.findall(r"^Version: (.+)$", text, flags=re.MULTILINE)
    (version,) = versions
    return version


def test_the_wheel_ships_every_file_of_the_package(installed: Installed) -> None:
    """Our choice: each file under src/tether that git knows is in the wheel (SQL, templates,
    static files, schemas), so `[tool.setuptools.package-data]` misses none."""
    src = installed.source / "src"
    files = {p.relative_to(src).as_posix() for p in (src / "tether").rglob("*") if p.is_file()}
    with zipfile.ZipFile(installed.wheel) as whl:
        shipped = set(whl.namelist())
    assert sorted(files - shipped) == []
    assert {"tether/storage/sql/queries.sql", "tether/console/templates/base.html"} <= files


def test_a_git_url_builds_a_wheel_of_the_committed_package(installed: Installed) -> None:
    """Our choice: `pip wheel git+file://CLONE@COMMIT` (as `pip install` of a git URL does)
    builds without fetching anything and ships every file committed under src/tether."""
    commit = run("git", "-C", REPO, "rev-parse", "HEAD").strip()
    committed = run("git", "-C", REPO, "ls-tree", "-r", "--name-only", commit, "src/tether")
    out = installed.root / "from-git"
    run(
        *(installed.venv / "bin" / "python", "-m", "pip", "wheel", "--quiet", "--no-deps"),
        *("--no-build-isolation", "-w", out, f"git+file://{REPO}@{commit}"),
    )
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        shipped = set(whl.namelist())
    assert sorted({n.removeprefix("src/") for n in committed.split()} - shipped) == []
    assert wheel_version(wheel) == wheel_version(installed.wheel)


async def test_an_installed_wheel_serves_a_project_of_its_own(installed: Installed) -> None:
    """Our choice: outside the clone, `tether serve mypkg.flows:app` from the new environment
    serves the project's workflow on an embedded PostgreSQL; a run started with `tools/call`
    completes (`tasks/get`) and `tether runs list` of the same environment shows it."""
    project = write_project(installed.root)
    env = clean_env(TETHER_DATA_DIR=str(installed.root / "data"))
    bin_ = installed.venv / "bin"
    where = run(
        bin_ / "python", "-c", "import tether; print(tether.__file__)", cwd=project, env=env
    )
    assert Path(where.strip()).is_relative_to(installed.venv)
    version = wheel_version(installed.wheel)
    assert version == tether.__version__
    assert run(bin_ / "tether", "--version", cwd=project, env=env) == f"tether {version}\n"

    argv = [str(bin_ / "tether"), "serve", "mypkg.flows:app", "--port", "0"]
    async with serving(argv, cwd=project, env=env) as (port, proc):
        client = McpClient(f"http://127.0.0.1:{port}/mcp")
        try:
            created = await client.result(
                "tools/call", {"name": "start_doubled", "arguments": {"body": 21}}
            )
            task = await client.wait_task(created["taskId"], {"completed"}, timeout=30)
        finally:
            await client.aclose()
        listed = await asyncio.to_thread(
            run, bin_ / "tether", "runs", "list", "--json", "--app", "mypkg.flows:app",
            cwd=project, env=env,
        )  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            assert await proc.wait() == 128 + signal.SIGTERM
    assert task["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "42"}],
        "isError": False,
    }
    runs = [(r["id"], r["status"], r["output"]) for r in json.loads(listed)["items"]]
    assert runs == [(created["taskId"], "completed", 42)]


def image() -> dict[str, Any]:
    """The final stage of deploy/Containerfile: its ENV, USER, STOPSIGNAL, ENTRYPOINT, CMD and
    HEALTHCHECK command (exec form, JSON)."""
    text = "\n".join(
        line
        for line in CONTAINERFILE.read_text("utf-8").splitlines()
        if not line.lstrip().startswith("#")
    )
    instructions = re.sub(r"\\\n\s*", " ", text).splitlines()
    (last_from,) = [i for i, line in enumerate(instructions) if line.startswith("FROM")][-1:]
    config: dict[str, Any] = {"env": {}}
    for line in instructions[last_from:]:
        word, _, rest = line.partition(" ")
        if word == "ENV":
            config["env"].update(pair.split("=", 1) for pair in shlex.split(rest))
        elif word in {"ENTRYPOINT", "CMD"}:
            config[word.lower()] = json.loads(rest)
        elif word == "HEALTHCHECK":
            config["healthcheck"] = json.loads(rest.partition(" CMD ")[2])
        elif word in {"STOPSIGNAL", "USER"}:
            config[word.lower()] = rest.strip()
    return config


def stop_grace_s() -> float:
    """compose.yaml's stop grace period of the tether service, in seconds."""
    compose = yaml.safe_load(COMPOSE.read_text("utf-8"))
    match = re.fullmatch(r"(\d+)s", compose["services"]["tether"]["stop_grace_period"])
    assert match is not None
    return float(match[1])


def process_uid(pid: int) -> int:
    """The real user id a running process has."""
    status = Path(f"/proc/{pid}/status").read_text("utf-8")
    (uid,) = re.findall(r"^Uid:\s+(\d+)", status, flags=re.MULTILINE)
    return int(uid)


def postgres_stopped(data_dir: Path) -> bool:
    """Whether the embedded PostgreSQL under `data_dir` has shut down (its pid file is gone)."""
    return not (data_dir / "pg" / "postmaster.pid").exists()


def write_project(root: Path) -> Path:
    """A project of its own: package `mypkg` with one workflow in `mypkg/flows.py`."""
    project = root / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("", encoding="utf-8")
    (project / "mypkg" / "flows.py").write_text(FLOWS, encoding="utf-8")
    return project


async def test_the_images_command_serves_as_a_non_root_user_and_stops_on_sigterm(
    installed: Installed,
) -> None:
    """Our choice: the image's command (`tether serve` after tini) with the image's environment
    runs as a non-root user on the embedded PostgreSQL in its data directory; the health check
    passes while it serves; SIGTERM stops it within compose.yaml's stop grace period, with the
    embedded PostgreSQL; then the health check fails."""
    config = image()
    assert config["user"] not in {"root", "0"}
    assert config["entrypoint"][:2] == ["tini", "--"]  # tini forwards signals; not needed here
    assert config["stopsignal"] == "SIGTERM"
    assert "COPY deploy/healthcheck.py /opt/tether/healthcheck.py" in CONTAINERFILE.read_text(
        "utf-8"
    )
    shutil.copy2(REPO / "deploy" / "healthcheck.py", installed.venv / "healthcheck.py")
    home = installed.root / "container"
    data = home / "data"
    workdir = home / "app"
    for path in (data, workdir):
        path.mkdir(parents=True)
    as_user: list[str] = []
    uid = os.getuid()
    if uid == 0:  # the image runs as a user of its own; here an unprivileged one stands in
        uid = 65534
        for path in (data, workdir):
            os.chown(path, uid, uid)
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv (util-linux) runs the command as a non-root user"
        as_user = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]

    def here(value: str) -> str:  # the image's /opt/tether is the test's virtual environment
        return value.replace("/opt/tether", str(installed.venv)).replace("$PATH", BASE_PATH)

    env = {"HOME": str(workdir), "PATH": BASE_PATH}
    env |= {key: here(value) for key, value in config["env"].items()}
    assert env["TETHER_DATA_DIR"] == "/data"
    env |= {"TETHER_DATA_DIR": str(data), "TETHER_PORT": "0"}
    command = [*as_user, *config["entrypoint"][2:], *config["cmd"]]

    async def health(port: int) -> int:
        check = await asyncio.create_subprocess_exec(
            *as_user,
            *map(here, config["healthcheck"]),
            env={**env, "TETHER_PORT": str(port)},
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        async with asyncio.timeout(30):
            return await check.wait()

    async with serving(command, cwd=workdir, env=env) as (port, proc):
        assert process_uid(proc.pid) == uid != 0
        assert os.stat(data / "pg").st_uid == uid  # PostgreSQL ran as that user too
        assert await health(port) == 0
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(stop_grace_s()):
            assert await proc.wait() == 128 + signal.SIGTERM
    assert postgres_stopped(data)
    assert await health(port) == 1
