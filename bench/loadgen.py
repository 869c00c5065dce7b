"""An HTTP/1.1 load generator for loopback benchmarks, run as its own process.

``concurrency`` lanes each hold one keep-alive connection and send the same request back to
back for ``warmup + duration`` seconds (closed loop); only requests started inside the
measurement window (after the warm-up) count. With ``--rate R`` (raw client only) the loop is
open instead: requests are due on a fixed schedule, R a second, dealt to the lanes in turn,
and a request's latency runs from when it was due, not from when a lane got round to sending
it. A closed loop records a server that stalls for 400 ms as one slow request (the lane
simply waits); the open loop records every request that fell due during the stall as late,
as a client sending at that rate would see them. Every response must have status 200 and,
when the spec names an ``expect`` string, contain it; anything else is an error.

Two clients:

* ``raw`` (default): asyncio streams writing one prebuilt request and parsing the response
  head by hand (Content-Length or chunked). A few tens of microseconds of CPU per request,
  so it stays well under one core where the servers measured here do not.
* ``httpx``: one ``httpx.AsyncClient`` with a keep-alive pool of ``concurrency``
  connections, to show how much slower a general-purpose client is as a load generator.

Protocol with the caller (``bench/tasks_get.py``): the spec is a JSON file (see ``Spec``);
the process prints ``window-start`` and ``window-end`` lines on stdout when the measurement
window opens and closes (the caller samples CPU and RSS there), then one JSON line with the
result. Only 127.0.0.1 is accepted as a host. Every loop is bounded by the window, and the
whole run by a hard timeout.

Usage::

    python bench/loadgen.py SPEC.json --concurrency 16 --duration 10 [--warmup 1] [--client raw]
        [--rate R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
HARD_TIMEOUT_SLACK_SEC = 30.0
RECONNECT_PAUSE_SEC = 0.05


@dataclass(frozen=True)
class Spec:
    """One request, sent over and over; or, with `lanes`, one (headers, body) per lane
    (lane i sends lanes[i % len(lanes)])."""

    port: int
    path: str
    headers: dict[str, str]
    body: bytes
    expect: bytes | None = None
    host: str = LOOPBACK
    lanes: tuple[tuple[dict[str, str], bytes], ...] = ()

    @classmethod
    def load(cls, path: Path) -> Spec:
        raw = json.loads(path.read_text("utf-8"))
        if raw.get("host", LOOPBACK) != LOOPBACK:
            raise SystemExit("loadgen only sends to 127.0.0.1")
        expect = raw.get("expect")
        return cls(
            port=int(raw["port"]),
            path=raw["path"],
            headers=dict(raw["headers"]),
            body=raw["body"].encode(),
            expect=expect.encode() if expect else None,
            lanes=tuple((dict(h), b.encode()) for h, b in raw.get("lanes", ())),
        )

    def lane(self, index: int) -> Spec:
        """The spec lane `index` sends."""
        if not self.lanes:
            return self
        headers, body = self.lanes[index % len(self.lanes)]
        return dataclasses.replace(self, headers=headers, body=body, lanes=())

    def request_bytes(self) -> bytes:
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"


@dataclass
class Tally:
    """What the lanes observed inside the measurement window."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def error(self, text: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = text[:300]


@dataclass(frozen=True)
class Window:
    opens: float
    closes: float


class BadResponse(Exception):
    """The server answered with something this client does not understand."""


# --------------------------------------------------------------------------------------
# The raw client
# --------------------------------------------------------------------------------------


def _parse_head(head: bytes) -> tuple[int, int | None, bool]:
    """(status, content-length or None, chunked?) of a response head."""
    lines = head.split(b"\r\n")
    status = int(lines[0][9:12])
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
    return status, length, chunked


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers expected: the blank line
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status, length, chunked = _parse_head(head)
    if chunked:
        return status, await _read_chunked(reader)
    if length is None:
        raise BadResponse("response without Content-Length or chunked encoding")
    return status, await reader.readexactly(length)


def _check(spec: Spec, status: int, body: bytes, tally: Tally, counted: bool) -> None:
    if status == 200 and (spec.expect is None or spec.expect in body):
        return
    if counted:
        tally.error(f"status {status}: {body[:200]!r}")


