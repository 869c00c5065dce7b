"""Observability overhead: `tasks/get` throughput and engine throughput with metrics, and
with tracing sampled at 100 %, against both off — in the same run, A/B/C interleaved.

Modes: `off` (TETHER_METRICS=false, no OTEL_*), `metrics` (the default: metrics on, tracing
off), `tracing` (metrics on, every span sampled — parent-based always-on — and exported by the
SDK's OTLP/HTTP exporter to a local sink this script runs, as a collector next to the server
would receive them; `--exporter console` writes them to the server's log instead, which costs
more: JSON serialisation of every span).

Noise. The machine is shared, so a mode measured a minute after another may see a different
machine. One `tether serve` per mode runs for the whole benchmark (one parked run each), and
each round measures every mode back to back in a rotated order (ABC, BCA, CAB, …) in short
windows; the figure is the median over rounds of each round's ratio to `off` (the paired ratio
cancels slow drift), and the spread of those ratios is printed beside it. Engine:
bench/engine_tether.py's throughput measurement (one worker process runs N three-step runs,
each in a fresh database) with the mode's environment, interleaved the same way.

Two figures per mode. Throughput (requests or runs per second) is what the targets name, but on
a machine other work shares it moves with that work. CPU per request (the server process's
user + system seconds over the window, over the requests it answered; for the engine the
worker's CPU from ready to stop, over the runs) measures what observability adds to each
request, and moves far less with load; both are printed, and each has its verdict.

Targets: metrics ≤ 5 % and tracing ≤ 15 % slower than off.

Usage::

    python bench/observability.py [--rounds 6] [--duration 3] [--concurrency 16] [--runs 600]
        [--exporter otlp|console] [--skip-engine]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import dbos_side  # noqa: E402 — sibling scripts, importable once BENCH is on the path
import engine_tether as et  # noqa: E402
import tasks_get as tg  # noqa: E402

ORDER = ("off", "metrics", "tracing")
TARGETS = {"metrics": 0.95, "tracing": 0.85}  # throughput ratio against `off`, at least
WARMUP_S = 0.5
ATTRS = {"mcp.method.name": "tasks/get", "tether.task_id": "ex_0123456789abcdef01234567"}
RUN_ATTRS = {
    "tether.workflow": "bench",
    "tether.task_id": "ex_0123456789abcdef01234567",
    "tether.attempt": 1,
    "tether.run_attempt": 1,
}


class Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver that keeps nothing: 200 for every POST, bytes counted."""

    received: ClassVar[list[int]] = [0, 0]  # requests, bytes

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(size)
        Sink.received[0] += 1
        Sink.received[1] += size
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        return


