"""Local receivers for notification tests and benchmarks: an HTTP endpoint (uvicorn on
127.0.0.1, real HTTP) that records each request and answers as a script says, and an SMTP
server (aiosmtpd, in the same event loop) that records each message."""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session
from starlette.requests import Request
from starlette.responses import Response

from tests.e2e.conftest import on_loopback


@dataclass(frozen=True)
class Received:
    """One request as it arrived: headers (lower-case names), raw body, arrival time."""

    headers: dict[str, str]
    body: bytes
    at: float  # time.time()
    status: int  # what the receiver answered

    @property
    def delivery_id(self) -> str:
        return self.headers.get("tether-delivery-id", "")


#: Given the request's index (0-based, over all requests) and the request, the status to answer.
Script = Callable[[int, "Received"], int]


def always(status: int) -> Script:
    return lambda _i, _r: status


@dataclass
class HttpReceiver:
    """Records every POST; answers each with `script`'s status (default 200)."""

    script: Script = field(default_factory=lambda: always(200))
    received: list[Received] = field(default_factory=list)
    on_request: Callable[[Received], None] | None = None
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    url: str = ""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        probe = Received(headers, body, time.time(), 0)
        status = self.script(len(self.received), probe)
        got = Received(headers, body, probe.at, status)
        self.received.append(got)
        if self.on_request is not None:
            self.on_request(got)
        async with self._changed:
            self._changed.notify_all()
        await Response(status_code=status)(scope, receive, send)

    async def wait_for(self, check: Callable[[list[Received]], bool], timeout: float = 10) -> None:
        """Until `check(received)` holds (bounded by `timeout` seconds)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: check(self.received))

    def delivered(self) -> list[Received]:
        return [r for r in self.received if 200 <= r.status < 300]


@contextlib.asynccontextmanager
async def http_receiver(script: Script | None = None) -> AsyncIterator[HttpReceiver]:
    """A receiver on 127.0.0.1 (free port) in this event loop; its `url` is set."""
    receiver = HttpReceiver(script or always(200))
    async with on_loopback(receiver, "/hook", lifespan="off") as url:
        receiver.url = url
        yield receiver


@dataclass
class SmtpReceiver:
    """Records every message an SMTP client hands over."""

    messages: list[tuple[Envelope, EmailMessage]] = field(default_factory=list)
    logins: list[tuple[bytes, bytes]] = field(default_factory=list)
    port: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.messages.append((envelope, message))
        async with self._changed:
            self._changed.notify_all()
        return "250 OK"

    async def wait_for(self, count: int, timeout: float = 10) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.messages) >= count)


@contextlib.asynccontextmanager
async def smtp_receiver() -> AsyncIterator[SmtpReceiver]:
    """An SMTP server on 127.0.0.1 (free port) in this event loop."""
    receiver = SmtpReceiver()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(receiver, hostname="tether-test", loop=loop), "127.0.0.1", 0
    )
    receiver.port = server.sockets[0].getsockname()[1]
    try:
        yield receiver
    finally:
        server.close()
        await server.wait_closed()