async def _raw_lane(spec: Spec, window: Window, tally: Tally, pace: Pace | None = None) -> None:
    request = spec.request_bytes()
    while time.perf_counter() < window.closes:
        try:
            reader, writer = await asyncio.open_connection(spec.host, spec.port)
        except OSError as exc:
            tally.error(f"connect: {exc}")
            await asyncio.sleep(RECONNECT_PAUSE_SEC)
            continue
        try:
            if pace is None:
                await _raw_requests(spec, request, reader, writer, window, tally)
            else:
                await _paced_requests(spec, request, reader, writer, window, tally, pace)
        except (OSError, asyncio.IncompleteReadError, BadResponse, ValueError) as exc:
            tally.error(f"connection: {exc!r}")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def _raw_requests(
    spec: Spec,
    request: bytes,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    window: Window,
    tally: Tally,
) -> None:
    while (started := time.perf_counter()) < window.closes:
        writer.write(request)
        status, body = await _read_response(reader)
        counted = started >= window.opens
        if counted:
            tally.latencies.append(time.perf_counter() - started)
        _check(spec, status, body, tally, counted)


@dataclass
class Pace:
    """One lane's share of an open-loop schedule: due times `first`, `first + every`, …"""

    first: float
    every: float


async def _paced_requests(
    spec: Spec,
    request: bytes,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    window: Window,
    tally: Tally,
    pace: Pace,
) -> None:
    """Send each request when it falls due (at once when the lane is behind); its latency runs
    from its due time."""
    while (due := pace.first) < window.closes:
        pace.first += pace.every
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        writer.write(request)
        status, body = await _read_response(reader)
        counted = due >= window.opens
        if counted:
            tally.latencies.append(time.perf_counter() - due)
        _check(spec, status, body, tally, counted)


# --------------------------------------------------------------------------------------
# The httpx client
# --------------------------------------------------------------------------------------


async def _httpx_lane(spec: Spec, client: Any, window: Window, tally: Tally) -> None:
    import httpx

    while (started := time.perf_counter()) < window.closes:
        try:
            resp = await client.post(spec.url, content=spec.body, headers=spec.headers)
        except httpx.HTTPError as exc:
            tally.error(f"httpx: {exc!r}")
            await asyncio.sleep(RECONNECT_PAUSE_SEC)
            continue
        counted = started >= window.opens
        if counted:
            tally.latencies.append(time.perf_counter() - started)
        _check(spec, resp.status_code, resp.content, tally, counted)


async def _run_httpx(spec: Spec, concurrency: int, window: Window, tally: Tally) -> None:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:
        await asyncio.gather(
            *(_httpx_lane(spec.lane(i), client, window, tally) for i in range(concurrency))
        )


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (as bench/dbos_side.py)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


async def _announce(window: Window) -> float:
    """Tell the caller when the window opens and closes (it samples CPU and RSS there);
    return this process's CPU seconds inside the window."""
    await asyncio.sleep(max(0.0, window.opens - time.perf_counter()))
    print("window-start", flush=True)
    cpu_start = time.process_time()
    await asyncio.sleep(max(0.0, window.closes - time.perf_counter()))
    cpu = time.process_time() - cpu_start
    print("window-end", flush=True)
    return cpu


async def run(
    spec: Spec,
    concurrency: int,
    duration: float,
    warmup: float,
    client: str,
    rate: float | None = None,
) -> dict[str, Any]:
    now = time.perf_counter()
    window = Window(opens=now + warmup, closes=now + warmup + duration)
    tally = Tally()
    announcer = asyncio.create_task(_announce(window))
    async with asyncio.timeout(warmup + duration + HARD_TIMEOUT_SLACK_SEC):
        if client == "httpx":
            await _run_httpx(spec, concurrency, window, tally)
        else:
            paces: list[Pace | None] = [None] * concurrency
            if rate is not None:  # request k is due at now + k/rate, on lane k % concurrency
                paces = [Pace(now + i / rate, concurrency / rate) for i in range(concurrency)]
            lanes = (_raw_lane(spec.lane(i), window, tally, paces[i]) for i in range(concurrency))
            await asyncio.gather(*lanes)
        cpu = await announcer
    lat = sorted(tally.latencies)
    return {
        "client": client,
        "concurrency": concurrency,
        "rate": rate,
        "seconds": duration,
        "requests": len(lat),
        "rps": len(lat) / duration,
        "p50_ms": percentile(lat, 0.50) * 1000.0,
        "p99_ms": percentile(lat, 0.99) * 1000.0,
        "errors": tally.errors,
        "first_error": tally.first_error,
        "cpu_pct": 100.0 * cpu / duration,
    }


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="JSON request spec")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw")
    parser.add_argument(
        "--rate", type=float, default=None, help="open loop: requests due per second (raw client)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0 or args.warmup < 0:
        raise SystemExit("concurrency must be >= 1, duration > 0, warmup >= 0")
    if args.rate is not None and (args.rate <= 0 or args.client != "raw"):
        raise SystemExit("--rate must be > 0 and goes with the raw client")
    spec = Spec.load(args.spec)
    result = asyncio.run(
        run(spec, args.concurrency, args.duration, args.warmup, args.client, args.rate)
    )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
