"""The security matrix: every MCP method and every tool kind x caller (anonymous,
an expired and a revoked token, and reader, operator and admin tokens bound to a tenant or to
none) x the tenant of the run the call targets (the caller's own, another, none), over real
HTTP against real PostgreSQL, one server for the whole matrix.

The cases are generated from the server's catalog (tools/list, resources/templates/list) and
the method list below, so a new tool or template is in the matrix without touching this file
(a tool whose kind `_classify` does not know, or a template with a variable `_fill` does not
know, fails loudly). The expected outcome of each case comes from `POLICY` and `sees` — a
small table written from the policy (docs/security.md), not from the server's code:

- a caller without a live token (none, expired, revoked) → 401 with a Bearer challenge;
- a role that may not call the method or tool kind → 403 and JSON-RPC -31001 (dagu_execute
  authorizes itself: an `unauthorized` tool error);
- a run outside the caller's tenants → the very answer an id that does not exist gets;
- anything else is served (a result or an error of the call itself, never a refusal).

Every refused case changes no table (executions rows and versions, history, signals,
updates, steps, child_runs, api_tokens); the audit table grows by exactly one `refused` row
per refusal of an audited method by role.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apps.every_kind import app
from tests.e2e.conftest import serve
from tests.mcp_client import McpClient, meta
from tether.jsonrpc import codes
from tether.runtime import tokens
from tether.runtime.ids import new_execution_id
from tether.runtime.service import database
from tether.security.tokens import hash_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

# ---------------------------------------------------------------------------------------------
# The policy: who may do what, and who sees which runs. Written from the docs, not the server.

#: Methods that only read. Every tasks/* method is a mutation (a reader cannot poll a task).
READS = frozenset(
    {
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
    }
)
#: Tool kinds that only read.
READ_TOOLS = frozenset({"plain_read", "status", "watch", "dagu_read"})
EVERYTHING = "*"
#: role → the actions it may take: a method, or `tools/call:<kind>`.
POLICY: dict[str, frozenset[str]] = {
    "reader": READS | {f"tools/call:{k}" for k in READ_TOOLS},
    "operator": frozenset({EVERYTHING}),
    "admin": frozenset({EVERYTHING}),
}
OWN, OTHER = "acme", "globex"
NONE = "-"  # the label of "no tenant"
RUN_TENANTS = (OWN, OTHER, NONE)


@dataclass(frozen=True)
class Caller:
    name: str  # the token's name: the principal the audit trail records
    role: str | None  # None: no token at all
    tenant: str  # a tenant label (NONE: bound to no tenant)
    credential: str  # live | expired | revoked | absent


CALLERS = (
    Caller("anonymous", None, NONE, "absent"),
    Caller("expired", "admin", NONE, "expired"),
    Caller("revoked", "admin", NONE, "revoked"),
    *(
        Caller(f"{role}-{tenant}", role, tenant, "live")
        for role in ("reader", "operator", "admin")
        for tenant in (OWN, NONE)
    ),
)


def sees(caller: Caller, run_tenant: str) -> bool:
    """A caller sees its own tenant's runs; one bound to no tenant sees the runs with none,
    except an admin bound to no tenant, which sees every tenant."""
    return caller.tenant == run_tenant or (caller.role == "admin" and caller.tenant == NONE)


@dataclass(frozen=True)
class Case:
    method: str
    target: str  # tool name, URI template or prompt name ("" for none)
    action: str  # the policy's key: the method, or tools/call:<kind>
    run: str | None = None  # the kind of run it targets: gate | dag
    tenant: str = NONE  # that run's tenant label

    def label(self, caller: Caller) -> str:
        where = ""
        if self.run is not None:
            relation = (
                "own"
                if self.tenant == caller.tenant
                else "none"
                if self.tenant == NONE
                else "other"
            )
            where = f" on a {self.tenant} {self.run} run ({relation})"
        return f"{caller.name}: {self.method} {self.target}{where}".replace("  ", " ")


def expected(caller: Caller, case: Case, policy: dict[str, frozenset[str]] = POLICY) -> str:
    if caller.credential != "live" or caller.role is None:
        return "unauthenticated"
    may = policy[caller.role]
    if EVERYTHING not in may and case.action not in may:
        return "forbidden"
    if case.run is not None and not sees(caller, case.tenant):
        return "not_found"
    return "served"


@dataclass(frozen=True)
class Record:
    caller: Caller
    case: Case
    observed: str


def check(records: list[Record], policy: dict[str, frozenset[str]] = POLICY) -> list[str]:
    """One line per case whose observed outcome is not the policy's."""
    return [
        f"{r.case.label(r.caller)}: expected {want}, observed {r.observed}"
        for r in records
        if (want := expected(r.caller, r.case, policy)) != r.observed
    ]


