"""The tutorial (docs/tutorial.md) runs as written, from an empty folder.

Its code blocks are read in order: a block with a `title` is a file written into the folder
(after a `<!-- tutorial: append -->` comment, added to the end of that file); an `sh` block is
commands run one by one in a shell, in the folder; a `text` block is what the `sh` block
before it printed (each line found in the output, `…` standing for anything); a `<!--
tutorial: serve -->` block is `tether serve`, started in the background (the one before it
stopped with Ctrl-C, SIGINT) and waited for until its banner says where MCP is served; a
`<!-- tutorial: check NAME -->` comment is where this module checks the outcome the page
describes (the run completed after the answer, the DAG's side effect happened only after its
approval, the protocol's handler ran, the deployed package served).

What is not run as written: the install block and the container block. The first makes the
virtual environment and installs Tether with pip from a clone, which needs a package index;
here `.venv` is the environment this test runs in, with this checkout's sources first on the
path (installing the package into a new environment is tests/e2e/test_packaging.py's). The
second builds and runs container images, which needs a registry for the base image; here its
commands are checked word for word, and what the image would run is run as a plain process:
`tether serve` (the image's command) in a folder laid out as the page's Containerfile copies
the package into `/app`, with that file's ENV, a data directory of its own for the volume, on
loopback as the published port is (what the base image adds, its user, health check and
stop signal, is tests/e2e/test_packaging.py's), and `podman exec`'s command beside it.

The server listens on a free port, given as TETHER_PORT, and every `127.0.0.1:8000` in the
page is that port. `RUN_ID` is the run the latest command that starts one printed; a token the
page prints (`tt_…`) is kept for the console's sign-in, which is done over HTTP, the form the
page describes posted as a browser would.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

import tether

# The walk runs every block of the page as processes: a package install, two servers, two
# embedded PostgreSQL clusters, a dozen CLI commands; about a minute on a quiet machine.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = (REPO / "docs" / "tutorial.md").read_text("utf-8")
SOURCES = Path(tether.__file__).resolve().parents[1]  # the checkout's src/ under test
PAGE_PORT = "127.0.0.1:8000"
BANNER = re.compile(r"^\s+MCP\s+http://127\.0\.0\.1:(\d+)/mcp$")
START_TIMEOUT_S = 90.0  # the first start of an embedded PostgreSQL runs initdb
COMMAND_TIMEOUT_S = 60.0
BASH = shutil.which("bash") or "/bin/bash"  # the reader's shell (the page uses `source`)
# what the install block does; the test stands in for it (module docstring)
INSTALL = [
    "mkdir myflows && cd myflows",
    "python3 -m venv .venv",
    "source .venv/bin/activate",
    f"pip install /path/to/tether 'fastmcp[tasks]=={importlib.metadata.version('fastmcp')}'",
]
# what the container block does (word for word); the test stands in for it (module docstring)
BASE_IMAGE = "localhost/tether"
CONTAINER = [
    "podman build --format docker -f /path/to/tether/deploy/Containerfile"
    f" -t {BASE_IMAGE} /path/to/tether",
    "podman build --format docker -f Containerfile -t localhost/myflows .",
    "podman run -d --name myflows -p 127.0.0.1:8000:8000 -v myflows-data:/data"
    " -e TETHER_STATE_KEY=\"$(python3 -c 'import secrets; print(secrets.token_hex(32))')\""
    " localhost/myflows",
    "podman exec myflows tether tokens create --role operator --name alice",
]


# --- reading the page --------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One code block of the page, or a check comment (kind `check`, `text` its name)."""

    kind: str  # file | append | sh | text | install | serve | container | check
    text: str
    path: str | None = None


_PIECES = re.compile(
    r"^<!-- tutorial: (?P<mark>[a-z]+)(?: (?P<name>[a-z-]+))? -->$"
    r"|^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$",
    flags=re.M | re.S,
)


