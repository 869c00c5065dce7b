"""Scratch databases: names are checked and quoted before any statement is built."""

from __future__ import annotations

import pytest

from tether.storage import scratch


@pytest.mark.parametrize("name", ['t"; DROP DATABASE x; --', "1abc", "", "a" * 64, "t-1"])
def test_a_name_outside_the_pattern_is_refused_before_any_statement(name: str) -> None:
    """Only letters, digits and `_` (63 at most, not starting with a digit) become a quoted
    identifier (our choice: identifiers cannot be parameters, so they are checked)."""
    with pytest.raises(ValueError):
        scratch.quoted(name)


def test_a_good_name_is_quoted_and_a_dsn_points_at_it() -> None:
    """A valid name comes back double-quoted; with_database swaps only the database."""
    assert scratch.quoted("t_abc123") == '"t_abc123"'
    dsn = "postgresql://u:p@host:5433/postgres?sslmode=disable"
    assert scratch.with_database(dsn, "t_x") == "postgresql://u:p@host:5433/t_x?sslmode=disable"
