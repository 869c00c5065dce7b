"""Apps for testing Tether and MCP clients against it (not for production use)."""

from __future__ import annotations
