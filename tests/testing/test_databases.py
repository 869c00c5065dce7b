"""The test kit behind a pooler: the variables a server reads (TETHER_DATABASE_POOLER,
TETHER_STATEMENT_CACHE_SIZE, TETHER_LISTEN_DATABASE_URL, the last naming the server reached
directly) route each test database as a server would reach it."""

from __future__ import annotations

import pytest

from tether.storage import pool
from tether.testing.databases import _Pooling

POOLED = "postgresql://tether:pw@127.0.0.1:6432/postgres"
DIRECT = "postgresql://tether:pw@127.0.0.1:5432/postgres"


def test_a_transaction_pooler_routes_each_test_database_to_its_direct_twin() -> None:
    """Our choice: the test database reached through the pooler keeps no prepared statements
    and LISTENs at the same database name on the direct server, until the route is removed."""
    pooling = _Pooling.from_env(
        {"TETHER_DATABASE_POOLER": "transaction", "TETHER_LISTEN_DATABASE_URL": DIRECT}
    )
    remove = pooling.route("postgresql://tether:pw@127.0.0.1:6432/t_1", "t_1")
    assert remove is not None
    try:
        assert pool.route_of("postgresql://tether:pw@127.0.0.1:6432/t_1") == pool.Route(
            0, "postgresql://tether:pw@127.0.0.1:5432/t_1"
        )
    finally:
        remove()
    assert pool.route_of("postgresql://tether:pw@127.0.0.1:6432/t_1") == pool.Route()


def test_without_pooler_variables_nothing_is_routed() -> None:
    """Our choice: a plain server is reached directly with the default cache."""
    assert _Pooling.from_env({}).route("postgresql://h/t_1", "t_1") is None
    cached = _Pooling.from_env({"TETHER_STATEMENT_CACHE_SIZE": "7"})
    remove = cached.route("postgresql://h/t_1", "t_1")
    assert remove is not None
    try:
        assert pool.route_of("postgresql://h/t_1") == pool.Route(7)
    finally:
        remove()


@pytest.mark.parametrize(
    "env",
    [
        {"TETHER_DATABASE_POOLER": "transaction"},
        {"TETHER_DATABASE_POOLER": "statement", "TETHER_LISTEN_DATABASE_URL": DIRECT},
        {"TETHER_STATEMENT_CACHE_SIZE": "many"},
    ],
)
def test_pooler_variables_that_cannot_work_are_refused_by_name(env: dict[str, str]) -> None:
    """Our choice, as a server: a transaction pooler needs the direct URL for LISTEN, and a
    bad pool mode or cache size is named."""
    with pytest.raises(ValueError, match=r"^TETHER_"):
        _Pooling.from_env(env)
