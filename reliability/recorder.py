"""The recorder: a loopback HTTP service the plain steps of the workload call (their side effect).

Every `POST` with `{"run", "step", "phase", "pid"}` is one `Call`, numbered in arrival order;
the answer `{"call": id}` becomes the step's recorded result. On arrival, before answering,
the recorder asks the database whether that step already has a completed record
(`steps.done`): a call that arrives when the record is already committed was made by a replay
that should have returned the record instead (or by a worker still executing after its lease
went to another), so the verifier reports it. The answer is delayed by a random 0.2-0.6 s, so
a step stays in flight long enough for the killer to cut it off (see `inflight_pids`).

What is soundly detectable, and what is not (docs/reliability.md says the same):
- a completed step is recorded by the checkpoint of the claim that ran it, fenced by
  (lease_owner, attempt); any later claim increments `attempt` after that commit and loads the
  record before running the body, so a call made by a later claim arrives after the record
  exists: `recorded_before` catches it, with no clock involved;
- calls per step can never exceed the run's claims (`attempt`): one claim runs a step once;
- a call cut off before its record (the process was killed between the call and the
  checkpoint) is a legitimate re-execution: counted, never hidden, never a failure;
- which claim made a call is not known, so a re-execution by an overlapping claim (two
  processes holding the run at once) that lands before the record commits is not separable
  from a legitimate one; the lease phase covers overlapping claims for transaction steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

LOOPBACK = "127.0.0.1"
MAX_BODY = 64 * 1024


@dataclass
class Call:
    id: int
    run: str
    step: str
    phase: str
    pid: int
    received: float  # time.time() at arrival
    recorded_before: bool | None  # a completed record existed on arrival; None: not checked
    answered: bool = False


class Recorder:
    """Start with `await rec.start()`, stop with `await rec.close()`; `url` is its endpoint."""

    def __init__(
        self, db: asyncpg.Pool | None, *, delay_s: tuple[float, float] = (0.2, 0.6)
    ) -> None:
        self.db = db
        self.delay_s = delay_s
        self.calls: list[Call] = []
        self._server: asyncio.Server | None = None
        self._rng = random.Random(7)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/call"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, LOOPBACK, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    def inflight_pids(self) -> set[int]:
        """Processes with a call received and not yet answered: inside a plain step now."""
        return {c.pid for c in self.calls if not c.answered}

    def inflight_runs(self, pid: int) -> set[str]:
        """The runs `pid` is inside a plain step of right now."""
        return {c.run for c in self.calls if not c.answered and c.pid == pid}

    def for_phase(self, phase: str) -> list[Call]:
        return [c for c in self.calls if c.phase == phase]

    async def _recorded(self, run: str, step: str) -> bool | None:
        if self.db is None:
            return None
        try:
            found = await asyncio.wait_for(
                self.db.fetchval(
                    "SELECT count(*) FROM steps WHERE execution_id = $1 AND kind = 'step'"
                    " AND name = $2 AND done",
                    run,
                    step,
                ),
                5.0,
            )
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return None  # the database is down (outage phase): not checked
        return bool(found)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, answer = await self._serve(reader)
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            ValueError,
            KeyError,
            TypeError,
        ) as exc:
            status, answer = 400, {"error": str(exc)}
        payload = orjson.dumps(answer)
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Bad Request'}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        with contextlib.suppress(ConnectionError):
            writer.write(head.encode("ascii") + payload)
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        if not lines[0].startswith("POST "):
            return 400, {"error": "POST only"}
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if not 0 < length <= MAX_BODY:
            return 400, {"error": "bad Content-Length"}
        body = orjson.loads(await reader.readexactly(length))
        run, step, phase, pid = body["run"], body["step"], body["phase"], body["pid"]
        received = time.time()
        recorded = await self._recorded(run, step)
        call = Call(len(self.calls) + 1, run, step, phase, int(pid), received, recorded)
        self.calls.append(call)
        try:
            await asyncio.sleep(self._rng.uniform(*self.delay_s))  # keep the step in flight
        finally:
            call.answered = True
        return 200, {"call": call.id}
