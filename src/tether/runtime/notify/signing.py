"""Webhook signatures: HMAC-SHA256 over a timestamp and the body. Pure.

A delivery carries `Tether-Signature: t=<unix seconds>,v1=<hex>`, where the hex is the
HMAC-SHA256 of `<t>.<body>` (the timestamp's digits, a dot, the body's bytes as sent) under the
channel's secret. A receiver recomputes it over the raw body, compares in constant time, and
refuses a timestamp further than its tolerance from its own clock (a captured delivery cannot
be replayed later); it drops a repeat of a `Tether-Delivery-Id` it has already handled.
`verify_webhook_signature` does all but the last.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Final

SIGNATURE_HEADER: Final = "Tether-Signature"
DELIVERY_HEADER: Final = "Tether-Delivery-Id"
EVENT_HEADER: Final = "Tether-Event"
SCHEME: Final = "v1"
#: How far a signature's timestamp may be from the receiver's clock, by default, in seconds.
DEFAULT_TOLERANCE_S: Final = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<body>` under `secret`."""
    signed = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, timestamp: int) -> str:
    """The `Tether-Signature` value for `body` sent at `timestamp` (unix seconds)."""
    return f"t={timestamp},{SCHEME}={signature(secret, timestamp, body)}"


def verify_webhook_signature(
    secret: str,
    header: str,
    body: bytes,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """Whether a webhook delivery is genuine: `header` (its `Tether-Signature`) holds a `v1`
    signature of `body` under `secret`, made within `tolerance_s` seconds of `now`.

    Pass the body exactly as received, before any JSON parsing. Deduplicate on the
    `Tether-Delivery-Id` header besides: a notification may be delivered more than once.

    Args:
        secret: The channel's signing secret.
        header: The `Tether-Signature` header's value.
        body: The request body, as received.
        tolerance_s: How far the signed timestamp may be from `now`, either way.
        now: The current unix time (default: the system clock).

    Returns:
        True when a signature matches and its timestamp is within the tolerance; False for a
        missing, malformed, stale or wrong one.
    """
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            return False
        if key == "t":
            if not value.isdigit() or timestamp is not None:
                return False
            timestamp = int(value)
        elif key == SCHEME:
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = signature(secret, timestamp, body)
    matched = False
    for candidate in candidates:  # compare every one: no early exit to time
        matched |= hmac.compare_digest(expected, candidate)
    return matched
