"""How a process notifies people: the operator's channels, the sender's settings and the
links messages carry (`NotifySetup`), and the routes the app and the operator declare
together (`plan`). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tether.runtime.notify.channels import Channel, Routed
from tether.runtime.notify.links import Links, NoLinks
from tether.storage.outbox import Route


@dataclass(frozen=True)
class SenderSettings:
    """The sender's loop: `poll_s` between looks when no wake-up comes; a claim holds a
    notification `lease_s` seconds (longer than any channel's timeout: past it, another
    sender delivers it again); up to `batch` claimed at once and `concurrency` in flight;
    `max_attempts` in all, waiting `retry_base_s` doubled per attempt (at most `retry_max_s`)
    between them; delivered rows are kept `retention_s` seconds."""

    poll_s: float = 2.0
    lease_s: float = 60.0
    batch: int = 100
    concurrency: int = 32
    max_attempts: int = 10
    retry_base_s: float = 2.0
    retry_max_s: float = 600.0
    retention_s: float = 7 * 86400.0

    def __post_init__(self) -> None:
        for name in ("poll_s", "lease_s", "retry_base_s", "retry_max_s", "retention_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"notification sender: {name} must be positive")
        for name in ("batch", "concurrency", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"notification sender: {name} must be at least 1")


@dataclass(frozen=True)
class NotifySetup:
    """A process's notification settings: the operator's channels (besides the app's own),
    the sender (None: this process delivers nothing, others do), and the links messages
    carry."""

    channels: tuple[Routed, ...] = ()
    sender: SenderSettings | None = field(default_factory=SenderSettings)
    links: Links = field(default_factory=NoLinks)


def plan(routed: Sequence[Routed]) -> tuple[list[Route], dict[str, Channel]]:
    """The routes to store and the channels by name, from every routed channel (the app's
    and the operator's).

    Raises:
        ValueError: Two different channels have one name.
    """
    channels: dict[str, Channel] = {}
    routes: dict[tuple[str, str, str], Route] = {}
    for entry in routed:
        channel = entry.channel
        known = channels.setdefault(channel.name, channel)
        if known != channel:
            raise ValueError(f"two different notification channels are named {channel.name!r}")
        for workflow in entry.workflows:
            for recipient in channel.recipients():
                key = (workflow, channel.name, recipient)
                routes[key] = Route(
                    workflow, channel.name, recipient, channel.events, channel.kinds
                )
    return list(routes.values()), channels
