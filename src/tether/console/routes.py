"""The console's routes, served under /console by the app (as one ASGI app that answers 503
until the runtime is up, like the MCP route)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from tether.console import actions, links, live, pages
from tether.console.context import HEADERS, PREFIX, STATIC, Console
from tether.console.session import console_key
from tether.runtime.audit import AuditWriter
from tether.runtime.changes import SWEEP_S, ChangeHub
from tether.runtime.links import PATH, link_key
from tether.runtime.operations import Operations
from tether.security.limits import StreamSlots
from tether.security.tokens import Authenticator

_ACTION = "{action:str}"
LINKS = PATH.removeprefix(PREFIX)  # approval links, served without a sign-in


def _router() -> Router:
    steer = f"/runs/{{run_id:str}}/{_ACTION}"
    return Router(
        routes=[
            Route("/", pages.home),
            Route("/sign-in", pages.sign_in_page, methods=["GET"]),
            Route("/sign-in", actions.sign_in, methods=["POST"]),
            Route("/sign-out", actions.sign_out, methods=["POST"]),
            Route("/theme", actions.theme, methods=["POST"]),
            Route("/runs", pages.runs_page),
            Route("/inbox", pages.inbox_page),
            Route("/inbox/events", live.inbox_events),
            Route("/runs/{run_id:str}", pages.run_page),
            Route("/runs/{run_id:str}/dag", pages.dag_page),
            Route("/runs/{run_id:str}/events", live.run_events),
            Route("/runs/{run_id:str}/answer", actions.answer, methods=["POST"]),
            Route(f"{LINKS}/{{token:str}}", links.confirm_page, methods=["GET"]),
            Route(f"{LINKS}/{{token:str}}", links.decide, methods=["POST"]),
            Route(steer, _only_steering(actions.confirm), methods=["GET"]),
            Route(steer, _only_steering(actions.steer), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )


def _only_steering(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        if request.path_params["action"] not in ("cancel", "retry"):
            return PlainTextResponse("not found", status_code=404, headers=HEADERS)
        return await handler(request)

    return endpoint


class ConsoleRoute:
    """The console as one ASGI app under `PREFIX`; 503 until the app has built its `Console`."""

    def __init__(self) -> None:
        self.router = _router()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if getattr(scope["app"].state, "console", None) is None:
            response = PlainTextResponse("the console is starting", status_code=503)
            await response(scope, receive, send)
            return
        await self.router(scope, receive, send)


def console_route() -> Mount:
    return Mount(PREFIX, app=ConsoleRoute())


@contextlib.asynccontextmanager
async def running_console(
    ops: Operations,
    auth: Authenticator,
    state_key: str | None,
    principal_key: str,
    auditor: AuditWriter | None,
    max_streams: int = 32,
) -> AsyncIterator[Console]:
    """The console's parts while the runtime runs: its own change hub on the runtime's
    listener, and its session key from the server secret (TETHER_STATE_KEY; without one, a
    random key: sign-ins then last until the server restarts)."""
    # Without one, the app has already warned once (app._state_key) for every use of the key.
    secret = state_key.encode() if state_key else secrets.token_bytes(32)
    hub = ChangeHub(ops.listener, sweep_s=SWEEP_S)
    try:
        slots = StreamSlots(max_streams)
        key = console_key(secret)
        yield Console(
            ops, hub, auth, key, principal_key, auditor, slots=slots, link_key=link_key(secret)
        )
    finally:
        hub.close()
