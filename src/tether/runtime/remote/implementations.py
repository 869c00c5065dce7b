"""The remote protocols this version speaks, by the name a remote's `protocol` gives.

Each is a `RemoteProtocol` factory (protocol.py); a protocol added later (A2A) is one more
entry. A remote configured with a protocol missing here is refused when the app starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from tether.runtime.remote.mcp import McpPlain, McpTasks
from tether.runtime.remote.protocol import Factory

PROTOCOLS: Final[Mapping[str, Factory]] = MappingProxyType({"mcp-tasks": McpTasks, "mcp": McpPlain})
