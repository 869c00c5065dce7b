"""The base of every boundary's error map, re-exported from storage (the lowest layer, where
the first map lives) for the layers above, which reach storage only through the runtime."""

from __future__ import annotations

from tether.storage.errors import ErrorMapper

__all__ = ["ErrorMapper"]
