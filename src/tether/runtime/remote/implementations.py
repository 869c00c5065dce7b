"""The remote protocols this installation speaks, by the name a remote's `protocol` gives.

Each is a `RemoteProtocol` factory (protocol.py). A2A (`a2a`) is there when the `a2a` extra
(the A2A SDK) is installed; otherwise `MISSING` says how to get it, and a remote configured
with it is refused, saying so, when the app starts (so is one naming a protocol missing from
both).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from tether.runtime.remote.mcp import McpPlain, McpTasks
from tether.runtime.remote.protocol import Factory

#: What a missing optional protocol needs, by name.
INSTALL_A2A: Final = "install Tether's `a2a` extra (pip install 'tether[a2a]') to ask A2A agents"


def _optional() -> tuple[dict[str, Factory], dict[str, str]]:
    """The optional protocols that can be imported here, and why the others cannot."""
    try:
        from tether.runtime.remote.a2a import A2aAgent
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "a2a":
            raise  # the SDK is there but broken: not a missing extra
        return {}, {"a2a": INSTALL_A2A}
    return {"a2a": A2aAgent}, {}


_found, _missing = _optional()
PROTOCOLS: Final[Mapping[str, Factory]] = MappingProxyType(
    {"mcp-tasks": McpTasks, "mcp": McpPlain, **_found}
)
MISSING: Final[Mapping[str, str]] = MappingProxyType(_missing)
