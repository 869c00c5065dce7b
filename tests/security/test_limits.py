"""Limits, pure: the rate setting's syntax, the token bucket against a driven clock,
Retry-After values, stream slots; and the Authorization header fuzzed through the security
layer: never a server error, never a principal for a header that is not a known token."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.test_middleware import Recorder, drive
from tether.jsonrpc.errors import Unauthenticated
from tether.principal import Principal
from tether.security.hosts import HostPolicy
from tether.security.limits import (
    Rate,
    RateLimiter,
    StreamSlots,
    caller_key,
    parse_rate,
    retry_after,
)
from tether.security.middleware import SecurityMiddleware
from tether.security.tokens import Authenticator, hash_token, new_token


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("", None),
        ("20/s burst 40", Rate(20.0, 40)),
        ("20/s", Rate(20.0, 20)),
        ("0.5/s", Rate(0.5, 1)),
        ("120/m burst 5", Rate(2.0, 5)),
    ],
)
def test_rate_settings_parse(text: str, rate: Rate | None) -> None:
    """Our syntax: `<n>/s|/m [burst <n>]`; the burst defaults to one second's worth."""
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "20", "0/s", "20/h", "20/s burst 0", "-1/s"])
def test_bad_rate_settings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_the_bucket_allows_the_burst_then_refills_at_the_rate() -> None:
    limiter = RateLimiter(Rate(2.0, 3))
    assert [limiter.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a", 0.0) == pytest.approx(0.5)
    assert limiter.take("b", 0.0) == 0.0  # a bucket per caller
    assert limiter.take("a", 0.5) == 0.0  # one request refilled after half a second
    assert limiter.take("a", 0.5) > 0.0
    assert (retry_after(0.01), retry_after(1.2)) == ("1", "2")


class Watched(OrderedDict[str, tuple[float, float]]):
    """The limiter's bucket table, counting what each request does to it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0  # calls of any kind
        self.scans = 0  # walks over the whole table
        self.evicted: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        self.ops += 1
        return super().get(key, default)

    def __setitem__(self, key: str, value: tuple[float, float]) -> None:
        self.ops += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.ops += 1
        super().__delitem__(key)

    def move_to_end(self, key: str, last: bool = True) -> None:
        self.ops += 1
        super().move_to_end(key, last)

    def popitem(self, last: bool = True) -> tuple[str, tuple[float, float]]:
        self.ops += 1
        key, value = super().popitem(last)
        self.evicted.append(key)
        return key, value

    def __iter__(self) -> Iterator[str]:
        self.scans += 1
        return super().__iter__()

    def items(self) -> Any:
        self.scans += 1
        return super().items()

    def keys(self) -> Any:
        self.scans += 1
        return super().keys()

    def values(self) -> Any:
        self.scans += 1
        return super().values()


def watched(limiter: RateLimiter) -> Watched:
    table = Watched()
    limiter._buckets = table
    return table


def test_the_bucket_table_never_grows_past_its_bound() -> None:
    """Our choice: 10^5 distinct callers (say, anonymous addresses), all within one instant, so
    no bucket has refilled: the table still holds at most `max_buckets` buckets."""
    limiter = RateLimiter(Rate(1.0, 5), max_buckets=1000)
    for i in range(100_000):
        assert limiter.take(f"addr:{i}", 0.0) == 0.0
        assert limiter.size <= 1000
    assert limiter.size == 1000


def test_each_request_costs_the_same_whatever_the_number_of_callers() -> None:
    """Our choice: a request does a fixed handful of table operations and never walks the
    table; past the bound a new caller evicts exactly one bucket, the least recently used."""
    limiter = RateLimiter(Rate(1.0, 5), max_buckets=1000)
    table = watched(limiter)
    costs = set()
    for i in range(100_000):
        before, evicted = table.ops, len(table.evicted)
        limiter.take(f"addr:{i}", float(i) / 1000)
        costs.add(table.ops - before)
        assert len(table.evicted) - evicted == (1 if i >= 1000 else 0)
    assert table.scans == 0
    assert costs == {2, 3}  # a lookup and a store, plus one eviction past the bound
    assert table.evicted[:3] == ["addr:0", "addr:1", "addr:2"]


def test_a_caller_that_keeps_sending_keeps_its_bucket() -> None:
    """Our choice: eviction is least recently used first, so new callers push out the idle
    ones, never a throttled caller that keeps sending (it cannot shed its debt that way)."""
    limiter = RateLimiter(Rate(1.0, 1), max_buckets=3)
    assert limiter.take("busy", 0.0) == 0.0
    for i in range(10):
        limiter.take(f"new{i}", 0.0)
        assert limiter.take("busy", 0.0) > 0.0  # still throttled: its bucket was kept
    assert set(limiter._buckets) == {"busy", "new8", "new9"}


def test_stream_slots_cap_each_caller() -> None:
    slots = StreamSlots(2)
    assert [slots.acquire("a") for _ in range(3)] == [True, True, False]
    assert slots.acquire("b")
    slots.release("a")
    assert slots.open("a") == 1 and slots.acquire("a")
    with pytest.raises(ValueError):
        StreamSlots(0)
    assert caller_key("ann", False, "10.0.0.1") != caller_key("ann", True, "10.0.0.1")


SECRET, ENTRY = new_token("ann", "operator")


class Store:
    """A token store answering from a dict (the Protocol the runtime's TokenStore fills)."""

    configured = True

    def __init__(self, tokens: dict[str, Principal]) -> None:
        self.tokens = tokens

    def lookup(self, digest: str) -> Principal | None:
        return self.tokens.get(digest)


DB_SECRET, _ = new_token("db", "reader")
AUTH = Authenticator.from_settings(ENTRY, "127.0.0.1", allow_unauthenticated=False)
AUTH.attach(Store({hash_token(DB_SECRET): Principal("db", "reader", "t1")}))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=255), max_size=120))
def test_a_fuzzed_authorization_header_never_authenticates_or_fails(header: str) -> None:
    """Hypothesis: any latin-1 header value is either a known token (only the exact secrets)
    or Unauthenticated — through the middleware, 401 or 204, never a server error."""
    try:
        principal = AUTH.principal(header)
    except Unauthenticated:
        principal = None
    if principal is not None:
        scheme, _, token = header.partition(" ")
        assert scheme.lower() == "bearer" and token.strip() in (SECRET, DB_SECRET)
    layer = SecurityMiddleware(Recorder(), hosts=HostPolicy(), authenticator=AUTH)
    sent = asyncio.run(drive(layer, "http", [(b"authorization", header.encode("latin-1"))]))
    assert sent[0]["status"] == (401 if principal is None else 204)


@pytest.mark.parametrize(
    "header",
    [f"Bearer {SECRET}", f"bearer  {SECRET} ", f"Bearer {DB_SECRET}"],
    ids=["env-token", "env-token-loose-spacing", "store-token"],  # stable across xdist workers
)
def test_known_tokens_from_both_sources_authenticate(header: str) -> None:
    assert AUTH.principal(header).name in ("ann", "db")