@contextlib.contextmanager
def otlp_sink() -> Iterator[str]:
    server = ThreadingHTTPServer((tg.HOST, 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{tg.HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()


def modes(exporter: str, sink: str) -> dict[str, dict[str, str]]:
    tracing = {
        "TETHER_METRICS": "true",
        "OTEL_TRACES_SAMPLER": "parentbased_always_on",
        "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
    }
    if exporter == "console":
        tracing["OTEL_TRACES_EXPORTER"] = "console"
    else:
        tracing["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink
    return {
        "off": {"TETHER_METRICS": "false"},
        "metrics": {"TETHER_METRICS": "true"},
        "tracing": tracing,
    }


def rotated(rnd: int) -> list[str]:
    k = rnd % len(ORDER)
    return [*ORDER[k:], *ORDER[:k]]


async def start_servers(
    env: dict[str, dict[str, str]], dsn: str, logs: Path
) -> dict[str, tuple[tg.Server, str]]:
    """One `tether serve` per mode, each with a parked run to poll."""
    out = {}
    for mode in ORDER:
        port = tg.free_port()
        command = [sys.executable, "-m", "tether", "serve", tg.APP_SPEC, "--port", str(port)]
        server = tg.spawn(f"serve-{mode}", command, {**tg.tether_env(dsn), **env[mode]}, port, logs)
        await tg.wait_listening(server)
        parked, _done = await tg.tether_tasks(server.url)
        out[mode] = (server, parked)
    return out


async def tasks_get_rps(
    mode: str, server: tg.Server, parked: str, pg_pid: int | None, args: Any, logs: Path, rnd: int
) -> tuple[float, float]:
    """(requests per second, server CPU microseconds per request)."""
    target = tg.Target(f"tasks/get {mode}", server, parked, "waiting for signal")
    load = tg.Load(args.duration, WARMUP_S, pg_pid, logs / f"spec-{mode}.json")
    result = await tg.measure(target, args.concurrency, load, tg.Run(phase=mode, round=rnd))
    if result.errors:
        raise RuntimeError(f"{mode}: {result.errors} errors: {result.first_error}")
    return float(result.rps), result.srv_cpu / 100 / max(result.rps, 1e-9) * 1e6


def _cpu(procs: list[Any]) -> float:
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(proc.pid).cpu_times()
            total += times.user + times.system
    return total


async def engine_rps(env: dict[str, str], dsn: str, runs: int) -> tuple[float, float]:
    """(runs per second, worker CPU microseconds per run, from ready to stop): one
    bench/engine_tether.py throughput measurement in a fresh database, with the mode's
    environment."""
    plain_env, plain_ready, plain_stop = et._env, et._wait_ready, et._stop_processes
    cpu: list[float] = []

    def with_mode(db_url: str) -> dict[str, str]:
        return {**plain_env(db_url), **env}

    async def ready(conn: Any, procs: list[Any], logs: list[Path]) -> int:
        polls = await plain_ready(conn, procs, logs)
        cpu.append(_cpu(procs))
        return polls

    async def stop(procs: list[Any]) -> None:
        cpu.append(_cpu(procs))  # the starter has been reaped: only the workers count
        await plain_stop(procs)

    et._env, et._wait_ready, et._stop_processes = with_mode, ready, stop
    name = await dbos_side._create_database(dsn, "tether_obs")
    try:
        result = await et.measure_tether(dbos_side._with_database(dsn, name), runs, 1)
    finally:
        et._env, et._wait_ready, et._stop_processes = plain_env, plain_ready, plain_stop
        await dbos_side._drop_database(dsn, name)
    return float(result["throughput"]), (cpu[-1] - cpu[0]) / runs * 1e6


Rounds = list[dict[str, tuple[float, float]]]  # per round: mode → (rate, CPU µs per item)


def _row(measure: str, mode: str, rounds: Rounds) -> tuple[str, bool]:
    rates = [r[mode][0] for r in rounds]
    speed = [r[mode][0] / r["off"][0] for r in rounds]
    cost = [r[mode][1] / r["off"][1] for r in rounds]
    target = TARGETS.get(mode)
    ok_speed = target is None or statistics.median(speed) >= target
    ok_cost = target is None or statistics.median(cost) <= 1 / target
    verdict = (
        ""
        if target is None
        else f"{'met' if ok_speed else 'missed'} / {'met' if ok_cost else 'missed'}"
    )
    row = (
        f"| {measure} | {mode} | {statistics.median(rates):.0f} | "
        f"{statistics.median(speed):.3f} ({min(speed):.2f} to {max(speed):.2f}) | "
        f"{statistics.median(r[mode][1] for r in rounds):.0f} | "
        f"{statistics.median(cost):.3f} ({min(cost):.2f} to {max(cost):.2f}) | {verdict} |"
    )
    return row, ok_speed and ok_cost


def _request_span() -> None:
    """One request span, as mcp/observe.py makes it (start attributes, current while the
    request is handled, the outcome, end)."""
    from opentelemetry import context, trace

    from tether.observability import tracing

    span = tracing.start("mcp tasks/get", context=tracing.parent(None), attributes=ATTRS)
    assert span is not None
    context.detach(context.attach(trace.set_span_in_context(span)))
    tracing.outcome(span, "ok")
    span.end()


def _run_spans() -> None:
    """The spans of one three-step run, as runtime/observe.py and observability/instrument.py
    make them: the attempt's, current around its three steps'."""
    from tether.observability import instrument, metrics, tracing

    enabled, metrics.enabled = metrics.enabled, False  # the metric calls are measured apart
    try:
        with tracing.span("tether.run bench", attributes=RUN_ATTRS) as span:
            for _ in range(3):
                with instrument.step("bench", "bench_add_one"):
                    pass
            tracing.outcome(span, "completed")
    finally:
        metrics.enabled = enabled


def span_cost(items: int = 20000) -> dict[str, float]:
    """CPU microseconds per request span and per run's spans in this process, with the SDK's
    batch processor and (a) an exporter that drops the batch, (b) one that encodes it with
    the SDK's OTLP encoder (what the server's exporter sends; no HTTP in either). A tight loop
    on one core: far steadier than a loaded server's CPU accounting."""
    import time

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from tether.observability import tracing

    class Encode(SpanExporter):
        def __init__(self, encoder: Any) -> None:
            self.encoder = encoder

        def export(self, batch: Any) -> SpanExportResult:
            self.encoder(batch)
            return SpanExportResult.SUCCESS

    encoders = {
        "sdk alone": lambda batch: None,
        "sdk + SDK's OTLP encoding": lambda b: encode_spans(b).SerializePartialToString(),
    }
    out = {}
    for what, make in (("request span", _request_span), ("run's 4 spans", _run_spans)):
        for label, encoder in encoders.items():
            base = Resource.create({"service.name": "tether"})
            provider = TracerProvider(resource=tracing._resource_type()(base.attributes))
            processor = BatchSpanProcessor(Encode(encoder), max_queue_size=4 * items + 1)
            provider.add_span_processor(processor)
            tracing.enable(provider)
            began = time.process_time()
            for _ in range(items):
                make()
            provider.force_flush()
            out[f"{what}, {label}"] = (time.process_time() - began) / items * 1e6
            tracing.disable()
            provider.shutdown()
    return out


def metrics_cost(items: int = 20000) -> dict[str, float]:
    """CPU microseconds of the metric calls one `tasks/get` and one three-step run make, in a
    tight loop (the recording calls of observability/metrics.py, as the app and worker make
    them)."""
    import time
    from datetime import UTC, datetime

    from tether.observability import metrics

    created = datetime.now(UTC)  # the run's creation (run_ended measures its age)
    began = time.process_time()
    for _ in range(items):
        metrics.request_finished("tasks/get", "", "ok", 0.001)
    per_request = (time.process_time() - began) / items * 1e6
    began = time.process_time()
    for _ in range(items):
        metrics.run_claimed("bench", 1, 0)
        for _step in range(3):
            metrics.step_finished("bench", "completed", 0.001)
        metrics.attempt_finished("bench", "completed", 0.01)
        metrics.run_ended("bench", "completed", created)
    return {"tasks/get": per_request, "engine": (time.process_time() - began) / items * 1e6}


def report(seen: dict[str, Rounds]) -> tuple[list[str], bool]:
    """Markdown rows: per measure and mode, the median rate and its paired ratio to `off`
    (median over rounds, with the rounds' range), the median CPU per item and its paired ratio
    to `off`; and whether every target was met (throughput ratio >= target, CPU ratio <=
    1 / target)."""
    lines = [
        "| measure | mode | median /s | throughput vs off (range) | CPU µs/item | CPU vs off "
        "(range) | target: throughput / CPU |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    ok_all = True
    for measure, rounds in seen.items():
        for mode in ORDER if rounds else ():
            row, ok = _row(measure, mode, rounds)
            lines.append(row)
            ok_all &= ok
    return lines, ok_all


async def main_async(args: argparse.Namespace) -> int:
    with (
        tg.embedded_postgres() as (dsn, pgdata),
        tempfile.TemporaryDirectory() as tmp,
        otlp_sink() as sink,
    ):
        await tg.migrate_db(dsn)
        logs = Path(tmp)
        pg_pid = tg.postmaster_pid(pgdata)
        env = modes(args.exporter, sink)
        servers = await start_servers(env, dsn, logs)
        seen: dict[str, Rounds] = {"tasks/get": [], "engine": []}
        try:
            for rnd in range(args.rounds):
                rates: dict[str, tuple[float, float]] = {}
                for mode in rotated(rnd):
                    server, parked = servers[mode]
                    rates[mode] = await tasks_get_rps(mode, server, parked, pg_pid, args, logs, rnd)
                seen["tasks/get"].append(rates)
                if not args.skip_engine:
                    seen["engine"].append(
                        {m: await engine_rps(env[m], dsn, args.runs) for m in rotated(rnd)}
                    )
                print(
                    f"round {rnd}: {seen['tasks/get'][-1]} {seen['engine'][-1:]}", file=sys.stderr
                )
        finally:
            await tg.stop([s.proc for s, _ in servers.values()])
        lines, ok = report(seen)
        print("\n".join(lines))
        off = statistics.median(r["off"][1] for r in seen["tasks/get"])
        for measure, cost in metrics_cost().items():
            if seen[measure]:
                base = statistics.median(r["off"][1] for r in seen[measure])
                share = f"{cost / base:.1%} of off"
                print(f"\nmetric calls per {measure} item: {cost:.1f} µs CPU = {share}")
        engine_off = statistics.median(r["off"][1] for r in seen["engine"] or [{"off": (0, 0)}])
        for label, cost in span_cost().items():
            base, name = (off, "tasks/get") if label.startswith("request") else (engine_off, "run")
            share = f" = {cost / base:.1%} of a {name} off" if base else ""
            print(f"\n{label}: {cost:.0f} µs CPU{share}")
        if args.exporter == "otlp":
            print(f"\nOTLP sink: {Sink.received[0]} export requests, {Sink.received[1]} bytes")
        return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=600)
    parser.add_argument("--exporter", choices=("otlp", "console"), default="otlp")
    parser.add_argument("--skip-engine", action="store_true")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
