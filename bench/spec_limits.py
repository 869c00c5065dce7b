"""Caller-supplied documents against everyone else: ``tasks/get`` latency while one client
sends the largest documents, and how fast SIGTERM stops a server that is reading one.

What is measured
----------------
A real ``python -m tether serve`` (bench/spec_limits_app.py, default settings, an embedded
PostgreSQL) holds a parked run. One open-loop client (bench/loadgen.py, its own process:
``POLL_RATE`` polls a second dealt to ``POLL_LANES`` keep-alive connections, each timed from
when it fell due) polls that run's task with ``tasks/get`` for ``--duration`` seconds:

* ``idle``: nothing else happens;
* ``documents``: meanwhile another client (this process, one connection) sends, back to
  back, through ``dagu_execute``: the largest refused document — an inline spec as large as
  the HTTP body limit (``TETHER_MAX_BODY_BYTES``) lets through, refused by
  ``TETHER_SPEC_MAX_BYTES`` — then the largest accepted one: exactly ``TETHER_SPEC_MAX_BYTES``
  of YAML holding ``TETHER_SPEC_MAX_STEPS`` steps, parsed, validated and registered in full
  (its first start parks a run behind an approval; each later start reuses that run's
  ``dagRunId``, so the server refuses it as a conflict only after the whole document was
  read, and no further run loads the server).

With ``--rounds N`` the two windows alternate N times and the ratio is the median of the
rounds' ratios (machine drift cancels out). Then ``stop``: the largest accepted document is
sent with a new ``dagRunId`` and, while the server reads it, the server gets SIGTERM; the
time until its process exits is compared with its grace period (``TETHER_SHUTDOWN_GRACE_S``).

Targets: the ``documents`` p99 of ``tasks/get`` at most 2x the ``idle`` p99 measured in the
same run (the printed ceiling), and the stop within the grace period. Each target row ends in
``ok`` or ``OVER``. The machine is shared and noisy; the figure that counts is the ratio
against the idle window of the same run. ``--parse-on-loop`` injects the fault this guards
against (documents parsed on the event loop, as they were before), which must turn the
latency row OVER (tests/tools/test_spec_limits_bench.py).

Usage::

    python bench/spec_limits.py [--duration 8] [--warmup 1] [--rounds 1] [--parse-on-loop]
                                [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import spec_limits_app as bench_app  # noqa: E402 — beside this file
import tasks_get as tg  # noqa: E402 — the servers' and requests' helpers

import tether  # noqa: E402
from tether.settings import Settings  # noqa: E402

APP_SPEC = f"{BENCH / 'spec_limits_app.py'}:app"
LOADGEN = BENCH / "loadgen.py"
CEILING = 2.0
ACCEPTED_NAME = "bench_largest"
LOADGEN_SLACK_SEC = 60.0
STOP_SLACK_SEC = 20.0  # past the grace period, the bench kills the server
ENVELOPE_BYTES = 1024  # the JSON-RPC request around a spec (name, ids, headers' share)

DEFAULTS = Settings.model_validate({})
SOURCES = str(Path(tether.__file__).resolve().parents[1])  # the server runs this tether


# --------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------


#: The polling client: tasks/get due this often a second, dealt to this many connections (a
#: client polling a few hundred tasks at once; well under what one core serves).
POLL_RATE = 200
POLL_LANES = 4


def largest_accepted(max_bytes: int, max_steps: int) -> str:
    """Exactly `max_bytes` of YAML: `max_steps` steps in a chain behind an approval gate on
    the first, each padded with a description."""
    head = f"name: {ACCEPTED_NAME}\nsteps:\n"
    gate = "    approval: {prompt: go}\n"

    def step(i: int, pad: int) -> str:
        return f"  - name: s{i:05d}\n    run: act\n    description: {'x' * pad}\n"

    bare = len(head) + len(gate) + sum(len(step(i, 0)) for i in range(max_steps))
    spare = max_bytes - bare
    if spare < 0:
        raise ValueError(f"{max_steps} steps do not fit in {max_bytes} bytes")
    pads = [spare // max_steps + (1 if i < spare % max_steps else 0) for i in range(max_steps)]
    parts = [head, step(0, pads[0]), gate] + [step(i, pads[i]) for i in range(1, max_steps)]
    text = "".join(parts)
    assert len(text.encode()) == max_bytes, len(text.encode())
    return text


def largest_refused(max_body_bytes: int) -> str:
    """An inline spec as large as the body limit lets through (refused for its size)."""
    return "name: refused\ndescription: " + "y" * (max_body_bytes - ENVELOPE_BYTES - 30) + "\n"


def start_args(spec: str, name: str, run_id: str) -> dict[str, Any]:
    return {"action": "start", "name": name, "spec": spec, "dagRunId": run_id}


# --------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------


@dataclass
class Sent:
    """What the document client saw: outcomes by kind, and each call's seconds."""

    outcomes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, outcome: str, took: float) -> None:
        key = f"{kind}: {outcome}"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        self.seconds.setdefault(kind, []).append(took)


