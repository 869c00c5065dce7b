"""Composition root: the Starlette app, its lifespan (runtime up and down), and routes.

The only module that wires concrete pieces together: storage + runtime (via service.running),
the JSON-RPC router, and the MCP surfaces (server methods, tools, tasks).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tether import __version__, gc_tuning
from tether.console import PREFIX as CONSOLE_PREFIX
from tether.console import Console, console_route, running_console
from tether.jsonrpc import codes
from tether.jsonrpc.errors import JsonRpcError
from tether.jsonrpc.http import PRINCIPAL_KEY, McpEndpoint
from tether.jsonrpc.router import RequestContext, Router
from tether.mcp import observe
from tether.mcp.route import McpRoute, McpShortcut
from tether.mcp.server import McpServer, ServerInfo
from tether.mcp.subscriptions import Limits, Subscriptions, WatchTools, run_resource
from tether.observability import exposition, metrics, tracing
from tether.observability.exposition import Scrape
from tether.principal import Principal
from tether.runtime import audit
from tether.runtime import health as probes
from tether.runtime.audit import AuditWriter
from tether.runtime.changes import SWEEP_S, ChangeHub
from tether.runtime.registry import App
from tether.runtime.resource_watches import ResourceWatches, settles
from tether.runtime.service import Runtime, running
from tether.runtime.tokens import TokenStore
from tether.security import roles
from tether.security.hosts import HostPolicy
from tether.security.limits import RateLimiter, StreamSlots, parse_rate, stream_guard
from tether.security.middleware import SecurityMiddleware
from tether.security.tokens import ANONYMOUS, Authenticator
from tether.settings import Settings
from tether.tasks import methods as task_methods
from tether.tasks.service import TaskService
from tether.tools import offload
from tether.tools.catalog import Catalog, DaguNames
from tether.tools.dagu.reading import DaguResources
from tether.tools.dagu.resolve import resolve_run_uri
from tether.tools.live import LiveCatalog
from tether.tools.service import ToolService, ToolSettings

logger = logging.getLogger(__name__)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _subscriptions(
    router: Router,
    rt: Runtime,
    settings: Settings,
    authorize: Callable[[RequestContext], None],
    catalog: Catalog,
) -> Subscriptions:
    """subscriptions/listen over the router's tasks/get and resources/read, fed by one change
    hub on the runtime's listener. Resources a stream can follow: a surface registers
    `resolve(uri) -> execution id | None` and which of the run's changes count
    (runtime/resource_watches.py) on `watches` here. Tool list changes are agreed when the
    catalog follows reloaded DAG files."""
    watches = ResourceWatches()
    watches.register(run_resource)
    if _serves_dags(rt.ops.app, settings):  # dagu://runs/{name}/{dagRunId}: each checkpoint

        async def dagu_run(uri: str) -> str | None:
            return await resolve_run_uri(rt.ops, uri)

        watches.register(dagu_run, counts=settles)
    return Subscriptions(
        router,
        rt.ops,
        ChangeHub(rt.listener, sweep_s=SWEEP_S),
        watches=watches,
        authorize=authorize,
        limits=Limits(
            max_subscriptions=settings.max_subscriptions,
            max_ids=settings.max_subscription_ids,
            send_timeout_s=settings.subscription_send_timeout_s,
        ),
        watch_tools=_watch_tools(catalog, settings),
    )


def _serves_dags(app: App, settings: Settings) -> bool:
    """DAGs now, or a directory that may bring some while serving."""
    return bool(app.dags) or settings.dags is not None


def _watch_tools(catalog: Catalog, settings: Settings) -> WatchTools | None:
    """How a listen stream hears of tool list changes: only when DAG files are reloaded."""
    return catalog.watch if isinstance(catalog, LiveCatalog) and settings.dags else None


def _state_key(settings: Settings) -> bytes:
    """TETHER_STATE_KEY, or a random key for this process. Without the setting, a development
    server (one instance, restarted at will) says so as information; any other server warns,
    since its instances cannot read one another's requestState or sign-ins."""
    if settings.state_key:
        return settings.state_key.encode()
    if settings.development():
        logger.info(
            "TETHER_STATE_KEY is not set: MRTR requestState and console sign-ins last until "
            "this development server restarts"
        )
    else:
        logger.warning(
            "TETHER_STATE_KEY is not set: MRTR requestState and console sign-ins are only "
            "valid on this instance until it restarts; set it to the same secret on every "
            "server, e.g. "
            "TETHER_STATE_KEY=$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return secrets.token_bytes(32)


def _recorder(
    auditor: AuditWriter | None, authorizes_itself: Callable[[object], bool]
) -> Callable[[RequestContext, dict[str, Any] | None, JsonRpcError | None], None]:
    """Records the outcome of each audited MCP call (roles.audit_facts) with `auditor`;
    `authorizes_itself(tool name)`: the tool refuses callers itself (as a tool error)."""

    def record(
        ctx: RequestContext, result: dict[str, Any] | None, error: JsonRpcError | None
    ) -> None:
        if auditor is None or ctx.method not in roles.AUDITED_METHODS:
            return  # what audit_facts would say (a tasks/get poll is not audited), sooner
        own = ctx.method == "tools/call" and authorizes_itself(ctx.params.get("name"))
        facts = roles.audit_facts(ctx, result, error, self_authorizing=own)
        if facts is not None:
            auditor.record(audit.entry(surface="mcp", **vars(facts)))

    return record


def _principal(name: str, role: str, tenant: str | None) -> Principal:
    return Principal(name, role, tenant)  # type: ignore[arg-type]  # role: a DB CHECK


def _authorizer(catalog: Catalog) -> Callable[[RequestContext], None]:
    """The role check, given what the catalog says of the tool called (read-only, or one
    that authorizes itself, as dagu_execute does)."""

    def authorize(ctx: RequestContext) -> None:
        if ctx.method != "tools/call":  # only a tool call asks the catalog (not tasks/get)
            roles.authorize(ctx, False)
            return
        name = ctx.params.get("name")
        roles.authorize(ctx, catalog.read_only(name) or catalog.authorizes_itself(name))

    return authorize


def dagu_names(settings: Settings) -> DaguNames:
    return DaguNames(settings.dagu_tool_name, settings.dagu_read_tool_name)


def _tool_settings(settings: Settings, state_key: bytes) -> ToolSettings:
    return ToolSettings(
        state_key=state_key,
        sync_limit_s=settings.sync_limit_s,
        start_wait_s=settings.start_wait_s,
        spec_limits=settings.spec_limits(),
    )


def build_endpoint(
    app: App,
    rt: Runtime,
    settings: Settings,
    auditor: AuditWriter | None = None,
    catalog: Catalog | None = None,
) -> McpEndpoint:
    """The MCP endpoint over a running runtime; `auditor` receives its audit entries;
    `catalog`: the tools served (default: built once from the app; a LiveCatalog that is
    following the app's DAGs serves reloaded DAG files' tools and tells listeners)."""
    state_key = _state_key(settings)
    catalog = catalog if catalog is not None else Catalog.build(app, dagu=dagu_names(settings))
    info = ServerInfo(tools_list_changed=_watch_tools(catalog, settings) is not None)
    tasks = TaskService(
        rt.ops,
        served=catalog.in_catalog,
        poll_interval_ms=settings.poll_interval_ms,
        answer_tool=catalog.answer_tool,
    )
    tools = ToolService(rt.ops, catalog, tasks, _tool_settings(settings, state_key))
    router = Router()
    dagu = DaguResources(rt.ops) if _serves_dags(app, settings) else None
    McpServer(app, rt.ops, info, dagu=dagu).register(router)
    tools.register(router)
    task_methods.register(router, tasks)
    server_info = info.implementation()
    record = _recorder(auditor, catalog.authorizes_itself)

    def stamp(ctx: RequestContext, result: dict[str, Any]) -> None:
        record(ctx, result, None)
        if ctx.route.era == "modern":
            meta = result.setdefault("_meta", {})
            meta[codes.META_SERVER_INFO] = server_info

    def failed(ctx: RequestContext, error: JsonRpcError) -> None:
        record(ctx, None, error)

    authorize = _authorizer(catalog)

    _subscriptions(router, rt, settings, authorize, catalog).register(router)
    return McpEndpoint(
        router,
        max_body_bytes=settings.max_body_bytes,
        param_schema=catalog.schema_of,
        authorize=authorize,
        on_result=stamp,
        on_error=failed,
        open_stream=stream_guard(StreamSlots(settings.max_streams_per_token)),
        observe=observe.observer(router.knows, lambda name: catalog.get(name) is not None),
        on_stream=metrics.stream_changed,
    )


def authenticator(settings: Settings) -> Authenticator:
    """The static tokens (TETHER_API_TOKENS); the lifespan attaches the database's store."""
    return Authenticator.from_settings(
        settings.api_tokens, settings.host, settings.allow_unauthenticated
    )


def security(settings: Settings, auth: Authenticator | None = None) -> Middleware:
    """The security layer around every route: Host/Origin policy, authentication, the body cap
    and the request rate. The console's paths pass without a token: it signs in by cookie."""
    rate = parse_rate(settings.rate_limit)
    return Middleware(
        SecurityMiddleware,
        hosts=HostPolicy(_csv(settings.allowed_hosts), _csv(settings.allowed_origins)),
        authenticator=auth or authenticator(settings),
        probes=PROBES,
        max_body_bytes=settings.max_body_bytes,
        limiter=RateLimiter(rate) if rate is not None else None,
        session_prefix=CONSOLE_PREFIX if settings.console_enabled() else None,
    )


def console(
    settings: Settings, rt: Runtime, auth: Authenticator, auditor: AuditWriter | None
) -> contextlib.AbstractAsyncContextManager[Console | None]:
    """The console's parts while the runtime runs (None when the console is off)."""
    if not settings.console_enabled():
        return contextlib.nullcontext(None)
    return running_console(
        rt.ops, auth, settings.state_key, PRINCIPAL_KEY, auditor, settings.max_streams_per_token
    )


@contextlib.asynccontextmanager
async def access_control(rt: Runtime, auth: Authenticator) -> AsyncIterator[AuditWriter]:
    """The database's token store (loaded before serving, attached to `auth`) and the audit
    writer, each running in the background; both write what they hold on the way out."""
    store = TokenStore(rt.pool, rt.listener, _principal)
    auditor = AuditWriter(rt.pool)
    await store.reload()
    auth.attach(store)
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(store.run(), name="tether-tokens")
            tg.create_task(auditor.run(), name="tether-audit")
            try:
                yield auditor
            finally:
                auth.attach(None)
                store.stop()
                auditor.stop()
    finally:
        auth.attach(None)


HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"
# answered to anonymous callers (Kubernetes probes), who learn only the status
PROBES: Final = frozenset({HEALTH_PATH, READY_PATH})


def _health(app: App) -> Callable[[Request], Awaitable[JSONResponse]]:
    """GET /healthz: alive (503 while starting); details only for an authenticated caller."""

    async def health(request: Request) -> JSONResponse:
        rt: Runtime | None = getattr(request.app.state, "runtime", None)
        if rt is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        if request.scope.get(PRINCIPAL_KEY) is ANONYMOUS:
            return JSONResponse({"status": "ok"})  # a probe: nothing about the app
        return JSONResponse(
            {
                "status": "ok",
                "version": __version__,
                "app": app.name,
                "workflows": sorted(app.workflows),
                "workers": [w.owner for w in rt.workers],
                "listening": rt.listener.ready.is_set(),
            }
        )

    return health


def create_app(
    app: App, settings: Settings, dsn: str, *, run_workers: bool = True, tune_gc: bool = False
) -> Starlette:
    """The HTTP application; its lifespan runs the runtime (workers unless run_workers=False).
    `tune_gc`: once started, tune this process's garbage collector (gc_tuning.tune_gc) — for a
    process that serves only this app, as `tether serve` does."""
    auth = authenticator(settings)
    metrics.enabled = settings.metrics
    tracing.configure()

    @contextlib.asynccontextmanager
    async def lifespan(web: Starlette) -> AsyncIterator[None]:
        async with (
            running(
                dsn,
                app,
                worker_settings=settings.worker_settings(),
                workers=1 if run_workers else 0,
                janitor_interval_s=settings.janitor_interval_s,
                pool_size=settings.pool_size,
                max_payload_bytes=settings.max_payload_bytes,
                dags_dir=settings.dags,
                dags_reload_s=settings.dags_reload_s,
                protocols_dir=settings.protocols,
                encryption=settings.encryption(),
                audit_retention_days=settings.audit_retention_days,
                dag_env_passthrough=settings.dag_environment(),
                notify=settings.notify_setup(CONSOLE_PREFIX),
                remotes=settings.remote_configs(),
                approver_roles=settings.roles(),
            ) as rt,
            access_control(rt, auth) as auditor,
            console(settings, rt, auth, auditor) as web_console,
        ):
            with (
                LiveCatalog(app, dagu=dagu_names(settings)).following() as catalog,
                offload.in_use(),  # the document worker stops with the last server using it
            ):
                endpoint = build_endpoint(app, rt, settings, auditor, catalog)
                scrape = Scrape(functools.partial(probes.snapshot, rt))
                published = {"endpoint": endpoint, "scrape": scrape, "runtime": rt}
                published |= {"auditor": auditor, "tokens": auth.store, "console": web_console}
                for name, value in published.items():
                    setattr(web.state, name, value)
                if tune_gc:
                    gc_tuning.tune_gc()
                try:
                    async with exposition.serving(settings.host, settings.metrics_port, scrape):
                        yield
                finally:  # the scrape stays: /metrics answers 503 once runtime is None
                    for name in ("runtime", "endpoint", "auditor", "tokens", "console"):
                        setattr(web.state, name, None)

    mcp = Route(settings.mcp_path, McpRoute())
    routes: list[BaseRoute] = [
        mcp,
        Route(HEALTH_PATH, _health(app)),
        Route(READY_PATH, ready),
        Route(METRICS_PATH, metrics_route),
    ]
    if settings.console_enabled():
        routes.append(console_route())
    shortcut = Middleware(McpShortcut, route=mcp)  # under the security layer, as every route
    return Starlette(
        routes=routes, lifespan=lifespan, middleware=[security(settings, auth), shortcut]
    )


async def ready(request: Request) -> JSONResponse:
    """Readiness: 200 when every check passes, else 503 naming the failing checks (an
    anonymous probe learns only the status)."""
    rt: Runtime | None = getattr(request.app.state, "runtime", None)
    if rt is None:
        return JSONResponse({"status": "starting"}, status_code=503)
    checks = await probes.readiness(rt)
    ok = all(checks.values())
    body: dict[str, Any] = {"status": "ready" if ok else "not ready"}
    if request.scope.get(PRINCIPAL_KEY) is not ANONYMOUS:
        body["checks"] = checks
    return JSONResponse(body, status_code=200 if ok else 503)


async def metrics_route(request: Request) -> Response:
    """The Prometheus exposition (any authenticated principal: reader and up)."""
    scrape: Scrape | None = getattr(request.app.state, "scrape", None)
    if scrape is None or getattr(request.app.state, "runtime", None) is None:
        return JSONResponse({"status": "starting"}, status_code=503)
    return Response(await scrape.render(), media_type=exposition.CONTENT_TYPE)
