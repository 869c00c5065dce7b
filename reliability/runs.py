"""Runs driven through the MCP endpoint from start to end, the way an agent would.

Each planned run is started as a task (`tools/call start_<wf>` with the Tasks extension and an
`Idempotency-Key`, retried on another server when a process is down), polled with `tasks/get`
(every answer judged by the ledger), answered with `tasks/update` when it asks for input, and
cancelled with `tasks/cancel` when the plan says so. Every loop is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from reliability.client import Client, Outcome, task_problem
from reliability.cluster import Proc

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class Plan:
    n: int
    phase: str
    workflow: str
    body: dict[str, Any]
    expect: str  # the task status it must end in: completed | cancelled
    answer: bool = False
    cancel: bool = False

    @property
    def input(self) -> dict[str, Any]:
        """The run's input: the body, marked with the phase and plan number (the verifier
        finds every run of a phase by these, whatever its idempotency key)."""
        return {**self.body, "n": self.n, "phase": self.phase}

    @property
    def key(self) -> str:
        return f"rel-{self.phase}-{self.n}"

    @property
    def ticket(self) -> str:
        return f"T-{self.phase}-{self.n}"


@dataclass
class RunResult:
    plan: Plan
    task_id: str | None = None
    final: dict[str, Any] | None = None
    answers_sent: int = 0
    cancels_sent: int = 0
    polls: int = 0
    problems: list[str] = field(default_factory=list)


MIX: tuple[tuple[str, float], ...] = (
    ("steps", 0.35),
    ("timer", 0.20),
    ("approval", 0.25),
    ("cancel_approval", 0.10),
    ("cancel_sleep", 0.10),
)


def make_plans(phase: str, count: int, rng: random.Random) -> list[Plan]:
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    plans: list[Plan] = []
    for n in range(count):
        kind = rng.choices(kinds, weights)[0]
        if kind == "steps":
            plans.append(Plan(n, phase, "rel_steps", {"n": n}, "completed"))
        elif kind == "timer":
            sleep_s = round(rng.uniform(0.5, 3.0), 2)
            plans.append(Plan(n, phase, "rel_timer", {"n": n, "sleep_s": sleep_s}, "completed"))
        elif kind == "approval":
            plans.append(Plan(n, phase, "rel_approval", {"n": n}, "completed", answer=True))
        else:
            mode = "approval" if kind == "cancel_approval" else "sleep"
            body = {"n": n, "mode": mode}
            plans.append(Plan(n, phase, "rel_cancel", body, "cancelled", cancel=True))
    return plans


class Driver:
    """Drives plans against a set of servers; any server may be picked for any request."""

    def __init__(
        self,
        client: Client,
        servers: list[Proc],
        rng: random.Random,
        *,
        poll_s: float = 0.4,
        deadline_s: float = 300.0,
    ) -> None:
        self.client = client
        self.servers = servers
        self.rng = rng
        self.poll_s = poll_s
        self.deadline_s = deadline_s
        self.created = 0

    def pick(self) -> Proc:
        return self.rng.choice(self.servers)

    async def _pause(self, base: float) -> None:
        await asyncio.sleep(base * self.rng.uniform(0.5, 1.5))  # pacing between polls

    async def create(self, plan: Plan, res: RunResult, until: float) -> str | None:
        params = {"name": f"start_{plan.workflow}", "arguments": {"body": plan.input}}
        while time.monotonic() < until:
            out = await self.client.call(
                self.pick(), "tools/call", params, extra_headers={"Idempotency-Key": plan.key}
            )
            result = out.result
            if result is not None and isinstance(result.get("taskId"), str):
                if result.get("resultType") != "task":
                    res.problems.append(f"create returned resultType {result.get('resultType')}")
                self.created += 1
                return str(result["taskId"])
            if out.kind in ("rpc_error", "ok"):
                res.problems.append(f"create refused: {str(out.body)[:300]}")
                return None
            await self._pause(0.2)
        res.problems.append("create did not succeed before the deadline")
        return None

    async def run(self, plan: Plan) -> RunResult:
        res = RunResult(plan)
        until = time.monotonic() + self.deadline_s
        task_id = await self.create(plan, res, until)
        if task_id is None:
            return res
        res.task_id = task_id
        answered_key: str | None = None
        cancel_after: int | None = None
        while time.monotonic() < until:
            out = await self.client.call(self.pick(), "tasks/get", {"taskId": task_id})
            res.polls += 1
            task = out.result
            if out.kind == "ok":
                problem = task_problem(task_id, task)
                if problem:
                    res.problems.append(f"tasks/get: {problem}")
                elif task is not None:
                    if task["status"] in TERMINAL:
                        res.final = task
                        return res
                    answered_key = await self._steer(plan, res, task, answered_key)
                    cancel_after = await self._cancel(plan, res, task, cancel_after)
            elif out.kind == "rpc_error":
                res.problems.append(f"tasks/get error: {str(out.body)[:300]}")
            await self._pause(self.poll_s)
        res.problems.append(f"not terminal before the deadline ({res.polls} polls)")
        return res

    async def _steer(
        self, plan: Plan, res: RunResult, task: dict[str, Any], answered: str | None
    ) -> str | None:
        """Answer the open approval. Re-sent when the same key is still open on a later poll
        (the first answer may have died with a killed server): an identical repeat is a no-op."""
        if not plan.answer or task["status"] != "input_required":
            return answered
        keys = list(task.get("inputRequests", {}))
        if not keys:
            return answered
        key = str(keys[0])
        content = {"decision": "approve", "ticket": plan.ticket}
        params = {
            "taskId": res.task_id,
            "inputResponses": {key: {"action": "accept", "content": content}},
        }
        out = await self.client.call(self.pick(), "tasks/update", params)
        res.answers_sent += 1
        self._expect_ack(res, out, "tasks/update")
        return key

    async def _cancel(
        self, plan: Plan, res: RunResult, task: dict[str, Any], sent_at: int | None
    ) -> int | None:
        """Cancel once the run is parked (its first effect is then committed); cancel again
        if it is still live a few polls later (the first may have been dropped)."""
        if not plan.cancel:
            return sent_at
        parked = task["status"] == "input_required" or task.get("statusMessage") == "waiting"
        if not parked or (sent_at is not None and res.polls - sent_at < 5):
            return sent_at
        out = await self.client.call(self.pick(), "tasks/cancel", {"taskId": res.task_id})
        res.cancels_sent += 1
        self._expect_ack(res, out, "tasks/cancel")
        return res.polls

    @staticmethod
    def _expect_ack(res: RunResult, out: Outcome, method: str) -> None:
        if out.kind == "rpc_error":
            res.problems.append(f"{method} refused: {str(out.body)[:300]}")


async def drive(
    driver: Driver, plans: list[Plan], concurrency: int, *, spread_s: float = 0.0
) -> list[RunResult]:
    """Run every plan, at most `concurrency` at a time; the starts are spread evenly over
    `spread_s` seconds (a steady arrival rate)."""
    gate = asyncio.Semaphore(concurrency)
    t0 = time.monotonic()
    step = spread_s / max(len(plans), 1)

    async def one(plan: Plan) -> RunResult:
        await asyncio.sleep(max(t0 + plan.n * step - time.monotonic(), 0.0))  # arrival pacing
        async with gate:
            return await driver.run(plan)

    return list(await asyncio.gather(*(one(p) for p in plans)))
