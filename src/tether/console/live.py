"""Live pages: a Server-Sent Events stream per open run page (and one per inbox) fed by the
change hub — LISTEN/NOTIFY on the runtime's one listener connection, no polling. On each
change of a run it follows, the stream renders the page's live parts again and sends them
when they differ from what it sent last; the page's script swaps them in. A comment every
`KEEPALIVE_S` keeps proxies from closing an idle stream; the browser's EventSource reconnects
by itself, and the page says when the connection is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tether.console.context import HEADERS, Console, Visitor, scoped_ops, visitor
from tether.console.pages import console_of, inbox_context, me, run_context
from tether.runtime import errors
from tether.security.limits import caller_key
from tether.security.tokens import ANONYMOUS, DEV

KEEPALIVE_S: Final = 15.0
#: The inbox hears every change of every run: it renders at most this often.
INBOX_SETTLE_S: Final = 0.2
RETRY_MS: Final = 2000


def frame(event: str, html: str) -> bytes:
    """One SSE event whose data is `html` (one `data:` line per line)."""
    lines = "".join(f"data: {line}\n" for line in html.splitlines() or [""])
    return f"event: {event}\n{lines}\n".encode()


async def _stream(
    render: Callable[[], Awaitable[str]], changed: asyncio.Event, settle_s: float = 0.0
) -> AsyncIterator[bytes]:
    """Frames of `render()` each time `changed` is set (and it renders something new);
    `settle_s`: wait this long after a change first, so a burst of changes is one render."""
    yield f"retry: {RETRY_MS}\n: open\n\n".encode()
    last = None
    while True:
        changed.clear()
        html = await render()
        if html != last:
            last = html
            yield frame("update", html)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KEEPALIVE_S):
                await changed.wait()
                await asyncio.sleep(settle_s)
                continue
        yield b": keepalive\n\n"


def _refuse(code: int) -> Response:
    return Response(status_code=code, headers=HEADERS)


def _slot(c: Console, request: Request, v: Visitor) -> Callable[[], None] | None:
    """A stream slot of the caller (None: it holds its cap already); returns its release."""
    p = v.principal or ANONYMOUS
    client = request.client
    key = caller_key(p.name, p is ANONYMOUS or p is DEV, client.host if client else None)
    if not c.slots.acquire(key):
        return None
    return lambda: c.slots.release(key)


async def run_events(request: Request) -> Response:
    """GET /runs/{id}/events: the run page's live parts, on every change of its chain."""
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return _refuse(401)
    ops = scoped_ops(c, v)
    run_id = request.path_params["run_id"]
    try:
        view = await ops.get(run_id)
    except errors.ExecutionNotFound:
        return _refuse(404)
    changed = asyncio.Event()
    watched = {r.id for r in view.chain}

    def wake(_id: str) -> None:
        changed.set()

    async def render() -> str:
        try:
            ctx = await run_context(ops, run_id)
        except errors.ExecutionNotFound:
            return ""
        # the chain grew (a retry, continue-as-new): follow the new run too
        new = {r.id for r in ctx["chain"]} - watched
        if new:
            watched.update(new)
            c.hub.watch(wake, new)
        return _live(c, v, "run_live.html", values={}, problems={}, stale=None, **ctx)

    return _response(
        c,
        request,
        v,
        _stream(render, changed),
        lambda: c.hub.watch(wake, watched),
        lambda: c.hub.leave(wake, watched),
    )


async def inbox_events(request: Request) -> Response:
    """GET /inbox/events: the inbox list, on every change of any run."""
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return _refuse(401)
    ops = scoped_ops(c, v)
    changed = asyncio.Event()

    def wake(_id: str) -> None:
        changed.set()

    async def render() -> str:
        ctx = await inbox_context(ops, me(v))
        return _live(c, v, "inbox_live.html", values={}, problems={}, stale=None, **ctx)

    return _response(
        c,
        request,
        v,
        _stream(render, changed, INBOX_SETTLE_S),
        lambda: c.hub.watch_every(wake),
        lambda: c.hub.leave(wake, ()),
    )


def _live(c: Console, v: Visitor, name: str, **ctx: object) -> str:
    assert c.env is not None  # noqa: S101 — set by Console
    return c.env.get_template(name).render(visitor=v, principal=v.principal, csrf=v.csrf, **ctx)


def _response(
    c: Console,
    request: Request,
    v: Visitor,
    body: AsyncIterator[bytes],
    start: Callable[[], None],
    done: Callable[[], None],
) -> Response:
    """The stream, holding one of the caller's stream slots (429 when it holds them all); it
    watches (`start`) while it is open and stops (`done`) however it ends."""
    release = _slot(c, request, v)
    if release is None:
        return _refuse(429)

    async def guarded() -> AsyncIterator[bytes]:
        try:
            start()
            async for chunk in body:
                yield chunk
        finally:
            done()
            release()

    headers = {**HEADERS, "x-accel-buffering": "no"}
    return StreamingResponse(guarded(), media_type="text/event-stream", headers=headers)
