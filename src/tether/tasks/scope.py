"""The tenant scope of a request: which runs its principal may see and steer.

Every surface (tasks methods, workflow tools, run resources) asks this one function for the
operations to use, so a tenant-bound principal reaches only its tenant's runs everywhere. A
principal that says it sees every tenant (`every_tenant`: an admin bound to no tenant) gets the
unscoped operations; any other principal is scoped to its `tenant` — None meaning the runs with
no tenant. A request without a principal (no security layer) gets that last, narrowest scope.
"""

from __future__ import annotations

from typing import Any

from tether.runtime.operations import Operations


def operations_for(ops: Operations, principal: Any) -> Operations:
    """The operations `principal` may use: `ops` itself, or `ops.scoped(tenant)` (cached per
    tenant: on the tasks/get path this costs attribute reads and one dict lookup)."""
    if getattr(principal, "every_tenant", False) is True:
        return ops
    tenant = getattr(principal, "tenant", None)
    return ops.scoped(tenant if isinstance(tenant, str) else None)