# ---------------------------------------------------------------------------------------------
# The cases, from the server's catalog.

#: Tool kinds by name (the app's workflows are `gate` and the DAG `served`).
_KINDS = (
    (r"lookup", "plain_read"),
    (r"poke", "plain_write"),
    (r"gate_run", "workflow"),
    (r"start_\w+", "start"),
    (r"\w+_status", "status"),
    (r"\w+_watch", "watch"),
    (r"signal_\w+", "signal"),
    (r"answer_\w+", "answer"),
    (r"\w+_update_\w+", "update"),
    (r"dagu_execute", "dagu_execute"),
    (r"dagu_read", "dagu_read"),
)
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
PLAIN_METHODS = (
    "server/discover",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
)


def _classify(name: str) -> str:
    for pattern, kind in _KINDS:
        if re.fullmatch(pattern, name):
            return kind
    pytest.fail(f"tool {name}: classify its kind in _KINDS (and the policy)")


def _run_kind(tool: str) -> str:
    return "dag" if "served" in tool or tool.startswith("dagu_") else "gate"


def _on_runs(method: str, target: str, action: str, run: str) -> list[Case]:
    return [Case(method, target, action, run, t) for t in RUN_TENANTS]


def generate(tools: list[dict[str, Any]], templates: list[str]) -> list[Case]:
    cases = [Case(m, "", m) for m in PLAIN_METHODS]
    cases.append(Case("prompts/get", "greeting", "prompts/get"))
    for tool in tools:
        name = tool["name"]
        action = f"tools/call:{_classify(name)}"
        takes_run = "handle" in tool["inputSchema"].get("required", []) or name == "dagu_read"
        if name == "dagu_execute":
            cases.append(Case("tools/call", name, action))  # start: no run yet
        if takes_run or name == "dagu_execute":
            cases += _on_runs("tools/call", name, action, _run_kind(name))
        else:
            cases.append(Case("tools/call", name, action))
    for template in templates:
        run = "gate" if "{id}" in template else "dag" if "{dagRunId}" in template else None
        if run is None:
            cases.append(Case("resources/read", template, "resources/read"))
        else:
            cases += _on_runs("resources/read", template, "resources/read", run)
    for method in TASK_METHODS:
        for run in ("gate", "dag"):
            cases += _on_runs(method, "", method, run)
    return cases


# ---------------------------------------------------------------------------------------------
# Requests.


@dataclass(frozen=True)
class Run:
    id: str
    business_id: str
    key: str  # the key of the wait it is parked on

    def missing(self) -> Run:
        """A run of the same shape that does not exist."""
        other = new_execution_id()
        return Run(other, other, self.key.replace(self.id, other))


SAMPLES: dict[str, Any] = {
    "text": "hi",
    "body": {},
    "wait": "go",
    "response": {"decision": "approve"},
    "name": "nudge",
    "payload": {"n": 1},
    "input": {"text": "hi"},
    "timeout_seconds": 1,
}


def _fill(template: str, run: Run | None) -> str:
    values = {"name": "served", "stepName": "work"}
    if run is not None:
        values |= {"id": run.id, "dagRunId": run.business_id}
    uri = re.sub(r"\{(\w+)\}", lambda m: values.get(m[1], m[0]), template)
    if "{" in uri:
        pytest.fail(f"template {template}: add a value for its variables in _fill")
    return uri


def _arguments(tool: dict[str, Any], run: Run | None) -> dict[str, Any]:
    name = tool["name"]
    if name == "dagu_execute":
        if run is None:
            return {"action": "start", "name": "served"}
        return {
            "action": "approve",
            "name": "served",
            "targetType": "run",
            "dagRunId": run.business_id,
            "stepName": "work",
        }
    if name == "dagu_read":
        return {"uri": _fill("dagu://runs/{name}/{dagRunId}", run)}
    schema = tool["inputSchema"]
    args = {k: SAMPLES[k] for k in schema.get("properties", {}) if k in SAMPLES}
    if run is not None:
        args["handle"] = run.id
    unknown = set(schema.get("required", [])) - set(args)
    if unknown:
        pytest.fail(f"tool {name}: add a sample for required arguments {unknown}")
    return args


