"""A minimal MCP Tasks remote for bench/remote.py, in a process of its own: every `tools/call`
creates a task that is `working` for HOLD seconds, then `completed` (HOLD 0: completed at the
first poll); it asks for POLL_MS between polls and counts the polls of each task
(`bench/stats`, a method of its own, reads the counts).

    python bench/remote_fake.py PORT HOLD POLL_MS
"""

from __future__ import annotations

import itertools
import sys
import time
from collections import Counter
from typing import Any

import orjson
import uvicorn

HOLD_S = 0.0
POLL_MS = 5000
_created: dict[str, float] = {}
_polls: Counter[str] = Counter()
_ids = itertools.count(1)


def _task(task_id: str, status: str) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "status": status,
        "createdAt": "2026-08-01T00:00:00Z",
        "lastUpdatedAt": "2026-08-01T00:00:00Z",
        "ttlMs": None,
        "pollIntervalMs": POLL_MS,
    }


SERVED = frozenset({"tools/call", "tasks/get", "tasks/cancel", "bench/stats"})


def _answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "tools/call":
        task_id = f"task-{next(_ids)}"
        _created[task_id] = time.monotonic()
        return {"resultType": "task", **_task(task_id, "working")}
    if method == "tasks/get":
        task_id = params["taskId"]
        _polls[task_id] += 1
        if time.monotonic() - _created[task_id] < HOLD_S:
            return {"resultType": "complete", **_task(task_id, "working")}
        result = {"content": [{"type": "text", "text": "done"}], "isError": False}
        return {"resultType": "complete", **_task(task_id, "completed"), "result": result}
    if method == "tasks/cancel":
        return {"resultType": "complete"}
    if method == "bench/stats":
        return {"resultType": "complete", "tasks": len(_created), "polls": dict(_polls)}
    raise KeyError(method)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = orjson.loads(body)
    status = 200
    if request["method"] in SERVED:
        answer = {"result": _answer(request["method"], request.get("params") or {})}
    else:  # as a server without the method answers (tools/list, subscriptions/listen)
        status, answer = 404, {"error": {"code": -32601, "message": "Method not found"}}
    payload = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], **answer})
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


if __name__ == "__main__":
    port, HOLD_S, POLL_MS = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
