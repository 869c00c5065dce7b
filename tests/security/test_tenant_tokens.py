"""Tenant-bound API tokens: `name:role:sha256hex[:tenant]` entries, the tenant name
rule shared with the runtime, and who sees every tenant."""

from __future__ import annotations

import pytest

from tether.principal import Principal
from tether.runtime import errors
from tether.runtime.operations.env import check_tenant as runtime_check_tenant
from tether.security.tokens import (
    check_tenant,
    hash_token,
    new_token,
    parse_tokens,
)

SAMPLES = ["acme", "a", "Acme-1.prod_eu", "9lives", "x" * 64]
BAD = ["", "-acme", ".acme", "acme corp", "acme:prod", "a" * 65, "acme/1", "ümlaut", "acme\tx"]


def test_entries_with_and_without_a_tenant_parse() -> None:
    """Our choice: a fourth field binds the token to a tenant; three fields stay unbound (the
    format before tenants keeps working)."""
    token, entry = new_token("ann", "operator", "acme")
    plain, plain_entry = new_token("bob", "admin")
    assert entry.endswith(":acme") and plain_entry.count(":") == 2
    parsed = parse_tokens(f"{entry}, {plain_entry}")
    assert parsed[hash_token(token)] == Principal("ann", "operator", "acme")
    assert parsed[hash_token(plain)] == Principal("bob", "admin", None)


@pytest.mark.parametrize("tenant", BAD)
def test_a_malformed_tenant_is_refused_everywhere(tenant: str) -> None:
    """The token format, `tokens new` and the runtime refuse the same names."""
    with pytest.raises(ValueError, match="tenant"):
        check_tenant(tenant)
    with pytest.raises(ValueError):
        new_token("ann", "reader", tenant)
    with pytest.raises(ValueError, match="sha256hex\\[:tenant\\]"):
        parse_tokens(f"ann:reader:{'0' * 64}:{tenant}")
    with pytest.raises(errors.InvalidInput):
        runtime_check_tenant(tenant)


@pytest.mark.parametrize("tenant", SAMPLES)
def test_valid_tenants_pass_both_rules(tenant: str) -> None:
    """security/tokens.py and runtime/operations/env.py apply one rule
    (`tether.principal.TENANT_NAME`)."""
    check_tenant(tenant)
    runtime_check_tenant(tenant)


def test_too_many_fields_are_refused() -> None:
    with pytest.raises(ValueError):
        parse_tokens(f"ann:reader:{'0' * 64}:acme:extra")


def test_only_an_unbound_admin_sees_every_tenant() -> None:
    """Our choice (the safe one): an admin bound to no tenant sees every tenant; an unbound
    reader or operator sees only the runs with no tenant; a bound admin only its tenant."""
    assert Principal("root", "admin").every_tenant
    assert not Principal("ops", "operator").every_tenant
    assert not Principal("ro", "reader").every_tenant
    assert not Principal("root", "admin", "acme").every_tenant
