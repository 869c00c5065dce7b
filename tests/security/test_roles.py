"""Roles (docs/security.md), applied where the JSON-RPC method is known, to the principal the
middleware left in the scope: a reader reads (and calls read-only tools), an operator also
mutates, every tasks/* method counts as a mutation; a request with no principal is the
anonymous reader. Host names: loopback in any spelling is always allowed."""

from __future__ import annotations

from typing import Any

import pytest

from tether.jsonrpc import codes
from tether.jsonrpc.errors import Unauthorized
from tether.jsonrpc.headers import Route
from tether.jsonrpc.router import RequestContext
from tether.principal import Principal
from tether.security import roles
from tether.security.hosts import HostPolicy
from tether.security.tokens import parse_tokens

READER = Principal("ann", "reader")
OPERATOR = Principal("bob", "operator")


def ctx(method: str, principal: Principal | None, **params: Any) -> RequestContext:
    return RequestContext(method, params, Route("modern", codes.MODERN_VERSION), {}, 1, principal)


@pytest.mark.parametrize("method", ["tools/call", "tasks/get", "tasks/update", "tasks/cancel"])
def test_a_reader_may_not_mutate_or_poll_tasks(method: str) -> None:
    for principal in (READER, None):
        with pytest.raises(Unauthorized):
            roles.authorize(ctx(method, principal, name="start_x"), read_only_tool=False)
    roles.authorize(ctx(method, OPERATOR, name="start_x"), read_only_tool=False)


def test_a_reader_reads_and_calls_read_only_tools() -> None:
    roles.authorize(ctx("tools/list", None), read_only_tool=False)
    roles.authorize(ctx("resources/read", READER), read_only_tool=False)
    roles.authorize(ctx("tools/call", READER, name="x_status"), read_only_tool=True)


def test_a_principal_is_known_by_name_in_the_request_context() -> None:
    assert ctx("tools/call", OPERATOR).principal_name == "bob"
    assert ctx("tools/call", None).principal_name is None


def test_a_bad_token_entry_is_named() -> None:
    with pytest.raises(ValueError, match="'bob'"):
        parse_tokens("bob:superuser:" + "0" * 64)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST", None])
def test_loopback_hosts_are_always_allowed(host: str | None) -> None:
    assert HostPolicy().host_allowed(host)
    assert not HostPolicy().host_allowed("example.com")
    assert HostPolicy(["*"]).host_allowed("example.com")
