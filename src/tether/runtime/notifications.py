"""The change-notification listener, re-exported from storage for surfaces that watch runs
(`tether runs watch`): surfaces reach storage only through the runtime (an import-linter
contract). It is storage's own class: one dedicated LISTEN connection with reconnects."""

from __future__ import annotations

from tether.storage.notify import Listener

__all__ = ["Listener"]
