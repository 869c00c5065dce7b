"""Bad input at volume: seeded, generated requests against the 3 servers.

Each request is a real method with real fixture ids (a task parked on an approval, a completed
one, one parked on a timer) plus one or more defects: broken JSON, a bad envelope, wrong or
missing routing headers, a bad `_meta`, wrong parameter types, answers that do not fit the
open wait, NUL characters and other strings PostgreSQL refuses, and so on. Requests that could
change something (starts, signals, tasks/update, tasks/cancel) always carry at least one defect
the server must refuse; reads may also be well-formed.

Besides the protocol envelope, documents and forms (`reliability/fuzz_inputs.py`): inline DAG
specs through the `dagu_execute` tool, `create_workflow` plans, and the console's forms (sign
in and out, answers, cancel and retry), each with a defect the server must refuse — a limit on
size or depth is a refusal like any other.

Pass: no 5xx of any kind (not even 503: the database is up), no -32603, no dropped connection
or timeout, no mutating request accepted, not one row changed in any table, every surface
served (a surface that cannot be reached is a failure, not a skip), and every server answering
`/healthz` within `PROBE_LIMIT_S` all the way through.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from reliability.client import Client, Outcome, headers_for, judge, meta
from reliability.cluster import Cluster, Proc
from reliability.fuzz_inputs import (
    WEIRD_TEXT,
    WEIRD_VALUES,
    DagGenerator,
    Form,
    FormGenerator,
    PlanGenerator,
    Session,
    csrf_of,
)
from reliability.report import PhaseReport
from reliability.runs import Driver, Plan, RunResult

LANES = 32
MUTATING = ("start", "signal", "update", "cancel")
DAGU_TOOL = "dagu_execute"
PLAN_TOOL = "create_workflow"
CONSOLE = "/console"
TOOL_INTERNAL = "internal_error"  # the dagu tools' code for a failure of the server itself
#: The body cap the cluster is given (TETHER_MAX_BODY_BYTES), so oversized forms stay cheap.
BODY_CAP = 1024 * 1024
#: A server whose /healthz takes longer than this (or fails) while it is up is unresponsive.
PROBE_LIMIT_S = 5.0
#: A stored DAG for the cluster's DAG directory: the dagu tools are served only while the
#: app has a DAG. The phase never starts it (an inline spec may not take its name).
STORED_DAG = "name: rel_stored\nsteps:\n  - name: a\n    command: echo a\n"


def write_dags(directory: Path) -> Path:
    """Fill `directory` (made if missing) with the DAG the cluster serves; returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rel_stored.yaml").write_text(STORED_DAG, encoding="utf-8")
    return directory


#: The share of requests per surface; the rest goes to the protocol envelope.
SURFACES = (("dag", 0.15), ("plan", 0.15), ("console", 0.15))

BAD_N: tuple[Any, ...] = ("abc", [], {}, None, 1.5, "", "\u0000", {"n": 1}, "1.5x")


@dataclass(frozen=True)
class Fixtures:
    approval_id: str
    approval_key: str
    completed_id: str
    sleeping_id: str

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.approval_id, self.completed_id, self.sleeping_id)

    @property
    def keys(self) -> tuple[str, ...]:
        """The wait keys open now (a form must never answer one)."""
        return (self.approval_key,)


@dataclass
class Request:
    method: str
    body: bytes | None  # None until built (an empty body is a defect of its own)
    headers: dict[str, str]
    mutating: bool
    http_method: str = "POST"
    form: Form | None = None  # a console form post instead of a JSON-RPC request
    tool: str | None = None  # the tool a tools/call names


