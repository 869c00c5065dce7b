"""MRTR `requestState`: attacker-controlled on the way back, so it is HMAC-protected.

Wire form: base64url(JSON) "." base64url(HMAC-SHA256(key, JSON)). A state that does not verify
is refused (-32602 at the caller).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import orjson


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(key: bytes, value: Any) -> str:
    body = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return f"{_b64(body)}.{_b64(hmac.new(key, body, hashlib.sha256).digest())}"


def unseal(key: bytes, token: str) -> Any:
    """The sealed value. Raises ValueError when the token was altered or is not ours."""
    try:
        body_text, sig_text = token.split(".")
        body, sig = _unb64(body_text), _unb64(sig_text)
    except (ValueError, TypeError):
        raise ValueError("requestState is malformed") from None
    if not hmac.compare_digest(sig, hmac.new(key, body, hashlib.sha256).digest()):
        raise ValueError("requestState failed its integrity check")
    return orjson.loads(body)
