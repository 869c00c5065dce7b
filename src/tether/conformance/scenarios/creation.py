"""Task creation: the `CreateTaskResult` shape and task ids (CHECKLIST G, items 69, 80-87,
89, 90)."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

from tether.conformance import spec
from tether.conformance.context import LONG_S, Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe, is_int, timestamp

CHECKS = (
    "create:task-result",
    "create:task-id",
    "create:status",
    "create:timestamps",
    "create:ttl",
    "create:poll-interval",
    "create:no-legacy-keys",
    "create:no-result-fields",
    "create:ids-distinct",
    "create:id-header-safe",
)
SHAPE_CHECKS = CHECKS[1:8]
ID_CHECKS = CHECKS[8:]
CONCURRENCY = 8


def shape_problems(r: dict[str, Any]) -> dict[str, list[str]]:
    """check id → problems, for one CreateTaskResult."""
    out: dict[str, list[str]] = {c: [] for c in SHAPE_CHECKS}
    tid = r.get("taskId")
    if not isinstance(tid, str) or not tid:
        out["create:task-id"].append(f"taskId is {tid!r}")
    if "task" in r:
        out["create:task-id"].append("a nested task object (legacy shape)")
    if r.get("status") not in spec.TASK_STATUSES:
        out["create:status"].append(f"status is {r.get('status')!r}")
    for key in ("createdAt", "lastUpdatedAt"):
        if timestamp(r.get(key)) is None:
            out["create:timestamps"].append(f"{key} is {r.get(key)!r}")
    if "ttlMs" not in r:
        out["create:ttl"].append("no ttlMs key")
    elif r["ttlMs"] is not None and (not is_int(r["ttlMs"]) or r["ttlMs"] <= 0):
        out["create:ttl"].append(f"ttlMs is {r['ttlMs']!r}")
    if "pollIntervalMs" in r and (not is_int(r["pollIntervalMs"]) or r["pollIntervalMs"] <= 0):
        out["create:poll-interval"].append(f"pollIntervalMs is {r['pollIntervalMs']!r}")
    out["create:no-legacy-keys"] += [f"legacy key {k!r}" for k in ("ttl", "pollInterval") if k in r]
    out["create:no-result-fields"] += [
        f"a {k!r} key" for k in ("result", "error", "inputRequests", "requestState") if k in r
    ]
    return out


async def run(ctx: Context) -> None:
    slow = await ctx.need("slow_compute", CHECKS)
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=LONG_S)
    r = created.result
    if r is None or r.get("resultType") != "task":
        ctx.violated(
            "create:task-result",
            f"expected resultType task, got {describe(created.exchange)}",
            created.exchange,
        )
        ctx.skip_all(CHECKS, "precondition: no CreateTaskResult")
        return
    ctx.passed("create:task-result", "resultType task", created.exchange)
    for check, problems in shape_problems(r).items():
        ctx.verdict(check, problems, "as the spec says", created.exchange)
    await _many(ctx, slow)


def _predictable(ids: list[str]) -> str | None:
    """Why a set of ids looks sequential or low-entropy, or None."""
    prefix = _common_prefix(ids)
    tails = [tid[len(prefix) :] for tid in ids]
    if all(t.isdigit() for t in tails):
        return "the ids are a common prefix plus a number"
    counts = Counter("".join(tails))
    total = sum(counts.values())
    entropy = -sum(n / total * math.log2(n / total) for n in counts.values()) if total else 0.0
    bits = entropy * min(len(t) for t in tails)
    if bits < 64:
        return f"about {bits:.0f} bits of entropy per id (want >= 64)"
    return None


def _common_prefix(ids: list[str]) -> str:
    first, last = min(ids), max(ids)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


async def _many(ctx: Context, slow: str) -> None:
    count = ctx.options.creations
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(n: int) -> str | None:
        async with gate:
            created = await ctx.call_tool(
                slow, "slow_compute", track=False, seconds=1, label=f"many-{n}"
            )
            return created.task_id

    ids = await asyncio.gather(*(one(n) for n in range(count)))
    got = [i for i in ids if i is not None]
    if len(got) < count:
        ctx.skip_all(
            ID_CHECKS, f"precondition: only {len(got)} of {count} creations returned a task"
        )
        return
    problems = [] if len(set(got)) == count else [f"{count - len(set(got))} duplicate taskIds"]
    why = _predictable(got)
    if why:
        problems.append(why)
    ctx.verdict(
        "create:ids-distinct", problems, f"{count} distinct, unpredictable ids", sample=got[:5]
    )
    bad = [t for t in got if t != t.strip() or not all(0x21 <= ord(ch) < 0x7F for ch in t)]
    ctx.verdict(
        "create:id-header-safe",
        [f"not header-safe: {bad[:3]!r}"] if bad else [],
        "plain printable ASCII",
        sample=got[:5],
    )


SCENARIO = FunctionScenario("creation", "task creation", CHECKS, run)
