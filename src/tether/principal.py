"""Who makes a request: the principal, one typed value from the security layer to the runtime.

The security layer builds it when it resolves a request (`security/tokens.py`: a token's
name, role and tenant; `dev` and `anonymous` without tokens) and leaves it in the ASGI scope;
the JSON-RPC router hands it to every handler (`RequestContext.principal`); the surfaces (the
tasks methods, the tools, the console, the CLI) pass it on; and the runtime decides from it
which runs the request may reach (`Operations.for_principal`) and whether it reads sealed
outputs decoded (`payloads.reveals`).

A leaf: it imports no other tether package. The runtime may not import `security`, and
`security` may import only `jsonrpc` (and this module), so the one type both sides pass lives
here, where `jsonrpc`, `security`, the runtime and every surface can all see it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

Role = Literal["reader", "operator", "admin"]
ROLES: Final = ("reader", "operator", "admin")
#: A tenant name: what a token's tenant field, `--tenant` and `Operations.scoped` accept.
TENANT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def tenant_problem(tenant: str) -> str | None:
    """Why `tenant` is not a tenant name (None: it is one); security and the runtime raise it
    as their own errors."""
    if TENANT_NAME.fullmatch(tenant):
        return None
    return (
        f"tenant {tenant!r} must be 1-64 letters, digits, '_', '.' or '-', starting with "
        "a letter or digit"
    )


@dataclass(frozen=True)
class Principal:
    """A caller: its name (the token's, or `dev` / `anonymous`), its role, and the tenant it
    is bound to (None: bound to no tenant)."""

    name: str
    role: Role
    tenant: str | None = None

    @property
    def may_mutate(self) -> bool:
        """Whether the role may start and steer runs (operator and admin; a reader only reads)."""
        return self.role in ("operator", "admin")

    @property
    def every_tenant(self) -> bool:
        """Sees every tenant's runs: an admin bound to no tenant. Anyone else bound to no
        tenant sees only the runs with no tenant (the safe default: no cross-tenant reads
        unless an admin token is used)."""
        return self.tenant is None and self.role == "admin"