def page_blocks(page: str = TUTORIAL) -> list[Block]:
    """The page's blocks in order, each with the kind its fence and the comment before it give."""
    out: list[Block] = []
    mark: str | None = None
    for m in _PIECES.finditer(page):
        if m.group("mark") == "check":
            out.append(Block("check", m.group("name") or ""))
            continue
        if m.group("mark") is not None:
            mark = m.group("mark")
            continue
        info, body = m.group("info").strip(), m.group("body")
        title = re.search(r'title="([^"]+)"', info)
        if title is not None:
            out.append(Block("append" if mark == "append" else "file", body, title.group(1)))
        elif info == "sh":
            out.append(Block(mark if mark in ("install", "serve", "container") else "sh", body))
        elif info == "text":
            out.append(Block("text", body))
        else:
            raise AssertionError(f"a code block the tutorial test cannot place: {info!r}")
        mark = None
    return out


def commands(block: str) -> list[str]:
    """A shell block's command lines: continuations joined, `# comments` dropped."""
    out, pending = [], ""
    for line in block.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quoted argument goes on on the next line
            continue
        if words:
            out.append(pending.strip())
        pending = ""
    assert not pending, f"an unterminated quote in: {block}"
    return out


def unmatched(expected: str, actual: str) -> list[str]:
    """The lines of `expected` (blanks skipped; `…` stands for anything, and runs of spaces
    count as one) that no line of `actual` matches."""
    seen = [" ".join(line.split()) for line in actual.splitlines()]
    missing = []
    for line in filter(str.strip, expected.splitlines()):
        pattern = ".*".join(re.escape(part) for part in " ".join(line.split()).split("…"))
        if not any(re.fullmatch(pattern, s) for s in seen):
            missing.append(line)
    return missing


