"""Identifiers. Execution ids are task ids and bearer-grade secrets: 160 random bits, base32,
lowercase, header-safe ASCII."""

from __future__ import annotations

import base64
import re
import secrets

_EXECUTION_ID = re.compile(r"^ex_[a-z2-7]{32}$")


def _token(nbytes: int) -> str:
    return base64.b32encode(secrets.token_bytes(nbytes)).decode("ascii").rstrip("=").lower()


def new_execution_id() -> str:
    return "ex_" + _token(20)


def new_update_id() -> str:
    return "up_" + _token(15)


def new_worker_id() -> str:
    return "wk_" + _token(10)


def is_execution_id(value: str) -> bool:
    """Whether `value` has the shape of an execution id (cheap check before any query)."""
    return bool(_EXECUTION_ID.match(value))
