"""Observability overhead: `tasks/get` throughput and engine throughput with metrics, and
with tracing sampled at 100 %, against both off — in the same run, modes interleaved.

Modes: `off` (TETHER_METRICS=false, no OTEL_*), `metrics` (the default: metrics on, tracing
off), `tracing` (metrics on, and OTEL_TRACES_EXPORTER=console with the parent-based always-on
sampler, so every span is built, batched and serialised — console export is dearer than
OTLP's protobuf, so this overstates the cost of a real collector).

`tasks/get`: one `tether serve` per mode, the load generator of bench/tasks_get.py on a
parked run (bench/loadgen.py, closed loop, keep-alive). Engine: bench/engine.py's Tether
measurement (worker processes run N one-step runs) with the mode's environment.

Targets (issue 18): metrics ≤ 5 % and tracing ≤ 15 % slower than off.

Usage::

    python bench/observability.py [--rounds 2] [--duration 5] [--concurrency 16] [--runs 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import engine  # noqa: E402 — a sibling script, importable once BENCH is on the path
import tasks_get as tg  # noqa: E402

MODES: dict[str, dict[str, str]] = {
    "off": {"TETHER_METRICS": "false"},
    "metrics": {"TETHER_METRICS": "true"},
    "tracing": {
        "TETHER_METRICS": "true",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_TRACES_SAMPLER": "parentbased_always_on",
        "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
    },
}
TARGETS = {"metrics": 0.95, "tracing": 0.85}  # throughput ratio against `off`, at least


def _spawn(mode: str, dsn: str, logs: Path) -> tg.Server:
    port = tg.free_port()
    env = {**tg.tether_env(dsn), **MODES[mode]}
    command = [sys.executable, "-m", "tether", "serve", tg.APP_SPEC, "--port", str(port)]
    return tg.spawn(f"serve-{mode}", command, env, port, logs)


async def tasks_get_rps(mode: str, dsn: str, pg_pid: int | None, args: Any, logs: Path) -> float:
    server = _spawn(mode, dsn, logs)
    try:
        await tg.wait_listening(server)
        parked, _done = await tg.tether_tasks(server.url)
        target = tg.Target(f"tasks/get {mode}", server, parked, "waiting for signal")
        load = tg.Load(args.duration, 1.0, pg_pid, logs / f"spec-{mode}.json")
        result = await tg.measure(target, args.concurrency, load, tg.Run(phase=mode))
        if result.errors:
            raise RuntimeError(f"{mode}: {result.errors} errors: {result.first_error}")
        return float(result.rps)
    finally:
        await tg.stop([server.proc])


async def engine_rps(mode: str, dsn: str, runs: int) -> float:
    plain = engine._worker_env

    def with_mode(db_url: str) -> dict[str, str]:
        return {**plain(db_url), **MODES[mode]}

    engine._worker_env = with_mode
    try:
        result = await engine.run_tether(dsn, runs, 1)
    finally:
        engine._worker_env = plain
    return float(result["throughput"])


async def main_async(args: argparse.Namespace) -> int:
    with tg.embedded_postgres() as (dsn, pgdata), tempfile.TemporaryDirectory() as tmp:
        await tg.migrate_db(dsn)
        logs = Path(tmp)
        pg_pid = tg.postmaster_pid(pgdata)
        seen: dict[str, dict[str, list[float]]] = {"tasks/get": {}, "engine": {}}
        for rnd in range(args.rounds):
            order = list(MODES) if rnd % 2 == 0 else list(reversed(MODES))  # ABC CBA
            for mode in order:
                rps = await tasks_get_rps(mode, dsn, pg_pid, args, logs)
                seen["tasks/get"].setdefault(mode, []).append(rps)
                eng = await engine_rps(mode, dsn, args.runs)
                seen["engine"].setdefault(mode, []).append(eng)
                print(
                    f"round {rnd} {mode}: tasks/get {rps:.0f}/s, engine {eng:.0f} runs/s",
                    file=sys.stderr,
                    flush=True,
                )
        failed = False
        print("| measure | mode | median /s | ratio to off | target |")
        print("| --- | --- | --- | --- | --- |")
        for measure, by_mode in seen.items():
            base = statistics.median(by_mode["off"])
            for mode, values in by_mode.items():
                median = statistics.median(values)
                ratio = median / base
                target = TARGETS.get(mode)
                ok = target is None or ratio >= target
                failed |= not ok
                shown = f"≥ {target:.2f}" if target else ""
                print(
                    f"| {measure} | {mode} | {median:.0f} | {ratio:.3f} | {shown} "
                    f"{'' if ok else '(missed)'} |"
                )
        return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=2000)
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