def params(case: Case, tools: dict[str, dict[str, Any]], run: Run | None) -> dict[str, Any]:
    if case.method == "tools/call":
        return {"name": case.target, "arguments": _arguments(tools[case.target], run)}
    if case.method == "resources/read":
        return {"uri": _fill(case.target, run)}
    if case.method == "prompts/get":
        return {"name": case.target, "arguments": {"who": "you"}}
    if case.method.startswith("tasks/"):
        assert run is not None
        out: dict[str, Any] = {"taskId": run.id}
        if case.method == "tasks/update":
            answer = {"action": "accept", "content": SAMPLES["response"]}
            out["inputResponses"] = {run.key: answer}
        return out
    return {}


def observe(status: int, headers: httpx.Headers, body: dict[str, Any], twin: Any) -> str:
    """The outcome of one response; `twin` is the (status, body) an id that does not exist
    got, the run's id swapped in (None for a case without a run)."""
    error = body.get("error") or {}
    if status == 401:
        challenged = headers.get("www-authenticate", "").startswith("Bearer")
        good = challenged and error.get("code") == codes.UNAUTHENTICATED
        return "unauthenticated" if good else f"401 without challenge or code: {body}"
    if status == 403:
        good = error.get("code") == codes.UNAUTHORIZED
        return "forbidden" if good else f"403 with {error}"
    result = body.get("result") or {}
    structured = result.get("structuredContent") or {}
    if result.get("isError") is True and structured.get("code") == "unauthorized":
        return "forbidden"  # dagu_execute authorizes itself
    if twin is not None and (status, body) == twin:
        return "not_found"
    return "served"


def _swap(body: dict[str, Any], run: Run, missing: Run) -> dict[str, Any]:
    raw = orjson.dumps(body)
    for old, new in ((missing.id, run.id), (missing.business_id, run.business_id)):
        raw = raw.replace(old.encode(), new.encode())
    out: dict[str, Any] = orjson.loads(raw)
    return out


# ---------------------------------------------------------------------------------------------
# Tables.

_SNAPSHOT = """
SELECT (SELECT coalesce(array_agg(ROW(id, version, status, last_event_id, tenant,
                                       waits::text)::text ORDER BY id), '{}')
          FROM executions),
       (SELECT count(*) FROM history), (SELECT count(*) FROM signals),
       (SELECT count(*) FROM updates), (SELECT count(*) FROM steps),
       (SELECT count(*) FROM child_runs),
       (SELECT coalesce(array_agg(ROW(id, name, role, tenant, hash, expires_at,
                                       revoked_at)::text ORDER BY id), '{}')
          FROM api_tokens)
"""


async def snapshot(db: asyncpg.Pool) -> tuple[Any, ...]:
    """Every table a call may change, but the audit trail (and api_tokens.last_used_at, the
    bookkeeping of a token that authenticated)."""
    row = await db.fetchrow(_SNAPSHOT)
    assert row is not None
    return tuple(row)


async def quiet(db: asyncpg.Pool) -> None:
    """Wait (bounded) until no run is pending or running: every run is parked or ended."""
    async with asyncio.timeout(15):
        while True:
            busy = await db.fetchval(
                "SELECT count(*) FROM executions WHERE status IN ('pending', 'running')"
            )
            if not busy:
                return
            await asyncio.sleep(0.02)


# ---------------------------------------------------------------------------------------------
# The run.

SETUP = {t: f"setup-{t}" for t in RUN_TENANTS}  # operators that start the runs under test
AUDITED = frozenset({"tools/call", "tasks/update", "tasks/cancel"})


async def create_tokens(db_url: str) -> dict[str, str]:
    """Every caller's token (and the setup operators') in the store: name → secret."""
    secrets: dict[str, str] = {}
    past = datetime.now(UTC) - timedelta(minutes=1)
    async with database(db_url) as db:
        entries = [(c.name, c.role or "", c.tenant, c.credential) for c in CALLERS if c.role]
        entries += [(name, "operator", t, "live") for t, name in SETUP.items()]
        for name, role, tenant, state in entries:
            secrets[name] = f"tt_matrix-{name}-{new_execution_id()}"
            await tokens.create(
                db,
                name=name,
                role=role,
                tenant=None if tenant == NONE else tenant,
                digest=hash_token(secrets[name]),
                expires_at=past if state == "expired" else None,
            )
            if state == "revoked":
                assert await tokens.revoke(db, name)
    return secrets


