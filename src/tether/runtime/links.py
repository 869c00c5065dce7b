"""Approval links: one signed URL per decision and per person, which decides an open approval
(or human task) from a browser, without signing in. Pure: no I/O (the clock is passed in).

A link's token is `<payload>.<mac>`: `payload` is the base64url of a JSON object holding the
wait's key (`k`), the decision (`d`), the person it is for (`a`), when it expires (`e`, Unix
seconds) and a random nonce (`n`); `mac` is an HMAC-SHA256 of `payload` under the link key,
derived from the server secret (`TETHER_STATE_KEY`) apart from the console's session key. So a
link cannot be made or altered without the secret, and each one names exactly one decision by
one person on one opening of one wait:

- it expires (`e`);
- it acts once: its nonce is marked used in the transaction that records its answer
  (`Operations.answer(..., once=nonce)`), and a used link changes nothing again;
- it is bound to the wait's key: once the wait is answered or the run moves on, the key is not
  open any more and the link says so, changing nothing.

The console serves links at `PATH` (`console/links.py`): a GET shows what the link would do
and a form with one button (never deciding: link scanners and previews fetch links), and that
form's POST decides, as the person the link names, through the one answer path (so an approval
decided by votes counts it as their vote).

`LinkMinter.links(wait, approver)` gives the URL of each decision a wait takes, for whoever
hands links to people (notifications, `tether links`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from tether.runtime import votes
from tether.runtime.answer_rules import APPROVAL_DECISIONS, HUMAN_TASK_DECISIONS

#: Where the console serves links: `{PATH}/{token}`.
PATH: Final = "/console/links"
#: How long a link lives unless its maker says otherwise (TETHER_LINK_TTL_S).
DEFAULT_TTL_S: Final = 3 * 24 * 3600.0
#: The longest life a link may be given.
MAX_TTL_S: Final = 90 * 24 * 3600.0
_VERSION: Final = 1
_MAX_TOKEN: Final = 4096  # characters: a token longer than this is refused unread


class LinkRefused(ValueError):
    """A link cannot be made for that wait and person: the wait is not decided by people (a
    signal, an agent step), or the person may not vote on it."""


def link_key(secret: bytes) -> bytes:
    """The HMAC key of approval links, derived from the server secret (TETHER_STATE_KEY)."""
    return hmac.new(secret, b"tether-approval-links", hashlib.sha256).digest()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Link:
    """What a link says, as signed.

    Attributes:
        key: The wait's key (which names the run).
        decision: The decision it gives.
        approver: The person it is for: who decides, in the run's history and the audit trail.
        expires: When it stops working (Unix seconds).
        nonce: Its single-use nonce.
        token: The signed token (the last part of its URL).
    """

    key: str
    decision: str
    approver: str
    expires: int
    nonce: str
    token: str

    @property
    def execution_id(self) -> str:
        return self.key.split(":", 1)[0]

    def expired(self, now: float) -> bool:
        return self.expires <= now


def sign(
    key: bytes, wait_key: str, decision: str, approver: str, expires: int, nonce: str = ""
) -> Link:
    """A link for `approver` to give `decision` to the wait `wait_key` until `expires` (Unix
    seconds); `nonce`: "" for a fresh random one."""
    nonce = nonce or secrets.token_hex(16)
    body = {"v": _VERSION, "k": wait_key, "d": decision, "a": approver, "e": expires, "n": nonce}
    payload = _b64(orjson.dumps(body))
    return Link(wait_key, decision, approver, expires, nonce, f"{payload}.{_mac(key, payload)}")


def read(key: bytes, token: str) -> Link | None:
    """The link a token stands for; None when it is malformed or its signature does not match
    (expiry is the caller's to check: `Link.expired`)."""
    if not token or len(token) > _MAX_TOKEN or not token.isascii():
        return None
    payload, sep, mac = token.rpartition(".")
    if not sep or not hmac.compare_digest(mac.encode(), _mac(key, payload).encode()):
        return None
    try:
        body = orjson.loads(_unb64(payload))
    except (ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(body, dict) or body.get("v") != _VERSION:
        return None
    fields = (body.get("k"), body.get("d"), body.get("a"), body.get("n"))
    expires = body.get("e")
    if not all(isinstance(f, str) and f for f in fields) or not isinstance(expires, int):
        return None
    wait_key, decision, approver, nonce = (str(f) for f in fields)
    return Link(wait_key, decision, approver, expires, nonce, token)


def decisions(wait: Mapping[str, Any]) -> tuple[str, ...]:
    """The decisions a link can give the wait (a protocol gate's own choices; a human task
    without push-back only `complete`); empty for a wait people do not decide."""
    kind = wait.get("kind")
    if kind == "approval":
        choices = wait.get("choices")
        return tuple(str(c) for c in choices) if choices else APPROVAL_DECISIONS
    if kind == "human_task":
        if wait.get("rules") == "scalar" and wait.get("feedback") is None:
            return ("complete",)  # a DAG task without push_back
        return HUMAN_TASK_DECISIONS
    return ()


def may_decide(
    wait: Mapping[str, Any], approver: str, roles: Mapping[str, Iterable[str]] | None = None
) -> None:
    """Refuse a link for someone the wait's vote policy does not admit (named approvers; a
    role's members, when `roles` is given). Whether they started the run is checked when the
    link is used.

    Raises:
        LinkRefused: naming the rule.
    """
    try:
        votes.check_voter(approver)
    except ValueError as exc:
        raise LinkRefused(str(exc)) from None
    policy = votes.policy_of(wait)
    if policy is None:
        return
    if policy.role is not None and roles is None:
        policy = votes.Policy(policy.quorum, policy.approvers, None, True)
    why = votes.refusal(
        policy, str(wait.get("name")), approver, None, starter=None, roles=roles or {}
    )
    if why is not None:
        raise LinkRefused(why)


class LinkMinter:
    """Makes approval links for one server address.

    Args:
        secret: The server secret (TETHER_STATE_KEY): the same on every server that serves
            the links.
        base_url: Where people reach the server (TETHER_PUBLIC_URL), e.g.
            `https://tether.example.com`; links are `{base_url}/console/links/{token}`.
        ttl_s: How long a link lives (default 3 days; at most 90).
        roles: Each approver role's members (TETHER_APPROVER_ROLES), to refuse links for
            someone outside an approval's role (None: not checked until the link is used).

    Raises:
        ValueError: an empty secret, a base URL that is not http(s), a TTL out of range.
    """

    def __init__(
        self,
        secret: str | bytes,
        base_url: str,
        ttl_s: float = DEFAULT_TTL_S,
        roles: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        raw = secret.encode() if isinstance(secret, str) else secret
        if not raw:
            raise ValueError("approval links need the server secret (TETHER_STATE_KEY)")
        if not base_url.startswith(("https://", "http://")):
            raise ValueError(
                f"the links' base URL must start with https:// or http://: {base_url!r}"
            )
        if not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError(f"a link's life must be more than 0 s and at most {MAX_TTL_S:.0f} s")
        self.key = link_key(raw)
        self.base_url = base_url.rstrip("/")
        self.ttl_s = ttl_s
        self.roles = roles

    def url(self, link: Link) -> str:
        return f"{self.base_url}{PATH}/{link.token}"

    def mint(
        self,
        wait: Mapping[str, Any],
        approver: str,
        decision: str,
        *,
        now: float | None = None,
        ttl_s: float | None = None,
    ) -> Link:
        """One link: `approver` gives `decision` to `wait` (a descriptor, as the run's `waits`
        lists it). Raises LinkRefused (also for a decision the wait does not take), ValueError
        (a TTL out of range)."""
        if decision not in decisions(wait):
            raise LinkRefused(
                f"a {wait.get('kind')} wait {wait.get('name')!r} takes no decision {decision!r}"
            )
        may_decide(wait, approver, self.roles)
        life = self.ttl_s if ttl_s is None else ttl_s
        if not 0 < life <= MAX_TTL_S:
            raise ValueError(f"a link's life must be more than 0 s and at most {MAX_TTL_S:.0f} s")
        expires = int((time.time() if now is None else now) + life)
        return sign(self.key, str(wait["key"]), decision, approver, expires)

    def links(
        self,
        wait: Mapping[str, Any],
        approver: str,
        *,
        now: float | None = None,
        ttl_s: float | None = None,
    ) -> dict[str, str]:
        """The URL of each decision `wait` takes, for `approver`: `{"approve": url,
        "reject": url, "push_back": url}` for an approval, `{"complete": …, "push_back": …}`
        for a human task. Each URL acts once, until it expires, while the wait stays open
        under this key.

        Raises:
            LinkRefused: the wait is not one people decide, or `approver` may not vote on it.
            ValueError: a TTL out of range.
        """
        if not decisions(wait):
            raise LinkRefused(f"a {wait.get('kind')} wait is not decided from a link")
        return {
            d: self.url(self.mint(wait, approver, d, now=now, ttl_s=ttl_s)) for d in decisions(wait)
        }
