"""The composition root's own choices (app.py), in-process."""

from __future__ import annotations

import logging

import pytest

from tether.app import _state_key
from tether.settings import Settings


def test_a_missing_state_key_is_information_on_a_development_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Embedded database on loopback: one INFO line (one instance, restarted at will); any
    other server warns, since its instances cannot read each other's requestState. Our
    choice."""
    with caplog.at_level(logging.INFO, logger="tether.app"):
        _state_key(Settings())
        _state_key(Settings(database_url="postgresql://db.internal/tether"))
        _state_key(Settings(host="0.0.0.0"))  # noqa: S104 — a setting's value, nothing binds
    levels = [r.levelname for r in caplog.records if "TETHER_STATE_KEY" in r.getMessage()]
    assert levels == ["INFO", "WARNING", "WARNING"]


def test_a_set_state_key_is_used_and_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tether.app"):
        assert _state_key(Settings(state_key="k")) == b"k"
    assert not caplog.records
