"""Fixtures for the harness tests: the e2e server fixture (a real Tether on loopback)."""

from __future__ import annotations

from tests.e2e.conftest import mcp_server

__all__ = ["mcp_server"]
