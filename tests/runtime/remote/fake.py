"""A scripted remote for the driver's tests, mounted with respx on the outbound client: it
records every request and answers each method from a script (a list of answers, the last one
repeated); and a run of a workflow driven against it to its end."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import respx

from tests.runtime.conftest import Start
from tether.runtime.operations import Operations
from tether.runtime.registry import App

URL = "http://remote.test/mcp"
TASK = "tk_remote_1"

Answer = dict[str, Any] | httpx.Response | Exception | Callable[[dict[str, Any]], Any]


def task(status: str, **extra: Any) -> dict[str, Any]:
    """A DetailedTask result (`tasks/get`)."""
    return {
        "resultType": "complete",
        "taskId": TASK,
        "status": status,
        "createdAt": "2026-08-01T00:00:00Z",
        "lastUpdatedAt": "2026-08-01T00:00:00Z",
        "ttlMs": None,
        **extra,
    }


CREATED: dict[str, Any] = {**task("working", pollIntervalMs=50), "resultType": "task"}


def completed(value: Any) -> dict[str, Any]:
    result = {"content": [{"type": "text", "text": json.dumps(value)}], "isError": False}
    return task("completed", result={**result, "structuredContent": value})


def rpc_error(code: int, message: str, status: int = 200) -> Callable[[dict[str, Any]], Any]:
    def answer(body: dict[str, Any]) -> httpx.Response:
        error = {"code": code, "message": message}
        return httpx.Response(status, json={"jsonrpc": "2.0", "id": body["id"], "error": error})

    return answer


@dataclass
class FakeRemote:
    """Answers per method (`script[method]`, the last answer repeats; a method not scripted
    is not found, -32601 with HTTP 404, as a server without it answers); `seen` keeps every
    request (method, params, headers)."""

    script: dict[str, list[Answer]]
    seen: list[tuple[str, dict[str, Any], httpx.Headers]] = field(default_factory=list)
    _next: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [params for m, params, _ in self.seen if m == method]

    @contextlib.contextmanager
    def mounted(self, url: str = URL) -> Iterator[None]:
        """This remote answering every POST to `url` for the block (respx: a request to any
        other address raises)."""
        with respx.mock(assert_all_called=False) as mock:
            mock.post(url).mock(side_effect=self)
            yield

    def headers(self, method: str) -> list[httpx.Headers]:
        return [headers for m, _, headers in self.seen if m == method]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        method = body["method"]
        self.seen.append((method, body["params"], request.headers))
        answers = self.script.get(method) or [rpc_error(-32601, f"no {method}", 404)]
        index = min(self._next[method], len(answers) - 1)
        self._next[method] += 1
        answer = answers[index]
        if callable(answer) and not isinstance(answer, type):
            answer = answer(body)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": answer})


async def run_completed(
    start: Start,
    db: asyncpg.Pool,
    app: App,
    fake: FakeRemote,
    workflow: str,
    call: dict[str, Any],
    *,
    url: str = URL,
    timeout: float = 20.0,
) -> Any:
    """The output of a run of `workflow` (input `call`) on a runtime of `app`, with `fake`
    answering at `url`; the test fails unless the run completed."""
    ops = Operations(db, app)
    with fake.mounted(url):
        async with asyncio.timeout(timeout), start(app):
            run = (await ops.start(workflow, call)).execution.id
            view = await ops.wait_for_end(run, timeout=timeout)
    assert view.current.status == "completed", view.current.error
    return view.current.output
