"""The notification metrics against local receivers: delivery attempts counted by channel type,
channel and outcome as deliveries succeed, are retried and are given up; the latency of each
delivery; the outbox backlog gauges read from the database at scrape time."""

from __future__ import annotations

import functools
import uuid

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.receivers import http_receiver
from tests.runtime.conftest import Start
from tests.runtime.notify.test_sender import FAST, SIGN_VAR, approval_app
from tests.waiting import until
from tether.observability.exposition import Scrape
from tether.runtime import health
from tether.runtime.notify.channels import SlackChannel, WebhookChannel
from tether.runtime.notify.config import NotifySetup, SenderSettings
from tether.runtime.service import Runtime

pytestmark = pytest.mark.postgres

ATTEMPTS = "tether_notification_attempts_total"
LATENCY_COUNT = "tether_notification_latency_seconds_count"


def unique(name: str) -> str:
    """A channel name no other test uses (the metrics registry lives as long as the process)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def attempts(kind: str, channel: str) -> dict[str, float]:
    """The attempt counter of `channel` by outcome."""
    return {
        outcome: REGISTRY.get_sample_value(
            ATTEMPTS, {"type": kind, "channel": channel, "outcome": outcome}
        )
        or 0.0
        for outcome in ("delivered", "retried", "given_up")
    }


def latencies(kind: str, channel: str) -> float:
    return REGISTRY.get_sample_value(LATENCY_COUNT, {"type": kind, "channel": channel}) or 0.0


@pytest.fixture
def signed(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv(SIGN_VAR, "whsec-metrics-test")
    return monkeypatch


async def test_a_delivery_after_two_5xx_counts_two_retries_one_delivery_and_its_latency(
    start: Start, signed: pytest.MonkeyPatch
) -> None:
    """Our choice: each attempt is counted once by its outcome; a delivery records its latency."""
    name = unique("ops")
    async with http_receiver(lambda i, _r: 503 if i < 2 else 200) as receiver:
        signed.setenv("TEST_HOOK_URL", receiver.url)
        hook = WebhookChannel(
            name=name, url_env="TEST_HOOK_URL", secret_env=SIGN_VAR, events=("wait.opened",)
        )
        async with start(approval_app(hook), notify=NotifySetup(sender=FAST)) as rt:
            await rt.ops.start("deploy")
            await receiver.wait_for(lambda got: len(got) >= 3)
            await until(
                lambda: rt.pool.fetchval("SELECT 1 FROM outbox WHERE sent_at IS NOT NULL"),
                what="the notification marked sent",
            )
    assert [r.status for r in receiver.received] == [503, 503, 200]
    assert attempts("webhook", name) == {"delivered": 1.0, "retried": 2.0, "given_up": 0.0}
    assert latencies("webhook", name) == 1.0


async def test_a_refusal_and_the_last_attempt_of_a_5xx_are_counted_given_up(
    start: Start, signed: pytest.MonkeyPatch
) -> None:
    """Our choice: a 4xx is given up at once; a 5xx is retried until the attempts run out."""
    refused, flaky = unique("refused"), unique("flaky")
    settings = SenderSettings(poll_s=0.05, lease_s=40.0, retry_base_s=0.05, max_attempts=2)
    async with (
        http_receiver(lambda _i, _r: 404) as refusing,
        http_receiver(lambda _i, _r: 503) as failing,
    ):
        signed.setenv("TEST_HOOK_URL", refusing.url)
        signed.setenv("TEST_SLACK_URL", failing.url)
        hook = WebhookChannel(
            name=refused, url_env="TEST_HOOK_URL", secret_env=SIGN_VAR, events=("wait.opened",)
        )
        slack = SlackChannel(name=flaky, url_env="TEST_SLACK_URL", events=("wait.opened",))
        app = approval_app(hook, slack)
        async with start(app, notify=NotifySetup(sender=settings)) as rt:
            await rt.ops.start("deploy")
            await until(
                lambda: rt.pool.fetchval(
                    "SELECT count(*) = 2 FROM outbox WHERE failed_at IS NOT NULL"
                ),
                what="both notifications given up",
            )
    assert [r.status for r in refusing.received] == [404]
    assert [r.status for r in failing.received] == [503, 503]
    assert attempts("webhook", refused) == {"delivered": 0.0, "retried": 0.0, "given_up": 1.0}
    assert attempts("slack", flaky) == {"delivered": 0.0, "retried": 1.0, "given_up": 1.0}
    assert latencies("webhook", refused) == latencies("slack", flaky) == 0.0


async def backlog(rt: Runtime) -> dict[str, tuple[float, float]]:
    """(pending, oldest pending age) by channel, from a scrape of this runtime."""
    text = (await Scrape(functools.partial(health.snapshot, rt), max_age_s=0).render()).decode()
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("tether_notifications_pending"):
                found.setdefault(s.labels["channel"], {})[s.name] = s.value
    return {
        channel: (
            got["tether_notifications_pending"],
            got["tether_notifications_pending_oldest_age_seconds"],
        )
        for channel, got in found.items()
    }


async def test_the_backlog_gauges_count_pending_notifications_until_they_are_settled(
    start: Start, signed: pytest.MonkeyPatch
) -> None:
    """Our choice: pending is neither delivered nor given up; a routed channel without any
    shows 0."""
    name, quiet = unique("ops"), unique("quiet")
    hook = WebhookChannel(
        name=name, url_env="TEST_HOOK_URL", secret_env=SIGN_VAR, events=("wait.opened",)
    )
    silent = WebhookChannel(
        name=quiet, url_env="TEST_HOOK_URL", secret_env=SIGN_VAR, events=("run.ended",)
    )
    app = approval_app(hook, silent)
    signed.setenv("TEST_HOOK_URL", "http://127.0.0.1:9/unused")
    async with start(app, notify=NotifySetup(sender=None)) as rt:  # nobody delivers
        assert await backlog(rt) == {name: (0.0, 0.0), quiet: (0.0, 0.0)}
        for _ in range(3):
            await rt.ops.start("deploy")
        await until(
            lambda: rt.pool.fetchval("SELECT count(*) = 3 FROM outbox"),
            what="three notifications written",
        )
        waiting = await backlog(rt)
    assert set(waiting) == {name, quiet}
    assert waiting[name][0] == 3.0 and waiting[name][1] >= 0.0
    assert waiting[quiet] == (0.0, 0.0)
    # one refused (given up), two delivered: none pending any more
    async with http_receiver(lambda i, _r: 404 if i == 0 else 200) as receiver:
        signed.setenv("TEST_HOOK_URL", receiver.url)
        async with start(app, notify=NotifySetup(sender=FAST)) as rt:
            await until(
                lambda: rt.pool.fetchval(
                    "SELECT count(*) = 0 FROM outbox WHERE next_at IS NOT NULL"
                ),
                what="every notification settled",
            )
            settled = await backlog(rt)
    assert sorted(r.status for r in receiver.received) == [200, 200, 404]
    assert settled == {name: (0.0, 0.0), quiet: (0.0, 0.0)}
