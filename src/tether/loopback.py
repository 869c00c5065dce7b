"""The host names that mean loopback, in one home for two layers that may not import each other:
the settings (a dev server binds one, and serves the console by default) and security (the Host
header it always allows, and where a server without tokens runs as the `dev` principal).

A leaf: it imports no other tether package (an import-linter contract holds it to that).
"""

from __future__ import annotations

from typing import Final

#: Loopback host names, as a Host header or a bind address spells them.
LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
