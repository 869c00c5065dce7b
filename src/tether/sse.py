"""Server-Sent Events bodies read as JSON messages, in one home for two layers that may not
import each other: the client's HTTP transport (`tether.client.http`) and the runtime's remote
calls (`tether.runtime.remote.transport`) both read Streamable HTTP answers, where each event's
`data:` lines carry one JSON-RPC message.

What is read: a line ends at LF, CRLF or CR, and an empty line ends an event. The event's
`data:` lines (less the one space that may follow the colon) joined by LF are its message,
decoded as UTF-8 (a bad byte read as U+FFFD). Other fields (`event:`, `id:`, comments) are
skipped, and so is an event whose data is not a JSON object.

A leaf: it imports no other tether package (an import-linter contract holds it to that).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any, Final

import orjson

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_DATA: Final = b"data:"


class EventTooLarge(ValueError):
    """An event, or a line not yet ended, passed the reader's byte limit."""


class Reader:
    """An SSE body read as it arrives: `feed` each chunk, and take the messages of the events
    it completed. With a `limit` (bytes), the data of one event plus the line being read may
    not pass it: `feed` raises EventTooLarge rather than buffer more."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._pending = bytearray()
        self._data: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The messages of the events `chunk` completes.

        Raises:
            EventTooLarge: the event being read passed the limit.
        """
        self._pending += chunk
        out: list[dict[str, Any]] = []
        start = 0
        for end in _LINE_END.finditer(self._pending):
            if end.group() == b"\r" and end.end() == len(self._pending):
                break  # maybe the first half of a CRLF: wait for the next chunk
            self._line(bytes(self._pending[start : end.start()]), out)
            start = end.end()
        del self._pending[:start]
        if self._limit is not None and len(self._pending) + self._size > self._limit:
            raise EventTooLarge(f"a stream event larger than {self._limit} bytes")
        return out

    def close(self) -> list[dict[str, Any]]:
        """The body ended: the message of a last event that no empty line ended, if any."""
        out: list[dict[str, Any]] = []
        if self._pending:
            self._line(bytes(self._pending).removesuffix(b"\r"), out)
            self._pending.clear()
        self._line(b"", out)
        return out

    def _line(self, line: bytes, out: list[dict[str, Any]]) -> None:
        if line.startswith(_DATA):
            part = line[len(_DATA) :].removeprefix(b" ")
            self._size += len(part)
            self._data.append(part)
        elif not line and self._data:
            message = _json(b"\n".join(self._data))
            self._data, self._size = [], 0
            if isinstance(message, dict):
                out.append(message)


def messages(body: bytes) -> list[dict[str, Any]]:
    """The messages of a whole SSE body, in order (its last event may lack the empty line)."""
    reader = Reader()
    return [*reader.feed(body), *reader.close()]


async def stream(
    chunks: AsyncIterable[bytes], *, limit: int | None = None
) -> AsyncGenerator[dict[str, Any], None]:
    """The messages of an SSE body as its events complete (an event the body breaks off in is
    dropped).

    Raises:
        EventTooLarge: one event passed `limit` bytes (see `Reader`).
    """
    reader = Reader(limit)
    async for chunk in chunks:
        for message in reader.feed(chunk):
            yield message


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data.decode("utf-8", errors="replace"))
    except orjson.JSONDecodeError:
        return None
