"""Who may act and what they did: the `api_tokens` and `audit` tables (migration 0007).

Typed async functions over the named queries, as in `repo`; every asyncpg error leaves as a
StorageError. Token rows never carry the secret, and `list_tokens` never returns its hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from tether.storage.driver import Queryable
from tether.storage.errors import translated
from tether.storage.notify import TOKENS_CHANNEL
from tether.storage.queries import Q

__all__ = ["TOKENS_CHANNEL", "AuditEntry", "TokenHash", "TokenInfo"]


@dataclass(frozen=True)
class TokenInfo:
    """A token as `tether tokens list` shows it (no secret, no hash)."""

    id: int
    name: str
    role: str
    tenant: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


@dataclass(frozen=True)
class TokenHash:
    """A token as a server's cache holds it: the SHA-256 of its secret and its principal."""

    hash: str
    name: str
    role: str
    tenant: str | None
    expires_at: datetime | None
    revoked: bool


@dataclass(frozen=True)
class AuditEntry:
    """One audit row (`id` is None until written)."""

    at: datetime
    principal: str
    surface: str
    method: str
    outcome: str  # ok | refused | error
    tenant: str | None = None
    tool: str | None = None
    execution_id: str | None = None
    error_code: int | None = None
    remote: str | None = None
    id: int | None = None


_INFO_FIELDS: Final = (
    "id",
    "name",
    "role",
    "tenant",
    "created_at",
    "expires_at",
    "revoked_at",
    "last_used_at",
)


async def insert_token(
    conn: Queryable,
    name: str,
    role: str,
    tenant: str | None,
    digest: str,
    expires_at: datetime | None,
) -> TokenInfo:
    """Store a new token by its hash. Raises IntegrityError when a live token has the name."""
    with translated():
        rec = await conn.fetchrow(Q["insert_token"], name, role, tenant, digest, expires_at)
    assert rec is not None  # noqa: S101 — an INSERT … RETURNING that did not raise
    return TokenInfo(*(rec[f] for f in _INFO_FIELDS))


async def list_tokens(conn: Queryable, *, include_revoked: bool = False) -> list[TokenInfo]:
    with translated():
        recs = await conn.fetch(Q["list_tokens"], include_revoked)
    return [TokenInfo(*(rec[f] for f in _INFO_FIELDS)) for rec in recs]


async def load_tokens(conn: Queryable) -> list[TokenHash]:
    with translated():
        recs = await conn.fetch(Q["load_tokens"])
    return [
        TokenHash(r["hash"], r["name"], r["role"], r["tenant"], r["expires_at"], r["revoked"])
        for r in recs
    ]


async def revoke_token(conn: Queryable, name: str) -> bool:
    """Revoke the live token called `name`; False when there is none."""
    with translated():
        rec = await conn.fetchrow(Q["revoke_token"], name)
    return rec is not None


async def touch_tokens(conn: Queryable, digests: Sequence[str]) -> None:
    with translated():
        await conn.execute(Q["touch_tokens"], list(digests))


async def insert_audit(conn: Queryable, entries: Sequence[AuditEntry]) -> None:
    """Append the entries in one statement."""
    columns = (
        "at",
        "principal",
        "tenant",
        "surface",
        "method",
        "tool",
        "execution_id",
        "outcome",
        "error_code",
        "remote",
    )
    arrays = [[getattr(e, c) for e in entries] for c in columns]
    with translated():
        await conn.execute(Q["insert_audit"], *arrays)


async def list_audit(
    conn: Queryable,
    *,
    since: datetime | None = None,
    principal: str | None = None,
    execution_id: str | None = None,
    limit: int = 100,
) -> list[AuditEntry]:
    """Audit rows newest first."""
    with translated():
        recs = await conn.fetch(Q["list_audit"], since, principal, execution_id, limit)
    return [
        AuditEntry(
            at=r["at"],
            principal=r["principal"],
            surface=r["surface"],
            method=r["method"],
            outcome=r["outcome"],
            tenant=r["tenant"],
            tool=r["tool"],
            execution_id=r["execution_id"],
            error_code=r["error_code"],
            remote=r["remote"],
            id=r["id"],
        )
        for r in recs
    ]


async def delete_old_audit(conn: Queryable, days: float, batch: int) -> int:
    """Delete up to `batch` audit rows older than `days`; returns how many."""
    with translated():
        recs = await conn.fetch(Q["delete_old_audit"], days, batch)
    return len(recs)
