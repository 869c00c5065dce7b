"""API tokens, roles and the mutation gate (DESIGN.md §6).

Tokens are configured hashed: `TETHER_API_TOKENS="name:role:sha256hex,…"` (make one with
`tether tokens new NAME ROLE`). Roles: `reader` (discover, lists, read-only tools, prompts,
resources), `operator` (also every mutation: tools that start or steer runs, and every tasks/*
method — a reader cannot poll a task), `admin` (everything).

Without tokens the server is in dev mode when it listens on loopback only: everything is
open. Bound to another address without tokens, mutations fail closed (403) unless
`TETHER_ALLOW_UNAUTHENTICATED=true` says that is intended.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from tether.jsonrpc.errors import Unauthenticated, Unauthorized
from tether.jsonrpc.router import RequestContext

logger = logging.getLogger(__name__)
audit = logging.getLogger("tether.audit")

Role = Literal["reader", "operator", "admin"]
ROLES: Final = ("reader", "operator", "admin")
# One audit line per call that acts (DESIGN.md §6: "per tool call"). tasks/get is a poll an
# agent sends every few seconds: it is authorized like a mutation but not audited.
AUDITED_METHODS: Final = frozenset({"tools/call", "tasks/update", "tasks/cancel"})
READ_METHODS: Final = frozenset(
    {
        "server/discover",
        "initialize",
        "ping",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "logging/setLevel",
    }
)
LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role

    @property
    def may_mutate(self) -> bool:
        return self.role in ("operator", "admin")


DEV = Principal("dev", "admin")
ANONYMOUS = Principal("anonymous", "reader")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(name: str, role: str) -> tuple[str, str]:
    """A fresh token and its configuration entry `name:role:sha256`."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    token = "tt_" + secrets.token_urlsafe(32)
    return token, f"{name}:{role}:{hash_token(token)}"


def parse_tokens(text: str) -> dict[str, Principal]:
    """`name:role:sha256hex,…` → {hash: principal}. Raises ValueError naming a bad entry."""
    out: dict[str, Principal] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) != 3 or parts[1] not in ROLES or len(parts[2]) != 64:
            raise ValueError(f"bad API token entry {parts[0]!r}: expected name:role:sha256hex")
        name, role, digest = parts
        out[digest.lower()] = Principal(name, role)  # type: ignore[arg-type]  # checked above
    return out


class Gate:
    """Authenticates each request and authorizes its method (and tool) by role."""

    def __init__(self, tokens: dict[str, Principal], *, open_mutations: bool) -> None:
        self.tokens = tokens
        self.open_mutations = open_mutations

    @classmethod
    def from_settings(cls, api_tokens: str, host: str, allow_unauthenticated: bool) -> Gate:
        tokens = parse_tokens(api_tokens)
        dev = not tokens and host in LOOPBACK
        if not tokens and not dev and not allow_unauthenticated:
            logger.warning(
                "no API tokens and not on loopback: mutations are refused; set "
                "TETHER_API_TOKENS (or TETHER_ALLOW_UNAUTHENTICATED=true)"
            )
        return cls(tokens, open_mutations=dev or (not tokens and allow_unauthenticated))

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """`headers` by lower-case name."""
        header = headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if not self.tokens:
            return DEV if self.open_mutations else ANONYMOUS
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("a bearer token is required")
        digest = hash_token(token.strip())
        for known, principal in self.tokens.items():
            if hmac.compare_digest(known, digest):
                return principal
        raise Unauthenticated("unknown token")

    def authorize(self, ctx: RequestContext, read_only_tool: bool) -> None:
        """Raises Unauthorized when the principal may not do this."""
        principal = ctx.principal if isinstance(ctx.principal, Principal) else ANONYMOUS
        reads = ctx.method in READ_METHODS or (ctx.method == "tools/call" and read_only_tool)
        if ctx.method in AUDITED_METHODS:
            name = ctx.params.get("name") if ctx.method == "tools/call" else None
            audit.info("%s %s by %s", ctx.method, name or "-", principal.name)
        if reads or principal.may_mutate:
            return
        raise Unauthorized(f"{principal.name} ({principal.role}) may not call {ctx.method}")
