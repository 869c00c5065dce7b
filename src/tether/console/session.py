"""The console's session cookie and CSRF tokens (PURE: the clock is passed in).

A session cookie holds no secret: `<kind>.<subject>.<expires>.<mac>`, where `kind` is `t` (a
signed-in token: `subject` is the SHA-256 of the token, looked up again on every request, so a
revoked or expired token ends its sessions at once) or `n` (a visitor not signed in: `subject`
is a random nonce, so forms still carry a per-session CSRF token), and `mac` is an HMAC-SHA256
of the rest under the server's console key. The CSRF token of a session is an HMAC of its
cookie value under the same key: a page can only learn it by reading a page of that session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final, Literal

COOKIE: Final = "tether_console"
#: A signed-in session lasts this long (then the token is asked for again).
SESSION_S: Final = 12 * 3600
Kind = Literal["t", "n"]


def console_key(secret: bytes) -> bytes:
    """The console's HMAC key, derived from the server secret (TETHER_STATE_KEY)."""
    return hmac.new(secret, b"tether-console-session", hashlib.sha256).digest()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Session:
    kind: Kind
    subject: str  # token digest (kind t) or nonce (kind n)
    expires: int
    value: str  # the cookie value, as signed

    @property
    def signed_in(self) -> bool:
        return self.kind == "t"


def issue(key: bytes, kind: Kind, subject: str, now: float) -> Session:
    """A fresh session (`subject`: a token digest; for kind n pass "" for a new nonce)."""
    subject = subject or secrets.token_hex(16)
    expires = int(now) + SESSION_S
    body = f"{kind}.{subject}.{expires}"
    return Session(kind, subject, expires, f"{body}.{_mac(key, body)}")


def read(key: bytes, value: str | None, now: float) -> Session | None:
    """The session a cookie value stands for; None when absent, forged, malformed or expired."""
    if not value:
        return None
    parts = value.split(".")
    if len(parts) != 4 or parts[0] not in ("t", "n"):
        return None
    kind, subject, expires_text, mac = parts
    body = f"{kind}.{subject}.{expires_text}"
    if not hmac.compare_digest(mac, _mac(key, body)) or not expires_text.isdigit():
        return None
    expires = int(expires_text)
    if expires <= now:
        return None
    return Session(kind, subject, expires, value)  # type: ignore[arg-type]  # checked above


def csrf_token(key: bytes, session: Session) -> str:
    """The CSRF token every form of this session carries."""
    return _mac(key, "csrf." + session.value)[:40]


def csrf_ok(key: bytes, session: Session | None, token: str | None) -> bool:
    """Whether a submitted form's token belongs to this session."""
    if session is None or not token:
        return False
    # As bytes: compare_digest refuses str with non-ASCII characters (a forged form may hold any)
    submitted = token.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(submitted, csrf_token(key, session).encode())
