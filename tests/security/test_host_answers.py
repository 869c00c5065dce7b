"""HostPolicy.allows remembers its answers per (Host, Origin): the same answers as the full
check, asked in any order and past the table's bound, which never grows beyond it."""

from __future__ import annotations

import random

from tether.security import hosts
from tether.security.hosts import HostPolicy

HOSTS = [None, "localhost", "127.0.0.1:8000", "[::1]:8000", "app.example", "evil.example:80"]
ORIGINS = [None, "http://localhost:3000", "https://app.example", "http://evil.example", "null"]


def test_remembered_answers_are_the_full_checks_answers() -> None:
    policy = HostPolicy(["app.example"], ["https://app.example"])
    pairs = [(h, o) for h in HOSTS for o in ORIGINS] * 3
    random.Random(16).shuffle(pairs)
    for host, origin in pairs:
        expected = policy.host_allowed(host) and policy.origin_allowed(origin)
        assert policy.allows(host, origin) is expected, (host, origin)
    assert policy.allows("localhost", None) and not policy.allows("evil.example:80", None)
    assert not policy.allows("localhost", "http://evil.example")  # DNS rebinding's Origin


def test_the_remembered_table_stays_bounded() -> None:
    policy = HostPolicy()
    for i in range(hosts.REMEMBERED + 50):
        assert not policy.allows(f"h{i}.example", None)
    assert len(policy._answers) == hosts.REMEMBERED
    assert policy.allows("localhost", None)  # past the bound: checked in full, still right
    assert not policy.allows("h9999.example", None)


async def test_the_layer_reads_header_names_in_any_case() -> None:
    """ASGI servers send lower-case names; a name in another case is read all the same, so a
    hostile Origin or Host cannot slip past by its spelling."""
    from tether.security.middleware import SecurityMiddleware
    from tether.security.tokens import Authenticator

    reached: list[object] = []

    async def inner(scope: object, receive: object, send: object) -> None:
        reached.append(scope)

    async def send(message: object) -> None:
        sent.append(message)

    layer = SecurityMiddleware(
        inner, hosts=HostPolicy(), authenticator=Authenticator({}, open_mutations=True)
    )
    for name, value in [
        (b"Origin", b"http://evil.example"),
        (b"ORIGIN", b"http://evil.example"),
        (b"Host", b"evil.example"),
        (b"hOsT", b"evil.example:8000"),
    ]:
        sent: list[object] = []
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(name, value)]}
        await layer(scope, None, send)  # type: ignore[arg-type]
        assert sent and sent[0]["status"] == 403, name  # type: ignore[index]
    assert reached == []
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"Host", b"localhost")]}
    await layer(scope, None, send)  # type: ignore[arg-type]
    assert len(reached) == 1
