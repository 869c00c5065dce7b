"""Security (docs/security.md), apart from routing as Starlette keeps trusted-host and CORS apart:

- `middleware`: the ASGI layer around the whole app — Host/Origin policy and authentication
  (the principal goes into the ASGI scope; 401 with a Bearer challenge) for every route;
- `hosts`: which Host and Origin values a request may carry;
- `tokens`: API tokens, and resolving a request's principal (the `tether.principal` type,
  which this layer builds and every layer down to the runtime takes);
- `roles`: what a principal's role may call (the method is known only once the JSON-RPC body
  is read, so the endpoint applies it, reading the principal from the scope).

Imports only `tether.jsonrpc` (for the wire shape of its refusals) and `tether.principal`.
"""

from __future__ import annotations

from tether.principal import ROLES, Principal, Role
from tether.security.tokens import new_token

__all__ = ["ROLES", "Principal", "Role", "new_token"]