class Generator:
    """A seeded generator of bad requests."""

    def __init__(self, rng: random.Random, fx: Fixtures, session: Session | None = None) -> None:
        self.rng = rng
        self.fx = fx
        self.ids = itertools.count(1)
        self.dags = DagGenerator(rng)
        self.plans = PlanGenerator(rng)
        self.forms = (
            None if session is None else FormGenerator(rng, session, fx.ids, BODY_CAP, fx.keys)
        )

    def surface(self) -> str:
        r = self.rng.random()
        for name, share in SURFACES:
            if r < share:
                return name
            r -= share
        return "mcp"

    def pick(self, seq: Any) -> Any:
        return self.rng.choice(seq)

    def value(self) -> Any:
        return self.pick(WEIRD_VALUES)

    def task_id(self) -> Any:
        r = self.rng.random()
        if r < 0.4:
            return self.pick(self.fx.ids)
        if r < 0.6:
            return self.pick(self.fx.ids) + self.pick(("x", "\u0000", " ", "é"))
        return self.value()

    # --- bases: a method and its params --------------------------------------------------

    def base(self) -> tuple[str, dict[str, Any], bool]:
        kind = self.pick(
            (
                "get",
                "get",
                "list",
                "discover",
                "status",
                "start",
                "signal",
                "update",
                "cancel",
                "unknown",
                "removed",
            )
        )
        if kind == "get":
            return "tasks/get", {"taskId": self.task_id()}, False
        if kind == "list":
            return "tools/list", {}, False
        if kind == "discover":
            return "server/discover", {}, False
        if kind == "status":
            args = {"handle": self.task_id()}
            return "tools/call", {"name": "rel_approval_status", "arguments": args}, False
        if kind == "start":
            wf = self.pick(("rel_steps", "rel_timer", "rel_approval", "rel_cancel"))
            body = self.pick(({"n": self.pick(BAD_N)}, self.value(), {"n": 1}))
            return "tools/call", {"name": f"start_{wf}", "arguments": {"body": body}}, True
        if kind == "signal":
            args = {
                "handle": self.task_id(),
                "name": self.pick(("go", "x", *WEIRD_TEXT[:6])),
                "payload": self.value(),
            }
            return "tools/call", {"name": "signal_rel_approval", "arguments": args}, True
        if kind == "update":
            return "tasks/update", self.update_params(), True
        if kind == "cancel":
            return "tasks/cancel", {"taskId": self.task_id()}, True
        if kind == "removed":
            return self.pick(("initialize", "ping", "tasks/list", "tasks/result")), {}, False
        return self.pick(("nope", "tools/nope", "", "tasks/", "rpc.x", "\u0000")), {}, False

    def update_params(self) -> dict[str, Any]:
        fx = self.fx
        key = self.pick((fx.approval_key, fx.approval_key + "0", "k", self.value()))
        content = self.pick(
            (
                {"decision": "approve"},
                {"decision": "maybe", "ticket": "t"},
                {"decision": "approve", "ticket": self.value()},
                {"decision": self.value(), "ticket": "t"},
                self.value(),
                {"decision": "approve", "ticket": "\u0000"},
                {"decision": "approve", "ticket": "t" * 300_000},
            )
        )
        action = self.pick(("decline", "cancel", "accept", "accept", self.value()))
        response: Any = self.pick(
            ({"action": action, "content": content}, {"content": content}, self.value())
        )
        responses: Any = self.pick(({str(key): response}, self.value(), {str(key): response}))
        return {
            "taskId": self.pick((fx.approval_id, fx.approval_id, self.task_id())),
            "inputResponses": responses,
        }

    # --- defects ---------------------------------------------------------------------------

    def request(self) -> Request:
        surface = self.surface()
        if surface == "console" and self.forms is not None:
            form = self.forms.form()
            return Request("console", self.forms.body(form), dict(form.headers), True, form=form)
        if surface in ("dag", "plan"):
            return self.document(surface)
        method, params, mutating = self.base()
        params = dict(params)
        params["_meta"] = meta()
        headers = headers_for(method, params)
        envelope: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": next(self.ids),
            "method": method,
            "params": params,
        }
        req = Request(method, None, headers, mutating)
        # A mutating request always gets a defect the server must refuse; the content of an
        # update or start may be wrong too, but that alone might be accepted.
        certain = self.rng.randint(1, 3) if mutating else self.rng.randint(0, 2)
        for _ in range(certain):
            self.pick(self.CERTAIN)(self, req, envelope, params)
        for _ in range(self.rng.randint(0, 2)):
            self.pick(self.EXTRA)(self, req, envelope, params)
        if req.body is None:
            req.body = json.dumps(envelope).encode()
        return req

    def document(self, surface: str) -> Request:
        """A tools/call of `dagu_execute` (an inline spec) or `create_workflow` (a plan): the
        document carries the certain defect, so the envelope is mostly well-formed and the
        call reaches the parser; now and then it gets an envelope defect as well."""
        if surface == "dag":
            tool, arguments = DAGU_TOOL, self.dags.arguments()
        else:
            tool, arguments = PLAN_TOOL, self.plans.arguments()
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta()}
        envelope = {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call"}
        envelope["params"] = params
        req = Request("tools/call", None, headers_for("tools/call", params), True, tool=tool)
        if self.rng.random() < 0.1:
            self.pick(self.CERTAIN)(self, req, envelope, params)
        if req.body is None:
            req.body = json.dumps(envelope).encode()
        return req

    def d_no_version(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        req.headers.pop("MCP-Protocol-Version", None)

    def d_bad_version(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        v = self.pick(("2025-11-25", "2099-01-01", "x", "=?base64?!!?="))
        req.headers["MCP-Protocol-Version"] = v

    def d_both_versions(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        req.headers["MCP-Protocol-Version"] = "2099-01-01"
        params["_meta"] = {
            **params["_meta"],
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
        }

    def d_method_header(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        if self.rng.random() < 0.5:
            req.headers.pop("Mcp-Method", None)
        else:
            req.headers["Mcp-Method"] = self.pick(("tools/list", "x", "=?base64?%%%?="))

    def d_name_header(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        req.headers["Mcp-Name"] = self.pick(("other", "=?base64?bm9wZQ==?=", "=?base64?***?="))

    def d_meta(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        m = dict(params["_meta"])
        choice = self.rng.randrange(3)
        if choice == 0:
            m.pop("io.modelcontextprotocol/clientCapabilities", None)
        elif choice == 1:
            m["io.modelcontextprotocol/clientCapabilities"] = self.pick((None, [], "x", 1))
        else:
            m["io.modelcontextprotocol/protocolVersion"] = self.pick((1, None, [], {}))
        params["_meta"] = m

    def d_content_type(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        req.headers["Content-Type"] = self.pick(("text/plain", "application/jsonx", ""))

    def d_host(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        if self.rng.random() < 0.5:
            req.headers["Host"] = self.pick(("evil.example", "127.0.0.1.nip.io:80"))
        else:
            req.headers["Origin"] = self.pick(("http://evil.example", "null", "file://"))

    def d_envelope(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        choice = self.rng.randrange(4)
        if choice == 0:
            env["jsonrpc"] = self.pick(("1.0", 2.0, None))
        elif choice == 1:
            env["id"] = self.pick(({}, [], 1.5, True))
        elif choice == 2:
            env["params"] = self.pick(([], "x", 1, None))
        else:
            env["method"] = self.pick((None, 1, "", []))

    def d_body(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        raw = json.dumps(env).encode()
        choice = self.rng.randrange(7)
        if choice == 0:
            req.body = raw[: self.rng.randrange(max(len(raw), 1))] or b"{"
        elif choice == 1:
            req.body = self.rng.randbytes(self.rng.randrange(1, 300))
        elif choice == 2:
            req.body = b"[" * self.rng.choice((10, 2000, 100_000))
        elif choice == 3:
            req.body = b"[" + raw + b"," + raw + b"]"  # a batch (not supported)
        elif choice == 4:
            req.body = raw.replace(b'"2.0"', b'"2.0\xff"')
        elif choice == 5:
            req.body = raw[:-1] + b',"x":"\\ud800"}'
        else:
            req.body = self.pick((b"", b"null", b"1", b'"x"', b"{}", b"1e999"))

    def d_tasks_capability(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        if req.method.startswith("tasks/"):
            params["_meta"] = meta(**{"io.modelcontextprotocol/clientCapabilities": {}})
        else:
            self.d_method_header(req, env, params)

    def d_http_method(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        req.http_method = self.pick(("GET", "PUT", "DELETE", "PATCH"))

    # Extra noise that may or may not be refused on its own.
    def x_extra_fields(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        params[self.pick(("x", "_meta2", "\u0000", "taskId2"))] = self.value()

    def x_param_types(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        for k in list(params):
            if k != "_meta" and self.rng.random() < 0.5:
                params[k] = self.value()

    def x_headers(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        name = self.pick(("Mcp-Param-X", "Idempotency-Key", "Accept", "Mcp-Session-Id"))
        req.headers[name] = self.pick(("x", "", "=?base64?eA==?=", "a" * 2000))

    def x_notification(self, req: Request, env: dict[str, Any], params: dict[str, Any]) -> None:
        if not req.mutating:
            env.pop("id", None)

    CERTAIN: tuple[Callable[..., None], ...] = (
        d_no_version,
        d_bad_version,
        d_both_versions,
        d_method_header,
        d_name_header,
        d_meta,
        d_content_type,
        d_host,
        d_envelope,
        d_body,
        d_tasks_capability,
        d_http_method,
    )
    EXTRA: tuple[Callable[..., None], ...] = (
        x_extra_fields,
        x_param_types,
        x_headers,
        x_notification,
    )


GROWING_TABLES = frozenset({"audit"})  # written by refused requests too, by design


async def snapshot(db: asyncpg.Pool) -> dict[str, tuple[int, str]]:
    """Row count and an order-independent digest of every table in the public schema."""
    tables = await db.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
    )
    out: dict[str, tuple[int, str]] = {}
    for t in tables:
        name = t["tablename"]
        rec = await db.fetchrow(
            f"SELECT count(*) AS n, md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), ''))"
            f' AS h FROM "{name}" x'
        )
        assert rec is not None
        out[name] = (int(rec["n"]), str(rec["h"]))
    return out


async def _fixtures(driver: Driver) -> Fixtures:
    """A task parked on an approval, a completed one, and one parked on a long timer."""
    approval_id = await _start(driver, Plan(0, "fuzzfix", "rel_approval", {"n": 0}, "completed"))
    completed_id = await _start(driver, Plan(1, "fuzzfix", "rel_steps", {"n": 1}, "completed"))
    body = {"n": 2, "mode": "sleep"}
    sleeping_id = await _start(driver, Plan(2, "fuzzfix", "rel_cancel", body, "cancelled"))
    approval = await _wait(driver, approval_id, lambda t: t["status"] == "input_required")
    await _wait(driver, sleeping_id, lambda t: t.get("statusMessage") == "waiting")
    await _wait(driver, completed_id, lambda t: t["status"] == "completed")
    key = next(iter(approval["inputRequests"]))
    return Fixtures(approval_id, key, completed_id, sleeping_id)


async def _start(driver: Driver, plan: Plan) -> str:
    res = RunResult(plan)
    task_id = await driver.create(plan, res, time.monotonic() + 60)
    if task_id is None:
        raise RuntimeError(f"fixture {plan.key}: {res.problems}")
    return task_id


async def _wait(
    driver: Driver, task_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while True:
            out = await driver.client.call(driver.servers[0], "tasks/get", {"taskId": task_id})
            task = out.result
            if task is not None and done(task):
                return task
            await asyncio.sleep(0.1)  # polling is the protocol


async def run_fuzz(
    cluster: Cluster,
    db: asyncpg.Pool,
    rng: random.Random,
    *,
    requests: int,
    fixtures: Fixtures | None = None,
) -> PhaseReport:
    """The phase against `cluster.servers`; `fixtures`: runs to aim at (default: started
    here through the reliability workflows)."""
    report = PhaseReport("fuzz")
    t0 = time.monotonic()
    client = Client(report.ledger, timeout=30.0)
    driver = Driver(client, cluster.servers, rng, deadline_s=60.0)
    fx = fixtures if fixtures is not None else await _fixtures(driver)
    first = cluster.servers[0]
    session = await _console_session(client, first)
    report.problems += await _unserved(client, first, session)
    gen = Generator(random.Random(rng.random()), fx, session)
    before = await snapshot(db)
    accepted: list[str] = []
    retryable = 0
    counter = itertools.count()
    unsendable = [0]
    by_surface: Counter[str] = Counter()

    async def lane() -> None:
        nonlocal retryable
        while next(counter) < requests:
            req = gen.request()
            by_surface[req.tool or ("console" if req.form else "mcp")] += 1
            proc = gen.pick(cluster.servers)
            try:
                out = await _send(client, proc, req)
            except (httpx.LocalProtocolError, UnicodeEncodeError):
                unsendable[0] += 1  # httpx refuses to put it on the wire
                continue
            if out.kind == "retryable":
                retryable += 1
                if len(report.problems) < 50:
                    report.problems.append(f"503 with the database up: {_show(req)}")
            if req.mutating and _accepted(req, out) and len(accepted) < 50:
                accepted.append(_show(req))
            if out.kind == "violation" and len(report.problems) < 50:
                report.problems.append(f"{out.detail[:200]} <- {_show(req)}")
            if _tool_failed(out) and len(report.problems) < 50:
                report.problems.append(f"{TOOL_INTERNAL} from {req.tool} <- {_show(req)}")

    done = asyncio.Event()
    probe = asyncio.create_task(_probe(cluster.servers, done, report))
    try:
        await asyncio.gather(*(lane() for _ in range(LANES)))
    finally:
        done.set()
        await probe
        await client.aclose()
    after = await snapshot(db)
    # The audit trail records refused calls too, so it may grow: append-only is its
    # own trigger's job; the accepted-mutation check below is what must stay empty.
    changed = {
        t: (before.get(t), v)
        for t, v in after.items()
        if before.get(t) != v and t not in GROWING_TABLES
    }
    for table_name, (b, a) in changed.items():
        report.problems.append(f"table {table_name} changed: {b} -> {a}")
    for table_name in sorted(GROWING_TABLES & after.keys()):
        grew = after[table_name][0] - before.get(table_name, (0, ""))[0]
        report.figures[f"{table_name} rows written"] = str(grew)
        if grew < 0:
            report.problems.append(f"table {table_name} lost {-grew} rows")
    report.problems += [f"mutating request accepted: {a}" for a in accepted]
    report.runs = 0
    report.figures["requests"] = str(requests)
    report.figures["requests by surface"] = ", ".join(
        f"{k}={v}" for k, v in sorted(by_surface.items())
    )
    compared = len(after.keys() - GROWING_TABLES)
    report.figures["tables unchanged"] = f"{compared - len(changed)}/{compared}"
    report.figures["not sendable by httpx (skipped)"] = str(unsendable[0])
    report.figures["503 with the database up"] = str(retryable)
    report.bad_503 = retryable
    report.figures["mutating requests accepted"] = str(len(accepted))
    report.seconds = time.monotonic() - t0
    return report


async def _console_session(client: Client, proc: Proc) -> Session | None:
    """A console session (its cookie) and its CSRF token, read from a page as a browser would;
    None when the console does not answer."""
    try:
        page = await client.http.get(f"{proc.base}{CONSOLE}/sign-in")
    except httpx.HTTPError:
        return None
    cookie = page.headers.get("set-cookie", "").split(";", 1)[0]
    csrf = csrf_of(page.text)
    if page.status_code != 200 or not cookie or csrf is None:
        return None
    return Session(cookie, csrf)


async def _unserved(client: Client, proc: Proc, session: Session | None) -> list[str]:
    """The surfaces this phase cannot reach: each is a failure (never a silent skip)."""
    problems = [] if session is not None else [f"the console is not served on {proc.label}"]
    out = await client.call(proc, "tools/list", {})
    names = {t.get("name") for t in (out.result or {}).get("tools", [])}
    problems += [f"tool {t} is not served" for t in (DAGU_TOOL, PLAN_TOOL) if t not in names]
    return problems


async def _probe(servers: list[Proc], done: asyncio.Event, report: PhaseReport) -> None:
    """Until `done`: each server's /healthz in turn, a few times a second; an answer that is
    not 200 within PROBE_LIMIT_S from a server that was up is a problem."""
    worst = 0.0
    failures = 0
    async with httpx.AsyncClient(timeout=PROBE_LIMIT_S) as http:
        while not done.is_set():
            for proc in servers:
                t = time.monotonic()
                try:
                    status = (await http.get(f"{proc.base}/healthz")).status_code
                except httpx.HTTPError as exc:
                    status, why = None, type(exc).__name__
                else:
                    why = f"status {status}"
                took = time.monotonic() - t
                worst = max(worst, took)
                slow = took > PROBE_LIMIT_S
                if (status != 200 or slow) and not proc.was_down(t, time.monotonic()):
                    failures += 1
                    if len(report.problems) < 50:
                        late = f" after {took:.1f}s" if slow else ""
                        report.problems.append(f"{proc.label} unresponsive: {why}{late}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.2)  # the probe's pace, not a wait
    report.figures["slowest /healthz during the phase"] = f"{worst:.2f}s"
    report.figures["unresponsive probes"] = str(failures)


async def _send_form(client: Client, proc: Proc, req: Request) -> Outcome:
    """A console form post; a page answer is judged by its status alone (no JSON-RPC)."""
    form = req.form
    assert form is not None and req.body is not None
    body = req.body
    headers = dict(req.headers)
    content: Any = body
    if form.chunked:

        async def chunks() -> Any:
            for i in range(0, len(body), 64 * 1024):
                yield body[i : i + 64 * 1024]

        content = chunks()
    url = f"{proc.base}{CONSOLE}{form.path}"
    t0 = time.monotonic()
    try:
        resp = await client.http.post(url, content=content, headers=headers)
    except httpx.TransportError as exc:
        t1 = time.monotonic()
        # A server may close the connection on an upload over the cap once it has said 413.
        expected = form.oversized or proc.was_down(t0, t1)
        kind = "refused" if form.oversized else "expected_drop" if expected else "violation"
        out = Outcome(kind, "console", proc.label, detail=f"transport {type(exc).__name__}")
    else:
        t1 = time.monotonic()
        status = resp.status_code
        if status >= 500:
            detail = f"5xx {form.path} {resp.text[:200]}"
            out = Outcome("violation", "console", proc.label, status, None, detail)
        elif form.oversized and not form.chunked and status != 413:
            # A declared length over the cap is refused before any handler; a chunked body
            # is refused only if the handler reads it (one that does not is never over it).
            detail = f"{status} for a declared length over the cap {form.path}"
            out = Outcome("violation", "console", proc.label, status, None, detail)
        else:
            out = Outcome("refused" if status >= 400 else "ok", "console", proc.label, status)
    out.seconds = t1 - t0
    client.ledger.add(out)
    return out


async def _send(client: Client, proc: Proc, req: Request) -> Outcome:
    assert req.body is not None
    if req.form is not None:
        return await _send_form(client, proc, req)
    if req.http_method == "POST":
        return await client.send(proc, req.method, req.body, req.headers)
    # Other verbs: 405 expected.
    t = time.monotonic()
    resp = await client.http.request(
        req.http_method, proc.url, content=req.body, headers=req.headers
    )
    out = judge(req.method, proc.label, resp)
    out.seconds = time.monotonic() - t
    client.ledger.add(out)
    return out


def _tool_failed(out: Outcome) -> bool:
    """A tool result that says the server failed (the dagu tools answer an exception they did
    not expect with this code, inside an ordinary tool error): as bad as a 5xx."""
    error = (out.result or {}).get("structuredContent")
    return isinstance(error, dict) and error.get("code") == TOOL_INTERNAL


def _accepted(req: Request, out: Outcome) -> bool:
    result = out.result
    if result is None:
        return False
    if req.tool == PLAN_TOOL:  # a refusal is a provide_input reply; a plan taken has an id
        return b"workflow_id" in json.dumps(result).encode()
    if req.method == "tools/call":
        return not result.get("isError", False)
    return req.method == "tasks/cancel"


def _show(req: Request) -> str:
    head = {k: v[:80] for k, v in req.headers.items()}
    where = f"{CONSOLE}{req.form.path} " if req.form is not None else ""
    return f"{req.http_method} {where}{head} {(req.body or b'')[:1500]!r}"
