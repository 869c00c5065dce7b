"""Composition root: the Starlette app, its lifespan (runtime up and down), and routes.

Until the MCP endpoint lands, the HTTP surface is health and readiness only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tether import __version__
from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings
from tether.settings import Settings


def create_app(app: App, settings: Settings, dsn: str, *, run_workers: bool = True) -> Starlette:
    """The HTTP application; its lifespan runs the runtime (workers unless run_workers=False)."""

    @contextlib.asynccontextmanager
    async def lifespan(web: Starlette) -> AsyncIterator[None]:
        worker_settings = WorkerSettings(
            concurrency=settings.workers,
            lease_s=settings.lease_s,
            poll_s=settings.poll_s,
            shutdown_grace_s=settings.shutdown_grace_s,
        )
        async with running(
            dsn,
            app,
            worker_settings=worker_settings,
            workers=1 if run_workers else 0,
            janitor_interval_s=settings.janitor_interval_s,
            pool_size=settings.pool_size,
            max_payload_bytes=settings.max_payload_bytes,
        ) as rt:
            web.state.runtime = rt
            yield
            web.state.runtime = None

    async def health(request: Request) -> JSONResponse:
        rt: Runtime | None = getattr(request.app.state, "runtime", None)
        if rt is None:
            return JSONResponse({"status": "starting"}, status_code=503)
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

    return Starlette(routes=[Route("/healthz", health)], lifespan=lifespan)
