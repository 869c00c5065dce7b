"""Delivering notifications to local receivers: a signed webhook and a Slack message over
real HTTP on loopback, an email to an SMTP server in the test's loop; retries with backoff on
a 5xx, a refusal given up at once, secrets kept out of logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.receivers import Received, http_receiver, smtp_receiver
from tests.runtime.conftest import Start
from tests.waiting import until
from tether.runtime.context import Context
from tether.runtime.notify.channels import Channel, EmailChannel, SlackChannel, WebhookChannel
from tether.runtime.notify.config import NotifySetup, SenderSettings
from tether.runtime.notify.links import ConsoleLinks
from tether.runtime.notify.signing import verify_webhook_signature
from tether.runtime.registry import App
from tether.runtime.waits import Approved

pytestmark = pytest.mark.postgres

SECRET = "whsec-test-0123456789"  # noqa: S105 — a made-up test secret
FAST = SenderSettings(poll_s=0.05, lease_s=40.0, retry_base_s=0.05, retry_max_s=0.2)
LINKS = ConsoleLinks("https://tether.example.com")
SIGN_VAR = "TEST_HOOK_SECRET"  # the variable the signing secret is read from


def approval_app(*channels: Channel) -> App:
    app = App()

    @app.workflow(notify=list(channels))
    async def deploy(ctx: Context) -> str:
        got = await ctx.approval(
            "publish", prompt="Ship <release> & tell @here?", inputs=["ticket"], required=["ticket"]
        )
        assert isinstance(got, Approved)
        return got.inputs["ticket"]

    return app


@pytest.fixture
def hook_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    yield monkeypatch


def body(r: Received) -> dict[str, Any]:
    got = orjson.loads(r.body)
    assert isinstance(got, dict)
    return got


async def test_a_wait_opening_posts_a_signed_webhook_then_its_answer_and_the_end(
    start: Start, hook_env: pytest.MonkeyPatch
) -> None:
    """Our choice: each event is one POST, signed over `t.body`, with its delivery id."""
    async with http_receiver() as receiver:
        hook_env.setenv("TEST_HOOK_URL", receiver.url)
        hook = WebhookChannel(name="ops", url_env="TEST_HOOK_URL", secret_env=SIGN_VAR)
        setup = NotifySetup(sender=FAST, links=LINKS)
        async with start(approval_app(hook), notify=setup) as rt:
            run_id = (await rt.ops.start("deploy")).execution.id
            await receiver.wait_for(lambda got: len(got) >= 1)
            (opened,) = receiver.received
            key = body(opened)["wait"]["key"]
            await rt.ops.answer(run_id, key, {"decision": "approve", "ticket": "T-7"}, by="ann")
            await receiver.wait_for(lambda got: len(got) >= 3)
    first, answered, ended = receiver.received
    for r in receiver.received:
        assert verify_webhook_signature(SECRET, r.headers["tether-signature"], r.body)
        assert not verify_webhook_signature("another-secret", r.headers["tether-signature"], r.body)
        assert r.headers["tether-delivery-id"] == body(r)["id"]
        assert r.headers["tether-event"] == body(r)["type"]
        assert r.headers["content-type"] == "application/json"
    assert len({r.delivery_id for r in receiver.received}) == 3
    page = f"https://tether.example.com/console/runs/{run_id}"
    got = body(first)
    assert got["type"] == "wait.opened"
    assert got["run"] == {
        "id": run_id,
        "workflow": "deploy",
        "business_id": run_id,
        "tenant": None,
        "status": "waiting",
    }
    assert got["wait"]["kind"] == "approval"
    assert got["wait"]["prompt"] == "Ship <release> & tell @here?"
    assert got["wait"]["inputs"] == ["ticket"]
    assert got["links"] == {
        "run": page,
        "decisions": {"approve": page, "reject": page, "push_back": page},
    }
    assert body(answered)["type"] == "wait.answered"
    assert body(answered)["answer"] == {"key": key, "by": "ann", "decision": "approve"}
    assert body(ended)["type"] == "run.ended"
    assert body(ended)["run"]["status"] == "completed"


async def test_a_5xx_is_retried_with_backoff_under_the_same_delivery_id(
    start: Start, hook_env: pytest.MonkeyPatch, db_url: str
) -> None:
    """Our choice: 5xx answers are retried, each attempt the same notification and id."""
    async with http_receiver(lambda i, _r: 503 if i < 2 else 200) as receiver:
        hook_env.setenv("TEST_HOOK_URL", receiver.url)
        hook = WebhookChannel(
            name="ops", url_env="TEST_HOOK_URL", secret_env=SIGN_VAR,
            events=("wait.opened",),
        )  # fmt: skip
        async with start(approval_app(hook), notify=NotifySetup(sender=FAST)) as rt:
            await rt.ops.start("deploy")
            await receiver.wait_for(lambda got: len(got) >= 3)
            row = await until(
                lambda: rt.pool.fetchrow(
                    "SELECT attempts, next_at FROM outbox WHERE sent_at IS NOT NULL"
                ),
                what="the notification marked sent",
            )
    assert [r.status for r in receiver.received] == [503, 503, 200]
    assert len({r.delivery_id for r in receiver.received}) == 1
    assert len({orjson.dumps(body(r)) for r in receiver.received}) == 1
    gaps = [b.at - a.at for a, b in zip(receiver.received, receiver.received[1:], strict=False)]
    assert all(gap > 0 for gap in gaps)
    assert (row["attempts"], row["next_at"]) == (3, None)


async def test_a_4xx_refusal_is_given_up_at_once_and_logged_without_the_url(
    start: Start, hook_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Our choice: a refusal the same request would meet again is not retried; no secret in logs."""
    caplog.set_level(logging.DEBUG, logger="tether")
    async with http_receiver(lambda _i, _r: 404) as receiver:
        url = receiver.url + "?token=s3cr3t-token"
        hook_env.setenv("TEST_HOOK_URL", url)
        hook = WebhookChannel(
            name="ops", url_env="TEST_HOOK_URL", secret_env=SIGN_VAR,
            events=("wait.opened",),
        )  # fmt: skip
        async with start(approval_app(hook), notify=NotifySetup(sender=FAST)) as rt:
            await rt.ops.start("deploy")
            await receiver.wait_for(lambda got: len(got) >= 1)
            row = await until(
                lambda: rt.pool.fetchrow(
                    "SELECT attempts, next_at, last_error FROM outbox WHERE failed_at IS NOT NULL"
                ),
                what="the notification given up",
            )
    assert [r.status for r in receiver.received] == [404]
    assert (row["attempts"], row["next_at"], row["last_error"]) == (1, None, "HTTP 404")
    assert "s3cr3t-token" not in caplog.text and SECRET not in caplog.text


