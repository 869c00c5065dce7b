"""The nginx gateway recipe (docs/examples/nginx-gateway.conf), run as written: nginx routes MCP
requests on their Mcp-Method / Mcp-Name headers across two `tether serve` processes on one
database, a task started through one server is answered and completed through the other, and a
request whose headers disagree with its body is forwarded by nginx and refused by Tether.

Needs Debian's `nginx`: installed when missing (tests/debian.py); the test fails, never skips,
when it cannot be.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import direct_url
from tests.debian import ensure_nginx
from tests.e2e.conftest import free_port
from tests.e2e.test_server_kill import Servers, wait_ready
from tests.mcp_client import McpClient
from tether.jsonrpc.codes import HEADER_MISMATCH

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "docs" / "examples" / "nginx-gateway.conf"
REVIEW_TOOL = "start_document_review"  # the recipe sends its calls to tether_reviews

#: What the test replaces in the recipe, each exactly once: upstream addresses, the port nginx
#: listens on, and its access log.
MAIN, TASKS, REVIEWS = "10.0.0.11:8000", "10.0.0.12:8000", "10.0.0.13:8000"
LISTEN = "listen 8080;"
ACCESS_LOG = "/var/log/nginx/tether-gateway.log"


def recipe(*, main: int, tasks: int, reviews: int, port: int, log: Path) -> str:
    """The recipe with this test's addresses, port and log path."""
    text = RECIPE.read_text(encoding="utf-8")
    for placeholder in (MAIN, TASKS, REVIEWS, LISTEN, ACCESS_LOG):
        assert text.count(placeholder) == 1, f"the recipe no longer has {placeholder!r} once"
    return (
        text.replace(MAIN, f"127.0.0.1:{main}")
        .replace(TASKS, f"127.0.0.1:{tasks}")
        .replace(REVIEWS, f"127.0.0.1:{reviews}")
        .replace(LISTEN, f"listen 127.0.0.1:{port};")
        .replace(ACCESS_LOG, str(log))
    )