class Matrix:
    def __init__(self, c: McpClient, secrets: dict[str, str], db: asyncpg.Pool) -> None:
        self.c = c
        self.secrets = secrets
        self.db = db
        self.tools: dict[str, dict[str, Any]] = {}
        self.runs: dict[tuple[str, str], Run] = {}
        self.audited = 0  # requests that reached the endpoint with an audited method
        self.refused_rows: Counter[tuple[str, str, str | None]] = Counter()

    def headers(self, name: str) -> dict[str, str | None]:
        secret = self.secrets.get(name)
        return {"Authorization": f"Bearer {secret}" if secret else None}

    async def send(self, name: str, method: str, p: dict[str, Any]) -> httpx.Response:
        resp = await self.c.request(method, p, headers=self.headers(name))
        if method in AUDITED and resp.status_code != 401:
            self.audited += 1
        return resp

    async def start(self, tenant: str, tool: str) -> Run:
        """A run started by `tenant`'s setup operator, parked on its approval."""
        created = await self.send(
            SETUP[tenant], "tools/call", {"name": tool, "arguments": {"body": {}}}
        )
        assert "taskId" in created.json().get("result", {}), created.json()
        run_id = created.json()["result"]["taskId"]
        async with asyncio.timeout(15):
            while True:
                row = await self.db.fetchrow(
                    "SELECT status, business_id, waits::text FROM executions WHERE id = $1",
                    run_id,
                )
                if row is not None and row["status"] == "waiting":
                    break
                await asyncio.sleep(0.02)
        return Run(run_id, row["business_id"], orjson.loads(row["waits"])[0]["key"])

    async def setup(self) -> list[Case]:
        listed = await self.c.result("tools/list", headers=self.headers("admin-" + NONE))
        self.tools = {t["name"]: t for t in listed["tools"]}
        templates = await self.c.result(
            "resources/templates/list", headers=self.headers("admin-" + NONE)
        )
        for tenant in RUN_TENANTS:
            self.runs[("gate", tenant)] = await self.start(tenant, "start_gate")
            self.runs[("dag", tenant)] = await self.start(tenant, "start_served")
        await quiet(self.db)
        return generate(listed["tools"], [t["uriTemplate"] for t in templates["resourceTemplates"]])

    async def run_case(self, caller: Caller, case: Case) -> str:
        run = self.runs[(case.run, case.tenant)] if case.run is not None else None
        resp = await self.send(caller.name, case.method, params(case, self.tools, run))
        body: dict[str, Any] = resp.json()
        body.pop("id", None)
        outcome = observe(resp.status_code, resp.headers, body, None)
        if outcome == "served" and run is not None:  # or is it a missing run's answer?
            missing = run.missing()
            other = await self.send(caller.name, case.method, params(case, self.tools, missing))
            other_body: dict[str, Any] = other.json()
            other_body.pop("id", None)
            twin = (other.status_code, _swap(other_body, run, missing))
            outcome = observe(resp.status_code, resp.headers, body, twin)
        if outcome == "forbidden" and case.method in AUDITED:
            tool = case.target if case.method == "tools/call" else None
            self.refused_rows[(caller.name, case.method, tool)] += 1
        return outcome

    async def audit_rows(self) -> list[asyncpg.Record]:
        """The audit trail once every audited request's row is written (bounded wait)."""
        async with asyncio.timeout(10):
            while True:
                if await self.db.fetchval("SELECT count(*) FROM audit") >= self.audited:
                    break
                await asyncio.sleep(0.05)
        return await self.db.fetch("SELECT principal, method, tool, outcome FROM audit")


@dataclass
class Outcome:
    records: list[Record]
    changed: list[str]  # refused cases after which a table differed
    audit: list[str]  # audit-trail discrepancies
    seconds: float


_RECORDED: list[Outcome] = []


async def run_matrix(db_url: str, client: Callable[[str], McpClient], db: asyncpg.Pool) -> Outcome:
    """Every case, once per session: refusals first (the runs still as set up), each between
    two snapshots; then the served cases, which may move the runs on."""
    if _RECORDED:
        return _RECORDED[0]
    began = time.monotonic()
    secrets = await create_tokens(db_url)
    async with serve(app, db_url) as url:
        m = Matrix(client(url), secrets, db)
        cases = await m.setup()
        pairs = [(caller, case) for case in cases for caller in CALLERS]
        pairs.sort(key=lambda p: expected(*p) == "served")
        records, changed = [], []
        for caller, case in pairs:
            refusal = expected(caller, case) != "served"
            before = await snapshot(db) if refusal else None
            observed = await m.run_case(caller, case)
            records.append(Record(caller, case, observed))
            if refusal and await snapshot(db) != before:
                changed.append(case.label(caller))
                await quiet(db)
        rows = await m.audit_rows()
        audit = []
        if len(rows) != m.audited:
            audit.append(f"{len(rows)} audit rows for {m.audited} audited requests")
        refused = Counter(
            (r["principal"], r["method"], r["tool"]) for r in rows if r["outcome"] == "refused"
        )
        if refused != m.refused_rows:
            audit.append(f"refused rows {dict(refused)} != refusals {dict(m.refused_rows)}")
    outcome = Outcome(records, changed, audit, time.monotonic() - began)
    _RECORDED.append(outcome)
    return outcome