# --- walking through it ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`tether serve` in the background, its output collected by a thread."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.listening = threading.Event()
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if BANNER.match(line.rstrip("\n")):
                self.listening.set()
        self.listening.set()  # the process ended: wake the waiter, which then sees it

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_listening(self) -> None:
        assert self.listening.wait(START_TIMEOUT_S), f"no banner:\n{self.log}"
        assert self.proc.poll() is None, f"the server exited:\n{self.log}"

    def stop(self, signum: int = signal.SIGINT) -> int:
        """Ctrl-C, as the page says (or another signal); its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


@dataclass
class Walk:
    """The reader's terminal: where they are, what is set, what the page told them to keep."""

    root: Path
    port: int
    env: dict[str, str]
    cwd: Path = field(init=False)
    server: Server | None = None
    run_id: str | None = None
    token: str | None = None
    output: str = ""  # what the last shell block printed
    checked: list[str] = field(default_factory=list)
    data_dirs: list[Path] = field(default_factory=list)  # where a server's PostgreSQL lives

    def __post_init__(self) -> None:
        self.cwd = self.root

    def page_text(self, text: str) -> str:
        return text.replace(PAGE_PORT, f"127.0.0.1:{self.port}")

    def filled(self, command: str) -> str:
        command = self.page_text(command)
        if "RUN_ID" in command:
            assert self.run_id is not None, f"no run started before: {command}"
            command = command.replace("RUN_ID", self.run_id)
        return command

    def tether(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        """A `tether` command of the test's own (a check), in the reader's terminal."""
        done = subprocess.run(
            [shutil.which("tether", path=self.env["PATH"]) or "tether", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        assert done.returncode in ok, f"tether {shlex.join(args)}: {done.stdout}{done.stderr}"
        return done

    def run(self, command: str) -> str:
        """One command line of an `sh` block, as a shell in the folder runs it; its output."""
        command = self.filled(command)
        words = shlex.split(command)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            self.env[name] = value
            return ""
        done = subprocess.run(
            [BASH, "-c", command],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{command}\nexit {done.returncode}:\n{out}"
        if re.search(r"\bstart\b|start_", command):
            found = re.search(r"\bex_[a-z0-9]+", out)
            assert found is not None, f"no run id in what {command!r} printed:\n{out}"
            self.run_id = found.group(0)
        if (token := re.search(r"\btt_\S+", out)) is not None:
            self.token = token.group(0)
        return out

    def container(self, block: str) -> None:
        """The container block: checked word for word, then stood in for (module docstring):
        the development server stopped, the image's `tether serve` started with the page's
        Containerfile, and `podman exec`'s command run beside it."""
        assert [shlex.split(c) for c in commands(block)] == [shlex.split(c) for c in CONTAINER]
        image = containerfile(self.cwd / "Containerfile")
        assert image.base == BASE_IMAGE  # the image the first command builds
        ignored = set((self.cwd / ".dockerignore").read_text("utf-8").split())
        assert {".venv", ".tether"} <= ignored  # the environment and the development database
        if self.server is not None:  # "Stop the development server first (Ctrl-C …)"
            assert self.server.stop() == 128 + signal.SIGINT, self.server.log
            assert postgres_pid(self.cwd / ".tether" / "pg") is None
        stage = self.root / "container"
        app = stage / "app"  # the image's WORKDIR
        for source, target in image.copies:
            assert source not in ignored and target.startswith("/app/"), (source, target)
            shutil.copytree(self.cwd / source, app / target.removeprefix("/app/"))
        data = stage / "data"  # the volume myflows-data, mounted at /data
        self.data_dirs.append(data / "pg")
        self.env = {k: v for k, v in self.env.items() if not k.startswith("TETHER_")}
        self.env |= image.env | {
            "TETHER_DATA_DIR": str(data),
            "TETHER_STATE_KEY": secrets.token_hex(32),
            "TETHER_PORT": str(self.port),
        }
        self.cwd = app
        self.server = Server(["tether", "serve"], app, self.env)  # the image's CMD
        self.server.wait_listening()
        self.output = self.tether(
            "tokens", "create", "--role", "operator", "--name", "alice"
        ).stdout
        self.token = re.findall(r"\btt_\S+", self.output)[0]

    def install(self, block: str) -> None:
        """The install block: checked word for word, then stood in for (module docstring)."""
        assert commands(block) == INSTALL
        folder = self.root / "myflows"
        folder.mkdir()
        self.cwd = folder
        self.data_dirs.append(folder / ".tether" / "pg")
        (folder / ".venv").symlink_to(sys.prefix, target_is_directory=True)
        self.env["PATH"] = f"{folder / '.venv' / 'bin'}{os.pathsep}{self.env['PATH']}"

    def serve(self, block: str) -> None:
        (command,) = commands(block)
        if self.server is not None:  # "stop it (Ctrl-C in its terminal)"
            assert self.server.stop() == 128 + signal.SIGINT, self.server.log
        self.server = Server(shlex.split(self.filled(command)), self.cwd, self.env)
        self.server.wait_listening()
        self.output = self.server.log

    def write(self, block: Block) -> None:
        assert block.path is not None
        path = self.cwd / block.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if block.kind == "append":
            assert path.exists(), f"{block.path} is added to before it is written"
            with path.open("a", encoding="utf-8") as f:
                f.write("\n\n" + self.page_text(block.text))  # two blank lines before it
        else:
            assert not path.exists(), f"{block.path} is written twice"
            path.write_text(self.page_text(block.text), "utf-8")


@dataclass(frozen=True)
class Image:
    """What the page's Containerfile says: the image it builds on, what it copies where, and
    the environment it sets."""

    base: str
    copies: list[tuple[str, str]]
    env: dict[str, str]


def containerfile(path: Path) -> Image:
    """The page's Containerfile, read; an instruction the stand-in does not follow fails."""
    base = ""
    copies: list[tuple[str, str]] = []
    env: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        word, _, rest = line.partition(" ")
        if word == "FROM":
            base = rest.strip()
        elif word == "COPY":
            source, target = rest.split()
            copies.append((source, target))
        elif word == "ENV":
            env |= dict(pair.split("=", 1) for pair in shlex.split(rest))
        else:
            assert not line.strip(), (
                f"a Containerfile line the tutorial test does not follow: {line}"
            )
    return Image(base, copies, env)


# --- the checks the page names -----------------------------------------------------------------


def watched(walk: Walk, *until: str) -> dict[str, Any]:
    """The current run as `runs watch` leaves it: at its end (exit 0: completed), or with
    `--until-wait` once it waits for an answer (exit 3). It returns on the change itself."""
    assert walk.run_id is not None
    code = 3 if until else 0
    done = walk.tether("runs", "watch", walk.run_id, *until, "--json", ok=(code,))
    row: dict[str, Any] = orjson.loads(done.stdout.splitlines()[-1])
    return row


def ended(walk: Walk) -> dict[str, Any]:
    """The current run, once it has ended completed."""
    row = watched(walk)
    assert row["status"] == "completed", row
    return row


def expense_approved(walk: Walk) -> None:
    """The CLI's answer lets the run go on past its approval, to the end."""
    row = ended(walk)
    assert row["output"] == {"employee": "Ada", "paid": "yes", "note": "team lunch"}


def console_approved(walk: Walk) -> None:
    """Signed in with the token the page made, the Inbox shows Linus's approval; its form,
    posted with a note and Approve, completes the run (the page then shows who approved)."""
    assert walk.token is not None and walk.run_id is not None
    base = f"http://127.0.0.1:{walk.port}/console"
    with httpx.Client(base_url=base, timeout=10) as http:
        assert http.get("/inbox").status_code in (302, 303, 307)  # a token is now needed
        page = http.get("/sign-in")
        signed = http.post(
            "/sign-in", data={"csrf": field_value(page.text, "csrf"), "token": walk.token}
        )
        assert signed.status_code == 303, signed.text
        inbox = http.get("/inbox")
        assert inbox.status_code == 200
        assert "Pay Linus 900 EUR (over the 500 EUR limit)?" in inbox.text
        key = field_value(inbox.text, "key")  # the one open wait: Linus's `pay`
        assert key.startswith(f"{walk.run_id}:approval:pay:")
        form = {
            "csrf": field_value(inbox.text, "csrf"),
            "key": key,
            "f.note": "conference hotel",
            "decision": "approve",
            "next": "/console/inbox",
        }
        answered = http.post(f"/runs/{walk.run_id}/answer", data=form)
        assert answered.status_code == 303, answered.text
    row = ended(walk)
    assert row["output"] == {"employee": "Linus", "paid": "yes", "note": "conference hotel"}


def field_value(html: str, name: str) -> str:
    found = re.search(rf'name="{re.escape(name)}" value="([^"]+)"', html)
    assert found is not None, name
    return found.group(1)


def dag_waits_for_review(walk: Walk) -> None:
    """The run waits at the review step's approval, its command having run, and the publish
    step's side effect has not happened."""
    assert walk.run_id is not None
    row = watched(walk, "--until-wait")
    assert row["status"] == "waiting"
    assert [(w["kind"], w["name"]) for w in row["waits"]] == [("approval", "review")]
    history = orjson.loads(walk.tether("runs", "show", walk.run_id, "--history", "--json").stdout)
    steps = {s["name"]: s for s in history["dag_steps"]}
    assert steps["review"]["exit_code"] == 0  # its command ran, before the wait
    assert steps["publish"]["status"] == "not_started"
    assert not (walk.cwd / "report-2026-02-01.txt").exists()


def dag_published(walk: Walk) -> None:
    """Once approved, the run goes on to the publish step, which writes the report."""
    row = ended(walk)
    assert row["output"]["outputs"]["REVIEWER"] == "alice"
    assert (walk.cwd / "report-2026-02-01.txt").read_text("utf-8") == (
        "42 orders on 2026-02-01\napproved by alice\n"
    )


def refund_paid(walk: Walk) -> None:
    """The gate's choice lets `pay` run: both handlers ran, with their dict in and out."""
    row = ended(walk)
    outputs = row["output"]["outputs"]
    assert outputs["check"] == {"order": "A-17", "amount": 30, "allowed": True}
    assert outputs["pay"] == {"refunded": "A-17"}


def container_serves(walk: Walk) -> None:
    """The image's server serves the package's workflow, DAG and protocol from /app; with the
    token the page made, a client starts a run, and without one it is refused."""
    assert walk.server is not None and walk.token is not None
    assert "serving mypkg.flows:app: 1 workflow, 1 DAG, 1 protocol" in walk.server.log
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "start_expense",
            "arguments": {"body": {"employee": "Edsger", "amount": 40}},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "start_expense",
    }
    url = f"http://127.0.0.1:{walk.port}/mcp"
    with httpx.Client(timeout=10) as http:
        refused = http.post(url, json=body, headers=headers)
        assert refused.status_code == 401, refused.text
        auth = {"Authorization": f"Bearer {walk.token}"}
        started = http.post(url, json=body, headers=headers | auth)
    assert started.status_code == 200, started.text
    walk.run_id = started.json()["result"]["structuredContent"]["handle"]
    row = watched(walk, "--until-wait")
    assert [(w["kind"], w["name"]) for w in row["waits"]] == [("approval", "pay")]


CHECKS: dict[str, Callable[[Walk], None]] = {
    "expense-approved": expense_approved,
    "console-approved": console_approved,
    "dag-waits-for-review": dag_waits_for_review,
    "dag-published": dag_published,
    "refund-paid": refund_paid,
    "container-serves": container_serves,
}


# --- the tests ---------------------------------------------------------------------------------


def test_every_check_the_page_names_is_one_this_module_makes() -> None:
    """The page's check comments and this module's checks are the same set, each once, and
    the page has its install block and a served server (our choice: a check the page drops or
    adds fails here first)."""
    blocks = page_blocks()
    named = [b.text for b in blocks if b.kind == "check"]
    assert sorted(named) == sorted(CHECKS)
    assert [b.kind for b in blocks].count("install") == 1
    assert [b.kind for b in blocks].count("container") == 1
    assert "serve" in [b.kind for b in blocks]


def test_unmatched_lines_take_ellipses_for_anything() -> None:
    """The output rule: each expected line matches some output line, `…` as a wildcard."""
    out = "run        ex_abc\nstatus     waiting\n"
    assert unmatched("run ex_…\nstatus waiting", out) == []
    assert unmatched("status completed", out) == ["status completed"]


@pytest.fixture
def walk() -> Iterator[Walk]:
    root = Path(tempfile.mkdtemp(prefix="ttut", dir="/tmp"))  # short: PostgreSQL's socket path
    dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("TETHER_")}
    port = free_port()
    env |= {"PYTHONPATH": str(SOURCES), "TETHER_PORT": str(port)}
    w = Walk(root=root, port=port, env=env)
    try:
        yield w
    finally:
        if w.server is not None:
            w.server.stop()
        for pgdata in w.data_dirs:
            stop_postgres(pgdata)
        shutil.rmtree(root, ignore_errors=True)


def postgres_pid(pgdata: Path) -> int | None:
    """The embedded PostgreSQL's postmaster, when one is running in `pgdata`."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text("utf-8").splitlines()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def stop_postgres(pgdata: Path) -> None:
    """What a failed walk may leave behind: a PostgreSQL whose server was killed."""
    if (pid := postgres_pid(pgdata)) is not None:
        os.kill(pid, signal.SIGQUIT)


def test_the_tutorial_runs_as_written_from_an_empty_folder(walk: Walk) -> None:
    """Every block of docs/tutorial.md in order: files written, commands run, outputs found,
    each outcome checked where the page describes it; at the end the deployed server stops on
    SIGTERM (`podman stop`), with its PostgreSQL."""
    for block in page_blocks():
        if block.kind == "install":
            walk.install(block.text)
        elif block.kind in ("file", "append"):
            walk.write(block)
        elif block.kind == "serve":
            walk.serve(block.text)
        elif block.kind == "container":
            walk.container(block.text)
        elif block.kind == "sh":
            walk.output = "\n".join(walk.run(c) for c in commands(block.text))
        elif block.kind == "text":
            missing = unmatched(walk.page_text(block.text), walk.output)
            assert missing == [], f"not printed: {missing}\nprinted:\n{walk.output}"
        else:
            CHECKS[block.text](walk)
            walk.checked.append(block.text)
    assert sorted(walk.checked) == sorted(CHECKS)
    assert walk.server is not None
    assert walk.server.stop(signal.SIGTERM) == 128 + signal.SIGTERM, walk.server.log
    assert [postgres_pid(pgdata) for pgdata in walk.data_dirs] == [None, None]
