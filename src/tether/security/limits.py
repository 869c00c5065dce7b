"""Per-caller limits: a request rate (token bucket) and a cap on open SSE streams.

A caller is its token's principal name; callers without a token of their own (the anonymous
reader, the dev admin) are told apart by remote address. PURE apart from the clock, which is
passed in (`now`), so tests drive it. The security middleware applies the rate to every
route; the MCP endpoint takes a stream slot (`stream_guard`) before it opens an SSE stream.

`TETHER_RATE_LIMIT` reads `"<rate>/s"` or `"<rate>/s burst <n>"` (also `/m`): a bucket of
`burst` requests (default: one second's worth, at least 1) refilled at `rate` per second.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tether.jsonrpc.errors import RateLimited
from tether.jsonrpc.router import RequestContext
from tether.security.tokens import ANONYMOUS, DEV

_SPEC = re.compile(
    r"^\s*(?P<rate>\d+(?:\.\d+)?)\s*/\s*(?P<unit>s|sec|second|m|min|minute)"
    r"(?:\s+burst\s+(?P<burst>\d+))?\s*$",
    re.IGNORECASE,
)
_PER_SECOND: Final = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0}
#: At most this many buckets are kept: anonymous callers from many addresses must not grow
#: memory without bound. Past it, a new caller's bucket replaces the one used least recently.
MAX_BUCKETS: Final = 10_000


@dataclass(frozen=True)
class Rate:
    per_second: float
    burst: int


def parse_rate(text: str) -> Rate | None:
    """`"20/s burst 40"` → Rate(20.0, 40); empty → None (no limit). Raises ValueError."""
    if not text.strip():
        return None
    m = _SPEC.match(text)
    if m is None:
        raise ValueError(f"bad rate limit {text!r}: expected e.g. '20/s burst 40'")
    per_second = float(m["rate"]) / _PER_SECOND[m["unit"].lower()]
    if per_second <= 0:
        raise ValueError(f"bad rate limit {text!r}: the rate must be positive")
    burst = int(m["burst"]) if m["burst"] else max(1, math.ceil(per_second))
    if burst < 1:
        raise ValueError(f"bad rate limit {text!r}: the burst must be at least 1")
    return Rate(per_second, burst)


class RateLimiter:
    """One token bucket per caller key, at most `max_buckets` of them (least recently used
    first out). Each request costs O(1): a lookup, a move to the recent end, and for a new key
    past the bound one eviction from the old end — never a scan.

    The bucket evicted is the one whose caller has gone longest without a request; to get a
    throttled caller's bucket forgotten (and refilled), `max_buckets` other callers must each
    make a request after its last one, so a caller that keeps sending keeps its bucket."""

    def __init__(self, rate: Rate, max_buckets: int = MAX_BUCKETS) -> None:
        if max_buckets < 1:
            raise ValueError("the rate limiter needs room for at least one bucket")
        self.rate = rate
        self.max_buckets = max_buckets
        # key → (tokens, at), least recently used first
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str, now: float) -> float:
        """Spend one request of `key`'s bucket: 0.0 when allowed, else the seconds to wait."""
        rate = self.rate
        buckets = self._buckets
        found = buckets.get(key)
        if found is None:
            tokens, at = float(rate.burst), now
            if len(buckets) >= self.max_buckets:
                buckets.popitem(last=False)
        else:
            tokens, at = found
            buckets.move_to_end(key)
        tokens = min(float(rate.burst), tokens + (now - at) * rate.per_second)
        if tokens >= 1.0:
            buckets[key] = (tokens - 1.0, now)
            return 0.0
        buckets[key] = (tokens, now)
        return (1.0 - tokens) / rate.per_second

    @property
    def size(self) -> int:
        """How many buckets are kept."""
        return len(self._buckets)


def retry_after(wait_s: float) -> str:
    """A `Retry-After` value (whole seconds, at least 1) for a wait."""
    return str(max(1, math.ceil(wait_s)))


class StreamSlots:
    """Open SSE streams per caller key, at most `cap` each."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError("the stream cap must be at least 1")
        self.cap = cap
        self._open: dict[str, int] = {}

    def acquire(self, key: str) -> bool:
        """Take a slot for `key`; False when it already holds `cap` streams."""
        count = self._open.get(key, 0)
        if count >= self.cap:
            return False
        self._open[key] = count + 1
        return True

    def release(self, key: str) -> None:
        count = self._open.get(key, 0) - 1
        if count > 0:
            self._open[key] = count
        else:
            self._open.pop(key, None)

    def open(self, key: str) -> int:
        return self._open.get(key, 0)


def caller_key(name: str, anonymous: bool, remote: str | None) -> str:
    """The key limits count under: the token's principal, else the remote address."""
    return f"addr:{remote or '-'}" if anonymous else f"token:{name}"


def stream_guard(slots: StreamSlots) -> Callable[[RequestContext], Callable[[], None]]:
    """The MCP endpoint's `open_stream` hook: a slot per stream, released exactly once.

    The hook raises RateLimited when the caller already holds `slots.cap` open streams."""

    def open_stream(ctx: RequestContext) -> Callable[[], None]:
        principal = ANONYMOUS if ctx.principal is None else ctx.principal
        key = caller_key(principal.name, principal is ANONYMOUS or principal is DEV, ctx.remote)
        if not slots.acquire(key):
            raise RateLimited(f"at most {slots.cap} open streams per caller")
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                slots.release(key)

        return release

    return open_stream