async def test_the_security_matrix(
    db_url: str, client: Callable[[str], McpClient], db: asyncpg.Pool
) -> None:
    """Every case observed as the policy says; no refusal changed a table; the audit trail
    holds one row per audited request and one `refused` row per refusal by role."""
    out = await run_matrix(db_url, client, db)
    callers = {r.caller for r in out.records}
    assert callers == set(CALLERS)
    kinds = {r.case.action for r in out.records}
    assert {f"tools/call:{k}" for _, k in _KINDS} <= kinds  # every tool kind
    assert {"tasks/get", "tasks/update", "tasks/cancel", "resources/read"} <= kinds
    problems = check(out.records) + [f"changed a table: {c}" for c in out.changed] + out.audit
    print(f"security matrix: {len(out.records)} cases in {out.seconds:.1f}s")
    assert not problems, "\n".join(problems)
    assert out.seconds < 90


async def test_the_matrix_reports_a_policy_it_does_not_match(
    db_url: str, client: Callable[[str], McpClient], db: asyncpg.Pool
) -> None:
    """The matrix can fail: pretend readers may poll tasks (tasks/get) and the checker reports
    exactly the reader x tasks/get cases, and nothing else."""
    out = await run_matrix(db_url, client, db)
    lax = {**POLICY, "reader": POLICY["reader"] | {"tasks/get"}}
    reported = check(out.records, lax)
    flipped = [
        r.case.label(r.caller)
        for r in out.records
        if (r.caller.role, r.caller.credential, r.case.method) == ("reader", "live", "tasks/get")
    ]
    assert flipped and len(reported) == len(flipped) + len(check(out.records))
    assert {line.split(": expected")[0] for line in reported} >= set(flipped)
    assert all("observed forbidden" in line for line in reported if "tasks/get" in line)


def _headers_near(secrets: list[str]) -> st.SearchStrategy[str]:
    """Authorization values: arbitrary header text, and near misses of real secrets (another
    scheme, a cut, one character changed, another case, extra spaces)."""
    chars = st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f")
    text = st.text(chars, max_size=80)
    secret = st.sampled_from(secrets)
    scheme = st.sampled_from(["Bearer", "bearer", "BEARER", "Basic", "Token", "Bearer:", ""])
    mangled = st.tuples(secret, st.integers(0, 60), text.map(lambda t: t[:2])).map(
        lambda p: p[0][: p[1]] + p[2] + p[0][p[1] + len(p[2]) :]
    )
    value = st.one_of(secret, mangled, secret.map(str.swapcase), text)
    joined = st.tuples(scheme, st.sampled_from([" ", "  ", "\t", ""]), value)
    return st.one_of(text, joined.map("".join)).map(str.strip)


async def test_a_fuzzed_authorization_header_over_http(db_url: str) -> None:
    """Hypothesis, over real HTTP with the database's token store: a header authenticates
    only when it is `Bearer` (any case) and a live secret; anything else — near misses, the
    expired and the revoked secrets, arbitrary text — is 401 with a Bearer challenge, never a
    server error. (tests/security/test_limits.py fuzzes the middleware in process.)"""
    secrets = await create_tokens(db_url)
    live = {v for k, v in secrets.items() if k not in ("expired", "revoked")}
    async with serve(app, db_url) as url:

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(_headers_near(sorted(secrets.values())))
        def fuzz(header: str) -> None:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
            headers = McpClient(url).headers("tools/list", {})
            resp = http.post(
                url,
                content=orjson.dumps(body),
                headers=[
                    *((k.encode(), v.encode()) for k, v in headers.items()),
                    (b"authorization", header.encode("latin-1")),
                ],
            )
            scheme, _, token = header.partition(" ")
            known = scheme.lower() == "bearer" and token.strip() in live
            assert resp.status_code == (200 if known else 401), (header, resp.text)
            if not known:
                assert resp.headers["www-authenticate"].startswith("Bearer")

        with httpx.Client(timeout=30) as http:
            await asyncio.to_thread(fuzz)
