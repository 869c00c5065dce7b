"""The loopback host names (tether/loopback.py) are read by the settings and by security from
their one home. Our choice."""

from __future__ import annotations

from tether.loopback import LOOPBACK
from tether.security.hosts import HostPolicy
from tether.settings import Settings


def test_settings_and_the_host_policy_read_the_same_loopback_names() -> None:
    """The dev server's loopback bind addresses (console on by default) are the Host
    headers the host policy always allows."""
    assert HostPolicy().hosts >= LOOPBACK
    for host in LOOPBACK:
        assert Settings(host=host).console_enabled()
    assert not Settings(host="0.0.0.0").console_enabled()  # noqa: S104 — a non-loopback bind