async def call_execute(client: httpx.AsyncClient, url: str, args: dict[str, Any]) -> str:
    """One dagu_execute call; its outcome: `ok`, or the error code (with the limit named)."""
    result = await tg.post(client, url, "tools/call", {"name": "dagu_execute", "arguments": args},
                           "dagu_execute")  # fmt: skip
    content = result.get("structuredContent") or {}
    if not result.get("isError"):
        return "ok"
    limit = (content.get("details") or {}).get("limit")
    return f"{content.get('code')}" + (f" ({limit})" if limit else "")


async def send_documents(
    url: str, docs: list[tuple[str, str]], run_id: str, until: float, sent: Sent
) -> None:
    """Send `docs` ((kind, spec)) in turn, back to back, until `until` (perf_counter), each
    as a start under `run_id`."""
    async with httpx.AsyncClient(timeout=60.0) as client:
        while time.perf_counter() < until:
            for kind, spec in docs:
                started = time.perf_counter()
                args = start_args(spec, ACCEPTED_NAME, run_id)
                outcome = await call_execute(client, url, args)
                sent.add(kind, outcome, time.perf_counter() - started)


async def loadgen(spec_path: Path, duration: float, warmup: float) -> dict[str, Any]:
    """One window of bench/loadgen.py, open loop (`POLL_RATE` polls a second on `POLL_LANES`
    connections, each timed from when it fell due, so a stall of the server counts for every
    poll it delays, not once); its result line."""
    command = [sys.executable, str(LOADGEN), str(spec_path), f"--concurrency={POLL_LANES}",
               f"--rate={POLL_RATE}", f"--duration={duration}", f"--warmup={warmup}"]  # fmt: skip
    gen = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    assert gen.stdout is not None
    async with asyncio.timeout(warmup + duration + LOADGEN_SLACK_SEC):
        out, _ = await gen.communicate()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    if result["errors"]:
        raise RuntimeError(f"tasks/get failed under load: {result['first_error']}")
    return result


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def server(dsn: str, parse_on_loop: bool, logs: Path) -> AsyncIterator[tg.Server]:
    env = tg.tether_env(dsn)
    env.pop("TETHER_WORKERS", None)  # the shipped default
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SOURCES, env.get("PYTHONPATH")) if p)
    if parse_on_loop:
        env[bench_app.PARSE_ON_LOOP] = "1"
    port = tg.free_port()
    command = [sys.executable, "-m", "tether", "serve", APP_SPEC, "--port", str(port)]
    srv = tg.spawn("tether", command, env, port, logs)
    try:
        await tg.wait_listening(srv)
        yield srv
    finally:
        await tg.stop([srv.proc])


async def stop_while_reading(srv: tg.Server, accepted: str) -> float:
    """Seconds from SIGTERM, sent while the server reads the largest accepted document (a
    new run id: read in full), until its process exited."""
    url = srv.url
    async with httpx.AsyncClient(timeout=60.0) as client:
        pending = asyncio.ensure_future(
            call_execute(client, url, start_args(accepted, ACCEPTED_NAME, secrets.token_hex(4)))
        )
        await asyncio.sleep(0.05)  # the request is on the wire and being read
        sent = time.perf_counter()
        srv.proc.send_signal(signal.SIGTERM)
        limit = DEFAULTS.shutdown_grace_s + STOP_SLACK_SEC
        try:
            await asyncio.to_thread(srv.proc.wait, limit)
        except Exception:  # noqa: BLE001 — still up past the slack: report it as over
            srv.proc.kill()
            return float("inf")
        took = time.perf_counter() - sent
        with contextlib.suppress(Exception):
            await pending  # the connection may close before an answer
    return took


# --------------------------------------------------------------------------------------
# Measuring and reporting
# --------------------------------------------------------------------------------------


