"""The SSE body reader the client and the remote calls share: events split across chunks
at any byte, every line ending SSE allows, other fields skipped, and a byte limit."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tether import sse

BODY = (
    b'event: message\r\nid: 1\r\ndata: {"method": "a",\r\ndata:  "params": {}}\r\n\r\n'
    b": a comment\n\ndata: not json\n\ndata: [1]\n\n"
    b'data:{"id": 2}\r\rdata: {"id": 3, "text": "caf\xc3\xa9"}\n\n'
)
WANT = [{"method": "a", "params": {}}, {"id": 2}, {"id": 3, "text": "café"}]


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_a_whole_body_reads_to_its_json_object_messages_in_order() -> None:
    """SSE (https://html.spec.whatwg.org/multipage/server-sent-events.html): CRLF, CR and LF
    end lines, data lines join with LF; our choice: what is not a JSON object is skipped."""
    assert sse.messages(BODY) == WANT


def test_a_whole_body_keeps_a_last_event_without_its_empty_line() -> None:
    """Our choice: a complete answer whose last blank line is missing is still read."""
    assert sse.messages(b'data: {"id": 1}\r\n\r\ndata: {"id": 2}\r') == [{"id": 1}, {"id": 2}]


@pytest.mark.parametrize("at", range(1, len(BODY)))
async def test_a_stream_split_at_any_byte_reads_the_same(at: int) -> None:
    """A CRLF split between two chunks ends one line, not a line and an empty one."""
    got = [m async for m in sse.stream(_chunks([BODY[:at], BODY[at:]]))]
    assert got == WANT


async def test_a_stream_drops_an_event_the_body_breaks_off_in() -> None:
    """SSE: an event not ended by an empty line when the stream ends is discarded."""
    got = [m async for m in sse.stream(_chunks([b'data: {"id": 1}\n\ndata: {"id": 2}\n']))]
    assert got == [{"id": 1}]


def test_an_event_over_the_limit_is_refused_before_it_is_buffered() -> None:
    """Our choice: the data of one event plus the line being read may not pass the limit."""
    reader = sse.Reader(limit=16)
    assert reader.feed(b'data: {"id": 1}\n\n') == [{"id": 1}]  # each event counts alone
    reader.feed(b"data: 12345678\n")
    with pytest.raises(sse.EventTooLarge):
        reader.feed(b"data: 123456789")