class Nginx:
    """nginx in the foreground with its own prefix, pid file and logs, running `site` inside
    an otherwise minimal configuration."""

    def __init__(self, prefix: Path, site: str) -> None:
        self.binary = ensure_nginx()
        self.prefix = prefix
        (prefix / "logs").mkdir()
        (prefix / "site.conf").write_text(site, encoding="utf-8")
        (prefix / "nginx.conf").write_text(
            "daemon off;\n"
            "worker_processes 1;\n"
            f"pid {prefix / 'nginx.pid'};\n"
            f"error_log {prefix / 'logs' / 'error.log'} notice;\n"
            "events { worker_connections 64; }\n"
            "http {\n"
            f"    access_log off;\n"
            f"    client_body_temp_path {prefix / 'client_body'};\n"
            f"    proxy_temp_path {prefix / 'proxy'};\n"
            f"    fastcgi_temp_path {prefix / 'fastcgi'};\n"
            f"    uwsgi_temp_path {prefix / 'uwsgi'};\n"
            f"    scgi_temp_path {prefix / 'scgi'};\n"
            f"    include {prefix / 'site.conf'};\n"
            "}\n",
            encoding="utf-8",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self, *extra: str) -> list[str]:
        config = self.prefix / "nginx.conf"
        return [str(self.binary), "-p", str(self.prefix), "-c", str(config), *extra]

    def check(self) -> None:
        """`nginx -t`: the configuration parses."""
        done = subprocess.run(self.argv("-t"), capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def error_log(self) -> str:
        return (self.prefix / "logs" / "error.log").read_text("utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: workers finish, then exit
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def servers(db_url: str, tmp_path: Path) -> Iterator[Servers]:
    ss = Servers(db_url, tmp_path, "tether.examples:app")
    try:
        yield ss
    finally:
        ss.kill_all()


@pytest.fixture
def prefix() -> Iterator[Path]:
    """nginx's prefix: a directory its workers (`nobody` when the test runs as root) can enter.
    Installs nginx first when it is missing, before any server starts."""
    ensure_nginx()
    folder = Path(tempfile.mkdtemp(prefix="nginx-gw", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def gateway(
    servers: Servers, prefix: Path
) -> AsyncIterator[tuple[str, dict[str, int], Path]]:
    """Two Tether servers on one database behind nginx: server `a` is the main and the tasks
    pool, server `b` the reviews pool. Yields the gateway's MCP URL, the servers' ports and
    nginx's access log."""
    ports = {"a": free_port(), "b": free_port()}
    procs = {name: servers.spawn_server(name, port) for name, port in ports.items()}
    for name, port in ports.items():
        await wait_ready(servers, name, procs[name], port)
    port = free_port()
    log = prefix / "logs" / "gateway.log"
    nginx = Nginx(
        prefix, recipe(main=ports["a"], tasks=ports["a"], reviews=ports["b"], port=port, log=log)
    )
    nginx.check()
    nginx.start()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient(timeout=2.0) as http, asyncio.timeout(30):
            while True:
                assert nginx.proc is not None and nginx.proc.poll() is None, nginx.error_log()
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        yield url, ports, log
    finally:
        nginx.stop()


def served_by(log: Path, ports: dict[str, int]) -> list[tuple[str, str, str]]:
    """(Mcp-Method, pool, server) of each MCP request nginx logged, in order (the readiness
    probes, which carry no Mcp-Method, left out)."""
    names = {f"127.0.0.1:{port}": name for name, port in ports.items()}
    lines = log.read_text("utf-8").splitlines()
    found = []
    for line in lines:
        m = re.search(r'"([^"]*)" "[^"]*" \d+ (\S+) (\S+)$', line)
        assert m, line
        if m.group(1) != "-":  # nginx logs an absent header as -
            found.append((m.group(1), m.group(2), names.get(m.group(3), m.group(3))))
    return found


async def test_the_nginx_recipe_routes_a_task_across_two_servers_and_tether_checks_headers(
    gateway: tuple[str, dict[str, int], Path], db_url: str
) -> None:
    """Through nginx on the recipe: the review tool's call goes to server b, the task's
    polls and its answer to server a, and the run completes; a request whose Mcp-Method or
    Mcp-Name disagrees with its body reaches the pool its headers name and is refused there
    with -32020 (HTTP 400), starting nothing (our choice: the headers are for gateways, so a
    gateway's decision and what Tether runs must agree)."""
    url, ports, log = gateway
    client = McpClient(url, timeout=10)
    try:
        start = await client.request(
            "tools/call",
            {"name": REVIEW_TOOL, "arguments": {"body": {"title": "Plan", "body": "routed"}}},
        )
        assert start.headers["X-Tether-Upstream"] == "tether_reviews"
        created = start.json()["result"]
        assert created["resultType"] == "task"
        task_id = created["taskId"]

        parked = await client.wait_task(task_id, {"input_required"}, timeout=15)
        (key,) = parked["inputRequests"]
        answer = await client.request(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    key: {"action": "accept", "content": {"decision": "approve", "ticket": "T-7"}}
                },
            },
        )
        assert answer.headers["X-Tether-Upstream"] == "tether_tasks"
        assert "result" in answer.json(), answer.json()
        done = await client.wait_task(task_id, {"completed"}, timeout=15)
        assert done["result"]["structuredContent"]["ticket"] == "T-7"
        listed = await client.request("tools/list", {})
        assert listed.headers["X-Tether-Upstream"] == "tether_main"

        # The headers say tasks/get, the body starts a review: routed to the tasks pool, refused.
        body_start = {"name": REVIEW_TOOL, "arguments": {"body": {"title": "X", "body": "x"}}}
        lying_method = await client.request(
            "tools/call", body_start, headers={"Mcp-Method": "tasks/get", "Mcp-Name": task_id}
        )
        # The headers name the review tool, the body calls another: routed to reviews, refused.
        lying_name = await client.request(
            "tools/call",
            {"name": "start_long_job", "arguments": {"steps": 1}},
            headers={"Mcp-Name": REVIEW_TOOL},
        )
    finally:
        await client.aclose()

    for refused, pool in ((lying_method, "tether_tasks"), (lying_name, "tether_reviews")):
        assert refused.status_code == 400
        assert refused.headers["X-Tether-Upstream"] == pool
        assert refused.json()["error"]["code"] == HEADER_MISMATCH

    conn = await asyncpg.connect(direct_url(db_url), statement_cache_size=0)
    try:
        runs = await conn.fetchval("SELECT count(*) FROM executions")
    finally:
        await conn.close()
    assert runs == 1  # the review; neither refused request started anything

    requests = served_by(log, ports)
    assert requests[0] == ("tools/call", "tether_reviews", "b")
    polls = [r for r in requests if r[0].startswith("tasks/")]
    assert polls and all(pool == "tether_tasks" and server == "a" for _, pool, server in polls)
    assert ("tools/list", "tether_main", "a") in requests
    assert requests[-2:] == [
        ("tasks/get", "tether_tasks", "a"),
        ("tools/call", "tether_reviews", "b"),
    ]
