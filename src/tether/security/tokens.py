"""API tokens, and resolving a request's principal (`tether.principal.Principal`: name, role,
tenant) from them (docs/security.md, "Tokens").

Tokens come from two sources, merged: `TETHER_API_TOKENS="name:role:sha256hex[:tenant],…"`
(make one with `tether tokens new NAME ROLE [--tenant T]`; stateless deployments) and the
database's token store (`tether tokens create`), which the app injects as a `TokenLookup` —
this package never reaches storage. With tokens from either source (in the store: any token
row, revoked or expired included, so revoking the last token never reopens a server), every
request needs a known, live bearer token.

A token bound to a tenant sees and steers only that tenant's runs, and the runs it starts belong
to the tenant. A token bound to no tenant sees only the runs with no tenant, except an admin
token bound to no tenant, which sees every tenant's runs (`Principal.every_tenant`).

A token is looked up by the SHA-256 of the presented secret, as a dict key. That is not a
timing oracle worth having: a lookup's timing can only reveal something about the hash of what
the caller sent, and the secrets are 256-bit random values, so knowing how a stored hash begins
brings an attacker no closer to a secret that hashes to it.

Without tokens the server is in dev mode when it listens on loopback only: every request is
the `dev` admin. Bound to another address without tokens, every request is the `anonymous`
reader, so mutations fail closed (403) unless `TETHER_ALLOW_UNAUTHENTICATED=true` says open
is intended.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from typing import Final, Protocol

from tether.jsonrpc.errors import Unauthenticated
from tether.loopback import LOOPBACK
from tether.principal import ROLES, Principal, tenant_problem

logger = logging.getLogger(__name__)


DEV: Final = Principal("dev", "admin")
ANONYMOUS: Final = Principal("anonymous", "reader")


def hash_token(token: str) -> str:
    """The hex SHA-256 of a secret (surrogates and all: a header is latin-1, never fails)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_tenant(tenant: str | None) -> None:
    """Raises ValueError unless `tenant` is None or a tenant name (`tether.principal`)."""
    if tenant is not None and (problem := tenant_problem(tenant)) is not None:
        raise ValueError(problem)


def new_token(name: str, role: str, tenant: str | None = None) -> tuple[str, str]:
    """A fresh token and its configuration entry `name:role:sha256[:tenant]`.
    Raises ValueError for an unknown role or a malformed tenant."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    check_tenant(tenant)
    token = "tt_" + secrets.token_urlsafe(32)
    entry = f"{name}:{role}:{hash_token(token)}"
    return token, entry if tenant is None else f"{entry}:{tenant}"


def parse_tokens(text: str) -> dict[str, Principal]:
    """`name:role:sha256hex[:tenant],…` (TETHER_API_TOKENS) → {hash: principal}. Raises
    ValueError naming a bad entry by its place (and its name, when it has the shape of one:
    an entry without a colon may be a token pasted by mistake, and is never echoed)."""
    out: dict[str, Principal] = {}
    for index, entry in enumerate(e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split(":")
        tenant = parts[3] if len(parts) == 4 else None
        if (
            len(parts) not in (3, 4)
            or parts[1] not in ROLES
            or len(parts[2]) != 64
            or (tenant is not None and tenant_problem(tenant) is not None)
        ):
            named = f" ({parts[0]!r})" if len(parts) > 1 else ""
            raise ValueError(
                f"TETHER_API_TOKENS entry {index + 1}{named}: expected name:role:sha256hex[:tenant]"
            )
        name, role, digest = parts[:3]
        out[digest.lower()] = Principal(name, role, tenant)  # type: ignore[arg-type]  # checked
    return out


class TokenLookup(Protocol):
    """A store of tokens by the SHA-256 of their secrets, answering from memory (no I/O: this
    runs on every request). The runtime's `TokenStore[Principal]` is one."""

    @property
    def configured(self) -> bool:
        """Whether the store holds any token at all (then authentication is required)."""
        ...

    def lookup(self, digest: str) -> Principal | None:
        """The principal of the live, unexpired token hashing to `digest`; None otherwise."""
        ...


class Authenticator:
    """Resolves the principal of a request from its Authorization header."""

    def __init__(
        self,
        tokens: dict[str, Principal],
        *,
        open_mutations: bool,
        store: TokenLookup | None = None,
    ) -> None:
        self.tokens = tokens
        self.open_mutations = open_mutations
        self.store = store

    def attach(self, store: TokenLookup | None) -> None:
        """Use (or, with None, stop using) a database token store besides the static tokens."""
        self.store = store

    @property
    def required(self) -> bool:
        """Whether requests need a token (some token exists in either source)."""
        return bool(self.tokens) or (self.store is not None and self.store.configured)

    @classmethod
    def from_settings(
        cls, api_tokens: str, host: str, allow_unauthenticated: bool
    ) -> Authenticator:
        tokens = parse_tokens(api_tokens)
        dev = not tokens and host in LOOPBACK
        if not tokens and not dev and not allow_unauthenticated:
            logger.warning(
                "no API tokens and not on loopback: mutations are refused; set "
                "TETHER_API_TOKENS (or TETHER_ALLOW_UNAUTHENTICATED=true)"
            )
        return cls(tokens, open_mutations=dev or (not tokens and allow_unauthenticated))

    def principal(self, authorization: str | None) -> Principal:
        """The principal an Authorization header value stands for.

        Raises:
            Unauthenticated: tokens are configured and the header holds no known bearer token.
        """
        if not self.required:
            return DEV if self.open_mutations else ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("a bearer token is required")
        principal = self.by_digest(hash_token(token))
        if principal is None:
            raise Unauthenticated("unknown, expired or revoked token")
        return principal

    def by_digest(self, digest: str) -> Principal | None:
        """The principal of the live token hashing to `digest` (a console session keeps the
        digest, never the token, and asks again on every request); None when there is none."""
        principal = self.tokens.get(digest)
        if principal is None and self.store is not None:
            principal = self.store.lookup(digest)
        return principal
