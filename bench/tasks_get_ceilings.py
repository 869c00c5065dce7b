"""The servers of bench/tasks_get.py, each started as its own process with identical uvicorn
settings: one worker process, 127.0.0.1, default loop and HTTP implementation (``auto``), no
access log, log level warning, lifespan on.

Kinds:

* ``fixed``: Starlette answers every POST with a fixed 500-byte JSON body (the request body is
  read, not parsed). The ceiling of the HTTP stack, and of the load generator on it.
* ``select``: Starlette parses the JSON-RPC body with orjson, runs
  ``SELECT * FROM executions WHERE id = $1`` for ``params.taskId`` through an asyncpg pool
  (``tether.storage.pool.create_pool``: the same codecs, pool size and reset behaviour as
  Tether's) and returns orjson of the row. The ceiling of one primary-key read.
* ``tether``: ``tether.app.create_app`` over bench/tasks_get_app.py, settings from the
  environment (TETHER_*): what ``tether serve`` runs, without its access log.
* ``fastmcp``: FastMCP with ``fastmcp_tasks.TasksExtension`` on its in-memory Docket backend
  (``memory://``), two ``task=True`` tools (``sleeper`` stays working, ``quick`` completes),
  Streamable HTTP with plain JSON responses (``json_response=True``, as Tether answers
  ``tasks/get``).

Usage::

    python bench/tasks_get_ceilings.py KIND --port P [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HOST = "127.0.0.1"
PATH = "/mcp"
FIXED_BODY_BYTES = 500
POOL_SIZE = 20  # Tether's default TETHER_POOL_SIZE
APP_SPEC = f"{Path(__file__).resolve().with_name('tasks_get_app.py')}:app"
SELECT_ROW = "SELECT * FROM executions WHERE id = $1"
ASYNCIO_FASTMCP = "fastmcp-asyncio"  # the same FastMCP app on asyncio's loop and h11


def fixed_body() -> bytes:
    """A JSON-RPC result padded to exactly FIXED_BODY_BYTES."""
    head, tail = b'{"jsonrpc":"2.0","id":1,"result":{"pad":"', b'"}}'
    return head + b"x" * (FIXED_BODY_BYTES - len(head) - len(tail)) + tail


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="application/json")


def fixed_app() -> Starlette:
    body = fixed_body()

    async def mcp(request: Request) -> Response:
        await request.body()
        return _json(body)

    return Starlette(routes=[Route(PATH, mcp, methods=["POST"])])


def select_app(dsn: str) -> Starlette:
    from tether.storage import pool

    @contextlib.asynccontextmanager
    async def lifespan(web: Starlette) -> AsyncIterator[None]:
        web.state.pool = await pool.create_pool(dsn, min_size=1, max_size=POOL_SIZE)
        try:
            yield
        finally:
            await web.state.pool.close()

    async def mcp(request: Request) -> Response:
        msg = orjson.loads(await request.body())
        row = await request.app.state.pool.fetchrow(SELECT_ROW, msg["params"]["taskId"])
        if row is None:
            return _json(b'{"error":"not found"}', 404)
        return _json(orjson.dumps(dict(row)))

    return Starlette(routes=[Route(PATH, mcp, methods=["POST"])], lifespan=lifespan)


def tether_app(dsn: str) -> Starlette:
    from tether.app import create_app
    from tether.loader import load_app
    from tether.settings import Settings

    return create_app(load_app(APP_SPEC), Settings.from_env(), dsn, tune_gc=True)


def fastmcp_app() -> Any:
    from fastmcp import FastMCP
    from fastmcp_tasks import TasksExtension

    mcp = FastMCP("tasks-get-bench")
    mcp.add_extension(TasksExtension(url="memory://"))

    @mcp.tool(task=True)
    async def sleeper(seconds: float) -> str:
        """Stay working for `seconds`."""
        await asyncio.sleep(seconds)
        return "done"

    @mcp.tool(task=True)
    async def quick(value: int) -> dict[str, int]:
        """Return the value at once."""
        return {"value": value}

    return mcp.http_app(path=PATH, json_response=True)


def build(kind: str, dsn: str | None) -> Any:
    if kind in ("select", "tether") and not dsn:
        raise SystemExit(f"{kind} needs --dsn")
    if kind == "fixed":
        return fixed_app()
    if kind == "select":
        return select_app(dsn or "")
    if kind == "tether":
        return tether_app(dsn or "")
    return fastmcp_app()


def serve(app: Any, port: int, stack: str = "auto") -> None:
    """The uvicorn settings every server of the benchmark shares. `stack` "asyncio": the
    standard library's event loop and h11 even where uvloop and httptools are installed."""
    import uvicorn

    loop, http = ("asyncio", "h11") if stack == "asyncio" else ("auto", "auto")
    config = uvicorn.Config(
        app,
        host=HOST,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        loop=loop,
        http=http,
    )
    uvicorn.Server(config).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["fixed", "select", "tether", "fastmcp", ASYNCIO_FASTMCP])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dsn")
    args = parser.parse_args(argv)
    stack = "asyncio" if args.kind == ASYNCIO_FASTMCP else "auto"
    serve(build(args.kind, args.dsn), args.port, stack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
