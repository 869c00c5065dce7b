"""JSON-RPC 2.0 over Streamable HTTP, hand-rolled: codec, error tree, header ladder, router and
one Starlette endpoint. Protocol only: it knows nothing of workflows, tasks or tools, and
imports no other tether package but `tether.principal` (the caller's type, a dependency-free
leaf), which it hands from the ASGI scope to every handler.
"""

from __future__ import annotations
