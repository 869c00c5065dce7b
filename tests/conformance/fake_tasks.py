"""The task side of the scripted server: fixture tools, task state, task views, tasks/*.

Time runs fast: `slow_compute` with `seconds=s` ends after `s * SCALE` real seconds. Each
`fault` name breaks one rule; `test_harness_negative.FAULTS` says which check it must fail.
"""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tether.conformance import spec

SCALE = 0.02
TTL_MS = 400  # lifetime of an ended task, counted from its creation
POLL_MS = 1


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None, status: int | None = None):
        super().__init__(message)
        self.code, self.message, self.data, self.status = code, message, data, status


def invalid(message: str) -> RpcError:
    return RpcError(spec.INVALID_PARAMS, message)


def needs_tasks() -> RpcError:
    data: dict[str, Any] = {"requiredCapabilities": {"extensions": {spec.TASKS_EXTENSION: {}}}}
    return RpcError(spec.MISSING_REQUIRED_CLIENT_CAPABILITY, "declare the tasks extension", data)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def text(value: str) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": value}],
        "isError": False,
    }


def form(message: str, props: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": props, "required": list(props)}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


@dataclass
class Task:
    id: str
    tool: str
    args: dict[str, Any]
    caps: dict[str, Any]
    created: float
    status: str = "working"
    updated: float = 0.0
    ends: float | None = None
    ended: float | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    asks: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    original: dict[str, dict[str, Any]] = field(default_factory=dict)
    linger: dict[str, dict[str, Any]] = field(default_factory=dict)
    polls: int = 0


class Tasks:
    def __init__(self, faults: frozenset[str]) -> None:
        self.faults = faults
        self.tasks: dict[str, Task] = {}
        self.by_request: dict[Any, str] = {}
        self._seq = itertools.count(1)

    # --- tools ------------------------------------------------------------------------------------
    def call(
        self,
        name: str,
        args: dict[str, Any],
        caps: dict[str, Any],
        params: dict[str, Any],
        rid: Any,
    ) -> dict[str, Any]:
        f = self.faults
        ext = spec.TASKS_EXTENSION in (caps.get("extensions") or {})
        ext = ext or ("legacy-caps-tasks" in f and "tasks" in caps)
        ext = ext or ("legacy-task-param" in f and "task" in params)
        if name == "greet":
            if "legacy-task-param-sync-error" in f and "task" in params:
                raise invalid("unknown param task")
            out = text(f"Hello, {args.get('name', 'world')}!")
            return {**out, "taskId": "tk-x"} if "greet-has-task-id" in f else out
        if name == "slow_compute":
            seconds = float(args.get("seconds", 1))
            if (ext or "task-without-ext" in f) and seconds >= 1 and "create-sync" not in f:
                return self.create(name, args, caps, rid, ends=time.time() + seconds * SCALE)
            return self.compute_result(args)
        if name in ("failing_job", "protocol_error_job"):
            if not ext:
                if "required-task-sync" in f:
                    return text("ran without a task")
                raise needs_tasks()
            return self.create(name, args, caps, rid, ends=time.time())
        if name in ("confirm_delete", "multi_input"):
            if not ext:
                return text("needs input")
            return self.create(name, args, caps, rid)
        if name == "test_tool_with_task":
            return self.mrtr(params, caps, rid)
        if name == "test_missing_capability":
            if "sampling" in caps:
                return text("sampling declared")
            data: Any = ["sampling"] if "missing-cap-data-array" in f else {"sampling": {}}
            raise RpcError(
                spec.MISSING_REQUIRED_CLIENT_CAPABILITY,
                "needs sampling",
                {"requiredCapabilities": data},
            )
        raise AssertionError(name)

    def compute_result(self, args: dict[str, Any]) -> dict[str, Any]:
        label, seconds = args.get("label", "job"), args.get("seconds", 1)
        return text(f"{label} finished after {seconds}s")

    def mrtr(self, params: dict[str, Any], caps: dict[str, Any], rid: Any) -> dict[str, Any]:
        answer = (params.get("inputResponses") or {}).get("user_name")
        name = (
            ((answer or {}).get("content") or {}).get("name") if isinstance(answer, dict) else None
        )
        if name is None or params.get("requestState") != "s1":
            if "mrtr-task-first" in self.faults:
                return self.create("greet_later", {"name": "?"}, caps, rid, ends=time.time())
            return {
                "resultType": "input_required",
                "inputRequests": {"user_name": form("Name?", {"name": {"type": "string"}})},
                "requestState": "s1",
            }
        created = self.create("greet_later", {"name": name}, caps, rid, ends=time.time())
        return {**created, "requestState": "s1"} if "mrtr-state-leak" in self.faults else created

    # --- creation ---------------------------------------------------------------------------------
    def new_id(self) -> str:
        n = next(self._seq)
        if "ids-sequential" in self.faults:
            return f"task-{n}"
        tid = "tk_" + secrets.token_hex(16)
        return f" {tid}" if "ids-spaces" in self.faults else tid

    def create(
        self,
        tool: str,
        args: dict[str, Any],
        caps: dict[str, Any],
        rid: Any,
        ends: float | None = None,
    ) -> dict[str, Any]:
        now = time.time()
        task = Task(self.new_id(), tool, args, caps, now, updated=now, ends=ends)
        self.tasks[task.id] = task
        self.by_request[rid] = task.id
        if tool == "confirm_delete":
            props = {"confirm": {"type": "boolean"}}
            task.asks[f"{task.id}:confirm:1"] = form(f"Delete {args.get('filename')}?", props)
            if "url-mode" in self.faults:
                task.asks[f"{task.id}:confirm:1"]["params"]["mode"] = "url"
        if tool == "multi_input":
            for key in ("first", "second"):
                task.asks[f"{task.id}:{key}"] = form(f"{key} value?", {"name": {"type": "string"}})
        task.original = dict(task.asks)
        out = self.shape(task, create=True)
        f = self.faults
        out["resultType"] = "task"
        if "create-nested" in f:
            out["task"] = {"taskId": task.id}
        if "create-status-bad" in f:
            out["status"] = "running"
        if "create-timestamps-bad" in f:
            out["createdAt"] = "yesterday"
        if "create-no-ttl" in f:
            del out["ttlMs"]
        if "create-poll-zero" in f:
            out["pollIntervalMs"] = 0
        if "create-legacy-keys" in f:
            out.update(ttl=60000, pollInterval=1000)
        if "create-has-result" in f:
            out["result"] = {}
        if "create-not-durable" in f:
            task.polls = -1  # the first tasks/get does not find it
        return out

    # --- state ------------------------------------------------------------------------------------
    def end(
        self,
        task: Task,
        status: str,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        now = time.time()
        task.status, task.result, task.error, task.ended = status, result, error, now
        task.updated = task.updated if "timestamps-frozen" in self.faults else now

    def advance(self, task: Task) -> None:
        if task.status != "working" or task.ends is None or time.time() < task.ends:
            return
        if task.tool == "slow_compute":
            self.end(task, "completed", self.compute_result(task.args))
        elif task.tool == "failing_job":
            if "tool-error-failed" in self.faults:
                self.end(task, "failed", error={"code": -32603, "message": "boom"})
            else:
                self.end(task, "completed", {**text("the job failed"), "isError": True})
        elif task.tool == "protocol_error_job":
            error = (
                None
                if "failed-no-error" in self.faults
                else {"code": -32603, "message": "Internal error: boom"}
            )
            self.end(task, "failed", error=error)
        elif task.tool == "greet_later":
            self.end(task, "completed", text(f"Hello, {task.args.get('name')}! (from a task)"))

    def find(self, tid: Any, *, reading: bool = False) -> Task:
        task = self.tasks.get(tid) if isinstance(tid, str) else None
        if task is None:
            raise invalid("Task not found")
        if task.ended and time.time() > task.created + TTL_MS / 1000:
            if "ttl-gone-wrong-code" in self.faults:
                raise RpcError(spec.INTERNAL_ERROR, "expired")
            raise invalid("Task has expired")
        if "forget-ended-fast" in self.faults and task.ended:
            task.polls += 1
            if task.polls > 5:  # gone right after the harness's stability polls
                raise invalid("Task not found")
        if reading and task.polls < 0:
            task.polls = 0
            raise invalid("Task not found")
        return task

    # --- views ------------------------------------------------------------------------------------
    def shape(
        self, task: Task, *, create: bool = False, caps: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        f = self.faults
        out: dict[str, Any] = {
            "resultType": "complete",
            "taskId": task.id,
            "status": task.status,
            "createdAt": iso(task.created),
            "lastUpdatedAt": iso(task.updated),
            "ttlMs": TTL_MS if task.ended else None,
            "pollIntervalMs": POLL_MS,
        }
        if create:
            return out
        if task.status == "working" and task.asks:
            may_elicit = "elicitation" in (caps or {}) and "elicitation" in task.caps
            if may_elicit or "elicit-without-cap" in f:
                out["status"] = "input_required"
                out["inputRequests"] = dict(
                    task.original if "partial-needs-all" in f else task.asks
                )
                if "input-unstable" in f:
                    task.polls += 1
                    out["inputRequests"] = {
                        k: {**v, "params": {**v["params"], "message": f"poll {task.polls}"}}
                        for k, v in task.asks.items()
                    }
                if "input-no-requests" in f:
                    del out["inputRequests"]
        if task.linger:
            out["status"], out["inputRequests"] = "input_required", dict(task.linger)
            task.linger = {}
        if task.status == "working":
            if "working-has-result" in f:
                out["result"] = {}
            if "working-wrong-status" in f:
                out["status"] = "running"
        if task.result is not None:
            result = dict(task.result)
            if "completed-no-content" in f:
                result["content"] = []
            if "completed-differs" in f and task.tool == "slow_compute":
                result["content"] = [{"type": "text", "text": "something else"}]
            if "related-task-meta" in f:
                result["_meta"] = {spec.META_RELATED_TASK: {"taskId": task.id}}
            if "terminal-flaps" in f:
                task.polls += 1
                result["content"] = [{"type": "text", "text": f"poll {task.polls}"}]
            out["result"] = result
        if task.error is not None:
            out["error"] = task.error
        if task.status == "failed" and "failed-no-message" not in f:
            out["statusMessage"] = "the job failed"
        if "cancel-flaps" in f and task.status == "cancelled":
            task.polls += 1
            out["status"] = "cancelled" if task.polls == 1 else "working"
        if "get-type-task" in f:
            out["resultType"] = "task"
        if "working-no-ttl" in f:
            del out["ttlMs"]
        return out

    # --- tasks/* ----------------------------------------------------------------------------------
    def get(self, params: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
        f = self.faults
        if "taskId" not in params:
            if "get-missing-id-ok" in f:
                return {"resultType": "complete"}
            raise invalid("taskId is required")
        tid = params["taskId"]
        if tid not in self.tasks:
            if "get-unknown-result" in f:
                now = iso(time.time())
                return {
                    "resultType": "complete",
                    "taskId": tid,
                    "status": "working",
                    "createdAt": now,
                    "lastUpdatedAt": now,
                    "ttlMs": None,
                }
            if "unknown-task-400" in f:
                raise RpcError(spec.INVALID_PARAMS, "Task not found", status=400)
        task = self.find(tid, reading=True)
        self.advance(task)
        return self.shape(task, caps=caps)

    def update(self, params: dict[str, Any]) -> dict[str, Any]:
        f = self.faults
        tid = params.get("taskId")
        if "inputResponses" not in params and "update-requires-nothing" not in f:
            raise invalid("inputResponses is required")
        if tid not in self.tasks and "update-unknown-ack" in f:
            return {"resultType": "complete"}
        task = self.find(tid)
        self.advance(task)
        responses = params.get("inputResponses") or {}
        if not isinstance(responses, dict):
            raise invalid("inputResponses must be an object")
        if not responses and "empty-responses-error" in f:
            raise invalid("nothing to update")
        if responses and task.status == "working" and not task.asks and "update-working-error" in f:
            raise invalid("the task is not waiting")
        for key, answer in responses.items():
            self.answer(task, key, answer)
        ack: dict[str, Any] = {"resultType": "done" if "update-ack-type" in f else "complete"}
        if "update-ack-fields" in f:
            ack.update(taskId=task.id, status=task.status)
        return ack

    def answer(self, task: Task, key: str, answer: Any) -> None:
        f = self.faults
        if key not in task.asks:
            if "unknown-key-clears" in f and task.asks:
                task.asks.clear()
            if "resend-changes" in f and key in task.answers and task.result is not None:
                task.result = text("changed again")
            return
        refused = not isinstance(answer, dict) or answer.get("action") != "accept"
        if refused and "decline-accepted" not in f:
            raise invalid("decline and cancel are refused: cancel the task instead")
        task.answers[key] = answer
        request = task.asks.pop(key)
        if "answered-key-stays" in f:
            task.linger = {key: request}
        if "key-reused" in f and task.asks:
            other, pending = next(iter(task.asks.items()))
            del task.asks[other]
            task.asks[key] = pending
            task.original = {key: pending}
        if task.asks:
            return
        if task.tool == "confirm_delete":
            content = answer.get("content") or {}
            name = task.args.get("filename")
            self.end(
                task,
                "completed",
                text(f"Deleted {name}" if content.get("confirm") else f"Kept {name}"),
            )
        else:
            names = [((a.get("content") or {}).get("name")) for a in task.answers.values()]
            if "answers-dropped" in f:
                names = ["?", "?"]
            self.end(task, "completed", text(f"first={names[0]}, second={names[-1]}"))

    def cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        f = self.faults
        tid = params.get("taskId")
        ack: dict[str, Any] = {"resultType": "complete"}
        if tid not in self.tasks and "cancel-unknown-ack" in f:
            return ack
        task = self.find(tid)
        self.advance(task)
        if task.status in spec.TERMINAL:
            if "cancel-completed-error" in f:
                raise invalid("the task has ended")
            return ack
        if "cancel-never-ends" not in f:
            self.end(task, "cancelled")
        if "cancel-ack-fields" in f:
            ack.update(taskId=task.id, status=task.status)
        return ack
