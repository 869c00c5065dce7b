"""Which Host and Origin values a request may carry (DNS-rebinding and cross-site defence; MCP
transports: servers must validate Origin). PURE: the middleware applies it to every route.

Loopback names are always allowed; `allowed_hosts` adds names (`*`: any Host), and an Origin
passes when it is listed exactly in `allowed_origins` (`*`: any) or is http(s) on an allowed
host name. A request without Origin is not from a browser and passes.

The policy is fixed once built, so `allows` remembers its answer per (Host, Origin) pair: a
client sends the same pair on every request, and the tasks/get hot path then pays one dict
lookup. At most `REMEMBERED` pairs are kept (a caller inventing Host values gets them checked
in full every time, never a growing table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from tether.loopback import LOOPBACK

#: How many (Host, Origin) answers a policy remembers.
REMEMBERED: Final = 256


def _hostname(value: str) -> str:
    """A Host header without its port (`[v6]:port` keeps the brackets)."""
    if value.startswith("["):
        return value.split("]")[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostPolicy:
    def __init__(self, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()):
        self.hosts = frozenset(h.lower() for h in allowed_hosts) | LOOPBACK
        self.any_host = "*" in self.hosts
        self.origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
        self.any_origin = "*" in self.origins
        self._origin_hosts = frozenset(h.strip("[]") for h in self.hosts)
        self._answers: dict[tuple[str | None, str | None], bool] = {}

    def host_allowed(self, host: str | None) -> bool:
        return self.any_host or host is None or _hostname(host.lower()) in self.hosts

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser
        origin = origin.lower().rstrip("/")
        if self.any_origin or origin in self.origins:
            return True
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname or ""
        except ValueError:  # urlsplit's refusal of a malformed URL (e.g. an open `[`)
            return False
        return parts.scheme in ("http", "https") and hostname in self._origin_hosts

    def allows(self, host: str | None, origin: str | None) -> bool:
        answer = self._answers.get((host, origin))
        if answer is None:
            answer = self.host_allowed(host) and self.origin_allowed(origin)
            if len(self._answers) < REMEMBERED:
                self._answers[(host, origin)] = answer
        return answer
