"""Limits, pure: the rate setting's syntax, the token bucket against a driven clock,
Retry-After values, stream slots; and the Authorization header fuzzed through the security
layer: never a server error, never a principal for a header that is not a known token."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.test_middleware import Recorder, drive
from tether.jsonrpc.errors import Unauthenticated
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
from tether.security.tokens import Authenticator, Principal, hash_token, new_token


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


def test_idle_buckets_are_forgotten_past_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anonymous callers from many addresses cannot grow the table without bound."""
    monkeypatch.setattr("tether.security.limits.MAX_BUCKETS", 3)
    limiter = RateLimiter(Rate(1.0, 1))
    for i in range(3):
        limiter.take(f"k{i}", 0.0)
    limiter.take("k3", 10.0)  # k0..k2 have refilled: forgotten
    assert set(limiter._buckets) == {"k3"}


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