async def test_slack_gets_block_kit_with_the_prompt_inputs_and_a_link_per_decision(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: the Slack message shows what is asked, the inputs, and decision buttons."""
    async with http_receiver() as receiver:
        monkeypatch.setenv("TEST_SLACK_URL", receiver.url)
        slack = SlackChannel(name="approvals", url_env="TEST_SLACK_URL", events=("wait.opened",))
        async with start(approval_app(slack), notify=NotifySetup(sender=FAST, links=LINKS)) as rt:
            run_id = (await rt.ops.start("deploy")).execution.id
            await receiver.wait_for(lambda got: len(got) >= 1)
    (got,) = receiver.received
    message = body(got)
    assert message["text"] == "Approval 'publish' is waiting for an answer (deploy)"
    header, section, actions = message["blocks"]
    assert header["type"] == "header"
    texts = [f["text"] for f in section["fields"]]
    assert "*Asks*\nShip &lt;release&gt; &amp; tell @here?" in texts
    assert "*Inputs*\nticket (required)" in texts
    page = f"https://tether.example.com/console/runs/{run_id}"
    assert [(b["text"]["text"], b["url"], b.get("style")) for b in actions["elements"]] == [
        ("Approve", page, "primary"),
        ("Reject", page, "danger"),
        ("Push back", page, None),
    ]


async def test_an_email_goes_to_each_recipient_with_its_delivery_id(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: one message per recipient over SMTP, the delivery id in a header."""
    async with smtp_receiver() as smtp:
        mail = EmailChannel(
            name="mail",
            host="127.0.0.1",
            port=smtp.port,
            tls="none",
            sender="tether@example.com",
            to=("ann@example.com", "bob@example.com"),
            events=("wait.opened",),
        )
        async with start(approval_app(mail), notify=NotifySetup(sender=FAST, links=LINKS)) as rt:
            run_id = (await rt.ops.start("deploy")).execution.id
            await smtp.wait_for(2)
    recipients = sorted(env.rcpt_tos[0] for env, _ in smtp.messages)
    assert recipients == ["ann@example.com", "bob@example.com"]
    ids = {msg["Tether-Delivery-Id"] for _, msg in smtp.messages}
    assert len(ids) == 2
    _, message = smtp.messages[0]
    assert message["Subject"] == "Approval 'publish' is waiting for an answer (deploy)"
    assert message["From"] == "tether@example.com"
    text = message.get_content()
    assert "Asks: Ship <release> & tell @here?" in text
    assert f"Approve: https://tether.example.com/console/runs/{run_id}" in text