async def measure(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    accepted = largest_accepted(DEFAULTS.spec_max_bytes, DEFAULTS.spec_max_steps)
    refused = largest_refused(DEFAULTS.max_body_bytes)
    docs = [("largest refused", refused), ("largest accepted", accepted)]
    docs = [d for d in docs if args.only is None or d[0].endswith(args.only)]
    await tg.migrate_db(dsn)
    logs = Path(tempfile.mkdtemp(prefix="spec-limits-"))
    idle: list[float] = []
    loaded: list[float] = []
    sent = Sent()
    async with server(dsn, args.parse_on_loop, logs) as srv:
        async with httpx.AsyncClient(timeout=60.0) as client:
            task_id = await tg.start_task(client, srv.url, bench_app.PARKED, {"label": "bench"})
            await tg.wait_status(client, srv.url, task_id, "working", "waiting for signal")
            run_id = f"bench-{secrets.token_hex(4)}"  # new in a reused database too
            first = await call_execute(client, srv.url, start_args(accepted, ACCEPTED_NAME, run_id))
            if first != "ok":
                raise RuntimeError(f"the largest accepted document was refused: {first}")
        headers, body = tg.tasks_get(task_id)
        spec_path = logs / "tasks_get.json"
        request = {"port": srv.port, "path": tg.PATH, "headers": headers}
        request.update(body=body.decode(), expect='"working"')
        spec_path.write_text(json.dumps(request))
        for _ in range(args.rounds):
            idle.append((await loadgen(spec_path, args.duration, args.warmup))["p99_ms"])
            until = time.perf_counter() + args.warmup + args.duration
            sender = asyncio.create_task(send_documents(srv.url, docs, run_id, until, sent))
            loaded.append((await loadgen(spec_path, args.duration, args.warmup))["p99_ms"])
            await sender
        stop_s = await stop_while_reading(srv, accepted)
    return {
        "idle_p99_ms": idle,
        "loaded_p99_ms": loaded,
        "sent": sent,
        "stop_s": stop_s,
        "grace_s": DEFAULTS.shutdown_grace_s,
        "accepted_bytes": len(accepted.encode()),
        "refused_bytes": len(refused.encode()),
        "parse_on_loop": args.parse_on_loop,
    }


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def report(m: dict[str, Any]) -> None:
    sent: Sent = m["sent"]
    ratios = [b / a for a, b in zip(m["idle_p99_ms"], m["loaded_p99_ms"], strict=True)]
    ratio = statistics.median(ratios)
    fault = " — FAULT INJECTED: parsed on the event loop" if m["parse_on_loop"] else ""
    steps = DEFAULTS.spec_max_steps
    print(f"documents: largest accepted {m['accepted_bytes']:,} B ({steps} steps), "
          f"largest refused {m['refused_bytes']:,} B{fault}")  # fmt: skip
    for kind, times in sorted(sent.seconds.items()):
        print(f"  {kind}: {len(times)} sent, median {statistics.median(times) * 1000:.1f} ms")
    for key, count in sorted(sent.outcomes.items()):
        print(f"  {key}: {count}")
    print(f"rounds: idle p99 {', '.join(f'{v:.2f}' for v in m['idle_p99_ms'])} ms; "
          f"under documents {', '.join(f'{v:.2f}' for v in m['loaded_p99_ms'])} ms")  # fmt: skip
    print(f"{'target':<34} {'idle':>9} {'measured':>9} {'ratio':>7} {'ceiling':>8}  verdict")
    print(f"{'tasks/get p99 under documents':<34} {statistics.median(m['idle_p99_ms']):>7.2f}ms "
          f"{statistics.median(m['loaded_p99_ms']):>7.2f}ms {ratio:>7.2f} {CEILING:>8.1f}  "
          f"{verdict(ratio <= CEILING)}")  # fmt: skip
    stop, grace = m["stop_s"], m["grace_s"]
    print(f"{'SIGTERM while reading a document':<34} {'':>9} {stop:>8.2f}s {stop / grace:>7.2f} "
          f"{1.0:>8.1f}  {verdict(stop <= grace)}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--parse-on-loop", action="store_true", help="inject the fault")
    parser.add_argument("--only", choices=["refused", "accepted"], help="send one kind only")
    args = parser.parse_args(argv)
    with tg.database(args.dsn) as dsn:
        report(asyncio.run(measure(dsn, args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
