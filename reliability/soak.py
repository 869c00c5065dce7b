"""Soak phase: `tasks/get` at 70% of its measured maximum plus a steady start rate, for a
fixed duration, on the same 3 servers + 2 workers (no kills).

Every few seconds the sampler records, for each Tether process, its RSS (psutil) and open file
descriptors (/proc/PID/fd), and the number of Tether connections in pg_stat_activity. After the
warm-up, the means of three windows (first, middle, last) are compared: RSS within 10% from first
to last, no growth in file descriptors or database connections, and no leak. A leak is growth of
more than LEAK_MIB_PER_MIN in *both* halves (first to middle, middle to last): a leak grows all
the time, while a process warming up (allocator arenas, caches filling to their bound) grows in a
step and stops. Checking one span only failed CI on a 0.9 MiB step in a 55 s short soak; the
windows are far enough apart, also in the short soak, that a leak of 1 MiB/min fails.
A window with no samples fails the phase (nothing was compared). Runs started during the soak are
checked like every other run (terminal state, exactly-once effects).
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field

import asyncpg
import psutil  # type: ignore[import-untyped]  # no stubs in the dev dependencies

from reliability.client import Client, Ledger
from reliability.cluster import Cluster, Proc
from reliability.recorder import Recorder
from reliability.report import PhaseReport
from reliability.runs import Driver, Plan, RunResult, make_plans
from reliability.verify import judge

RSS_LIMIT = 0.10
LEAK_MIB_PER_MIN = 0.7  # under a 1 MB/min leak (0.95 MiB/min) with room for window noise
MIN_WINDOW_S = 15.0
SAMPLE_EVERY_S = 2.0
MEASURE_S = 5.0
MEASURE_LANES = 32
START_RATE = 2.0  # runs per second
MAX_IN_FLIGHT = 256


@dataclass
class Samples:
    t: list[float] = field(default_factory=list)
    rss: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    fds: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    conns: list[int] = field(default_factory=list)


async def _sample(cluster: Cluster, db: asyncpg.Pool, out: Samples, t0: float) -> None:
    out.t.append(time.monotonic() - t0)
    for proc in cluster.procs:
        ps = psutil.Process(proc.pid)
        out.rss[proc.label].append(ps.memory_info().rss)
        # Open fds minus the HTTP connections clients hold open to this server right now
        # (their number follows the load generator, not the server).
        clients = (
            sum(1 for c in ps.net_connections("tcp") if c.laddr and c.laddr.port == proc.port)
            if proc.port
            else 0
        )
        out.fds[proc.label].append(len(os.listdir(f"/proc/{proc.pid}/fd")) - clients)
    n: int = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tether'"
    )
    out.conns.append(n)


async def _fixtures(driver: Driver, count: int) -> list[str]:
    plans = [Plan(n, "soakfix", "rel_steps", {"n": n}, "completed") for n in range(count)]
    results = await asyncio.gather(*(driver.run(p) for p in plans))
    return [r.task_id for r in results if r.task_id]


async def measure_max(client: Client, servers: list[Proc], task_ids: list[str]) -> float:
    """Closed loop: MEASURE_LANES lanes of back-to-back tasks/get for MEASURE_S seconds."""
    ok = 0
    end = time.monotonic() + MEASURE_S

    async def lane(i: int) -> None:
        nonlocal ok
        j = i
        while time.monotonic() < end:
            proc = servers[j % len(servers)]
            out = await client.call(proc, "tasks/get", {"taskId": task_ids[j % len(task_ids)]})
            ok += out.kind == "ok"
            j += 1

    t0 = time.monotonic()
    await asyncio.gather(*(lane(i) for i in range(MEASURE_LANES)))
    return ok / (time.monotonic() - t0)


async def _open_loop(
    client: Client,
    servers: list[Proc],
    task_ids: list[str],
    rate: float,
    until: float,
    shed: list[int],
) -> None:
    """tasks/get at `rate` per second whatever the latency (bounded in-flight)."""
    interval = 1.0 / rate
    in_flight: set[asyncio.Task[object]] = set()
    nxt = time.monotonic()
    i = 0
    while nxt < until:
        nxt += interval
        await asyncio.sleep(max(nxt - time.monotonic(), 0.0))  # arrival pacing
        if len(in_flight) >= MAX_IN_FLIGHT:
            shed[0] += 1
            continue
        proc = servers[i % len(servers)]
        task = asyncio.create_task(
            client.call(proc, "tasks/get", {"taskId": task_ids[i % len(task_ids)]})
        )
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        i += 1
    if in_flight:
        await asyncio.gather(*in_flight)


async def _starts(
    driver: Driver, plans: list[Plan], until: float, results: list[RunResult]
) -> list[Plan]:
    """Start one run every 1/START_RATE seconds until `until`; returns the plans started."""
    started: list[Plan] = []
    tasks: list[asyncio.Task[RunResult]] = []
    nxt = time.monotonic()
    for plan in plans:
        if nxt >= until:
            break
        await asyncio.sleep(max(nxt - time.monotonic(), 0.0))  # arrival pacing
        nxt += 1.0 / START_RATE
        started.append(plan)
        tasks.append(asyncio.create_task(driver.run(plan)))
    results.extend(await asyncio.gather(*tasks))
    return started


def _window_mean(ts: list[float], values: list[int], lo: float, hi: float) -> float:
    picked = [v for t, v in zip(ts, values, strict=True) if lo <= t <= hi]
    return statistics.fmean(picked) if picked else float("nan")


async def run_soak(
    cluster: Cluster,
    db: asyncpg.Pool,
    rng: random.Random,
    *,
    duration_s: float,
    warmup_s: float,
    recorder: Recorder,
) -> PhaseReport:
    report = PhaseReport("soak")
    t0 = time.monotonic()
    client = Client(report.ledger)
    driver = Driver(client, cluster.servers, rng, deadline_s=duration_s + 120.0)
    task_ids = await _fixtures(driver, 24)
    measured = await measure_max(client, cluster.servers, task_ids)
    rate = 0.7 * measured
    report.figures["tasks/get max (measured)"] = f"{measured:.0f}/s over {MEASURE_LANES} lanes"
    report.figures["soak load"] = f"{rate:.0f} tasks/get/s + {START_RATE:g} starts/s"
    samples = Samples()
    soak_t0 = time.monotonic()
    until = soak_t0 + duration_s
    shed = [0]
    results: list[RunResult] = []
    plans = make_plans("soak", int(duration_s * START_RATE) + 1, rng)
    get_ledger = Ledger()
    get_client = Client(get_ledger)

    async def sampler() -> None:
        while time.monotonic() < until:
            await _sample(cluster, db, samples, soak_t0)
            await asyncio.sleep(SAMPLE_EVERY_S)  # sampling period

    try:
        _, started, _ = await asyncio.gather(
            _open_loop(get_client, cluster.servers, task_ids, rate, until, shed),
            _starts(driver, plans, until, results),
            sampler(),
        )
    finally:
        await client.aclose()
        await get_client.aclose()
    for kind, n in get_ledger.counts.items():
        report.ledger.counts[kind] += n
    report.ledger.violations += get_ledger.violations
    report.ledger.status_5xx.update(get_ledger.status_5xx)
    report.ledger.max_latency = max(report.ledger.max_latency, get_ledger.max_latency)
    report.bad_503 = report.ledger.unexplained_503 + get_ledger.unexplained_503
    soak_s = time.monotonic() - soak_t0
    achieved = get_ledger.counts["ok"] / soak_s
    report.figures["tasks/get achieved"] = f"{achieved:.0f}/s ok; shed {shed[0]} (in-flight cap)"
    _judge(report, samples, warmup_s, duration_s)
    report.runs = len(started)
    await judge(report, db, started, results, recorder.for_phase("soak"))
    report.seconds = time.monotonic() - t0
    return report


Window = tuple[float, float]


def windows(warmup_s: float, duration_s: float) -> tuple[Window, Window, Window]:
    """The first window right after the warm-up, one in the middle, and the last one at the end."""
    width = max(MIN_WINDOW_S, 0.1 * duration_s)
    mid = (warmup_s + duration_s) / 2
    return (
        (warmup_s, warmup_s + width),
        (mid - width / 2, mid + width / 2),
        (duration_s - width, duration_s),
    )


def _minutes(a: Window, b: Window) -> float:
    return ((b[0] + b[1]) - (a[0] + a[1])) / 2 / 60


def _judge(report: PhaseReport, s: Samples, warmup_s: float, duration_s: float) -> None:
    first, middle, last = windows(warmup_s, duration_s)
    report.figures["samples"] = str(len(s.t))
    for lo, hi in (first, middle, last):
        if not any(lo <= t <= hi for t in s.t):
            report.problems.append(f"no samples in the window {lo:.0f}-{hi:.0f}s: nothing compared")
            return
    drifts: dict[str, float] = {}
    rates: dict[str, tuple[float, float]] = {}
    for label, values in s.rss.items():
        a, m, b = (_window_mean(s.t, values, *w) for w in (first, middle, last))
        drifts[label] = (b - a) / a
        rates[label] = (
            (m - a) / 2**20 / _minutes(first, middle),
            (b - m) / 2**20 / _minutes(middle, last),
        )
    worst = max(drifts, key=lambda k: abs(drifts[k]))
    report.rss_drift = f"{drifts[worst] * 100:+.1f}%"
    report.figures["RSS drift per process"] = ", ".join(
        f"{k} {v * 100:+.1f}% {rates[k][0]:+.2f}/{rates[k][1]:+.2f} MiB/min"
        f" ({s.rss[k][-1] / 2**20:.0f} MiB)"
        for k, v in drifts.items()
    )
    report.figures["windows compared"] = " vs ".join(
        f"{lo:.0f}-{hi:.0f}s" for lo, hi in (first, middle, last)
    )
    if abs(drifts[worst]) > RSS_LIMIT:
        report.problems.append(f"RSS of {worst} drifted {drifts[worst] * 100:+.1f}% (limit 10%)")
    for label, (early, late) in rates.items():
        if min(early, late) > LEAK_MIB_PER_MIN:
            report.problems.append(
                f"RSS of {label} grows {early:.2f} then {late:.2f} MiB/min"
                f" (limit {LEAK_MIB_PER_MIN} MiB/min in both halves)"
            )
    fd_growth = {
        k: _window_mean(s.t, v, *last) - _window_mean(s.t, v, *first) for k, v in s.fds.items()
    }
    report.figures["open fds growth (without client connections)"] = ", ".join(
        f"{k} {v:+.1f}" for k, v in fd_growth.items()
    )
    for k, v in fd_growth.items():
        base = _window_mean(s.t, s.fds[k], *first)
        if v > max(3.0, 0.1 * base):
            report.problems.append(f"open file descriptors of {k} grew by {v:.1f}")
    c0 = _window_mean(s.t, s.conns, *first)
    c1 = _window_mean(s.t, s.conns, *last)
    report.figures["tether connections in pg_stat_activity"] = f"{c0:.1f} -> {c1:.1f}"
    if c1 - c0 > max(2.0, 0.1 * c0):
        report.problems.append(f"database connections grew {c0:.1f} -> {c1:.1f}")
