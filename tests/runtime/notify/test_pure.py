"""The pure parts of notifications: signatures, channel configuration and its secrets, routes,
the messages each channel gets, links, and backoff."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tether import App, EmailChannel, SlackChannel, WebhookChannel, verify_webhook_signature
from tether.runtime.notify import messages, signing
from tether.runtime.notify.channels import Routed, Secret, parse_channels
from tether.runtime.notify.config import SenderSettings, plan
from tether.runtime.notify.links import ConsoleLinks, NoLinks, decisions
from tether.runtime.notify.sender import backoff
from tether.settings import Settings, SettingsError
from tether.storage.outbox import Notification

BODY = b'{"id":"dl_1","type":"wait.opened"}'
NOW = 1_800_000_000
SIGN_VAR = "HOOK_SECRET"  # the variable a webhook's signing secret is read from


# --- signatures --------------------------------------------------------------------------------


def test_a_signature_verifies_over_the_exact_body_within_the_tolerance() -> None:
    """Our choice: HMAC-SHA256 of `t.body`, refused when stale, altered or under another key."""
    header = signing.signature_header("s3cret", BODY, NOW)
    assert header.startswith(f"t={NOW},v1=")
    assert verify_webhook_signature("s3cret", header, BODY, now=NOW + 299)
    assert verify_webhook_signature("s3cret", header, BODY, now=NOW - 299)
    assert not verify_webhook_signature("s3cret", header, BODY, now=NOW + 301)
    assert not verify_webhook_signature("s3cret", header, BODY + b" ", now=NOW)
    assert not verify_webhook_signature("other", header, BODY, now=NOW)


@pytest.mark.parametrize(
    "header",
    ["", "t=1800000000", "v1=abc", "t=x,v1=abc", "t=1,t=2,v1=abc", "garbage", "t=1800000000,v1"],
)
def test_a_malformed_signature_header_is_refused(header: str) -> None:
    """A header without one timestamp and a v1 signature never verifies."""
    assert not verify_webhook_signature("s3cret", header, BODY, now=NOW)


def test_any_matching_v1_among_several_verifies() -> None:
    """A receiver checks every v1 entry (a sender may sign under two secrets while rotating)."""
    good = signing.signature("s3cret", NOW, BODY)
    assert verify_webhook_signature("s3cret", f"t={NOW},v1=00ff,v1={good}", BODY, now=NOW)


# --- channels ----------------------------------------------------------------------------------


def test_a_channels_secrets_are_read_from_the_environment_and_never_shown() -> None:
    """Our choice: a channel names variables; the values stay out of every repr."""
    hook = WebhookChannel(name="ops", url_env="HOOK_URL", secret_env=SIGN_VAR)
    env = {"HOOK_URL": "https://hooks.example.com/T/abc?token=tok123", "HOOK_SECRET": "sec456"}
    resolved = hook.resolve(env)
    assert resolved.url is not None and resolved.url.reveal() == env["HOOK_URL"]
    shown = repr(resolved) + str(resolved) + repr(hook)
    assert "tok123" not in shown and "sec456" not in shown
    assert repr(Secret("x")) == "Secret('***')"


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"HOOK_SECRET": "s"}, "HOOK_URL is unset"),
        ({"HOOK_URL": "https://h.example.com/x", "HOOK_SECRET": ""}, "HOOK_SECRET is unset"),
        ({"HOOK_URL": "ftp://h.example.com/x", "HOOK_SECRET": "s"}, "not an http(s) URL"),
        ({"HOOK_URL": "http://h.example.com/?t=tok9", "HOOK_SECRET": "s"}, "must be https"),
    ],
)
def test_an_unset_or_unfit_secret_is_refused_naming_the_variable_not_the_value(
    env: dict[str, str], problem: str
) -> None:
    """The error names the channel and the variable; never the URL (it may hold a token)."""
    hook = WebhookChannel(name="ops", url_env="HOOK_URL", secret_env=SIGN_VAR)
    with pytest.raises(ValueError, match="'ops'") as caught:
        hook.resolve(env)
    assert problem in str(caught.value) and "tok9" not in str(caught.value)


def test_plain_http_is_allowed_to_loopback_or_when_the_channel_says_so() -> None:
    """Our choice: https, but http to this machine (tests, a local relay) or by opt-in."""
    local = SlackChannel(name="s", url_env="U")
    assert local.resolve({"U": "http://127.0.0.1:9/x"}).url is not None
    assert local.resolve({"U": "http://[::1]:9/x"}).url is not None
    opted = SlackChannel(name="s", url_env="U", allow_http=True)
    assert opted.resolve({"U": "http://relay.internal/x"}).url is not None


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: WebhookChannel(name="1bad", url_env="U", secret_env=SIGN_VAR), "channel name"),
        (lambda: WebhookChannel(name="ok", url_env="https://x", secret_env=SIGN_VAR), "url_env"),
        (lambda: SlackChannel(name="ok", url_env="U", events=("wait.closed",)), "events"),
        (lambda: SlackChannel(name="ok", url_env="U", kinds=("update",)), "kinds"),
        (lambda: SlackChannel(name="ok", url_env="U", timeout_s=0), "timeout_s"),
        (
            lambda: EmailChannel(name="m", host="smtp.example.com", sender="a@x", to=("nope",)),
            "not an email address",
        ),
        (
            lambda: EmailChannel(
                name="m", host="smtp.example.com", sender="a@x", to=("b@x",), tls="none"
            ),
            "loopback",
        ),
        (
            lambda: EmailChannel(
                name="m", host="smtp.example.com", sender="a@x", to=("b@x",), password_env=SIGN_VAR
            ),
            "username",
        ),
        (lambda: EmailChannel(name="m", host="h", sender="a@x", to=()), "at least one"),
    ],
)
def test_a_channel_that_does_not_fit_is_refused_when_it_is_made(make: Any, problem: str) -> None:
    """Configuration errors surface at import (the app) or start (the operator's), not later."""
    with pytest.raises(ValueError, match=problem):
        make()


def test_the_operators_channels_parse_from_json_with_their_workflows() -> None:
    """Each entry takes its type's options by name; `workflows` defaults to every workflow."""
    routed = parse_channels(
        '{"channels": ['
        '{"type": "webhook", "name": "ops", "url_env": "U", "secret_env": "HOOK_SECRET",'
        ' "events": ["wait.opened"]},'
        '{"type": "email", "name": "mail", "host": "127.0.0.1", "tls": "none",'
        ' "sender": "t@example.com", "to": ["a@example.com"], "workflows": ["deploy"]}]}'
    )
    assert routed == [
        Routed(
            WebhookChannel(name="ops", url_env="U", secret_env=SIGN_VAR, events=("wait.opened",))
        ),
        Routed(
            EmailChannel(
                name="mail", host="127.0.0.1", tls="none", sender="t@example.com",
                to=("a@example.com",),
            ),
            ("deploy",),
        ),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ('{"channel": []}', "expected"),
        ('{"channels": [{"type": "pager"}]}', "type must be one of"),
        ('{"channels": [{"type": "slack", "name": "s", "url_env": "U", "url": "x"}]}', "'url'"),
        ('{"channels": [{"type": "slack", "name": "s"}]}', "url_env"),
        ('{"channels": [{"type": "slack", "name": "s", "url_env": "U", "workflows": []}]}',
         "workflows"),
        ('{"channels": [{"type": "email", "name": "m", "host": "h", "sender": "a@x",'
         ' "to": "b@x"}]}', "list"),
    ],
)  # fmt: skip
def test_operator_configuration_that_does_not_fit_is_refused_naming_the_entry(
    text: str, problem: str
) -> None:
    """An unknown option (a URL where a variable name belongs, say) is named, never ignored."""
    with pytest.raises(ValueError, match=problem):
        parse_channels(text)


def test_tether_notify_is_read_from_json_or_a_file_and_a_bad_one_names_the_variable(
    tmp_path: Any,
) -> None:
    """TETHER_NOTIFY holds the channels' JSON or the path of a file that does."""
    text = '{"channels": [{"type": "slack", "name": "s", "url_env": "U"}]}'
    file = tmp_path / "notify.json"
    file.write_text(text, encoding="utf-8")
    for value in (text, str(file)):
        setup = Settings.from_env({"TETHER_NOTIFY": value}).notify_setup("/console")
        assert [r.channel.name for r in setup.channels] == ["s"]
        assert isinstance(setup.links, NoLinks)
    with pytest.raises(SettingsError, match="TETHER_NOTIFY"):
        Settings.from_env({"TETHER_NOTIFY": '{"channels": [{"type": "pager"}]}'})
    setup = Settings.from_env(
        {"TETHER_PUBLIC_URL": "https://t.example.com", "TETHER_NOTIFY_SEND": "false"}
    ).notify_setup("/console")
    assert setup.sender is None and setup.links == ConsoleLinks(
        "https://t.example.com", "/console/runs/"
    )
    with pytest.raises(SettingsError, match="TETHER_PUBLIC_URL"):
        Settings.from_env({"TETHER_PUBLIC_URL": "tether.example.com"})


# --- routes ------------------------------------------------------------------------------------


def test_the_app_routes_channels_per_workflow_or_for_every_workflow() -> None:
    """Our choice: `App.notify` covers every workflow (or those named); `notify=` one."""
    app = App()
    ops = WebhookChannel(name="ops", url_env="U", secret_env=SIGN_VAR)
    mail = EmailChannel(name="mail", host="h", sender="a@x", to=("b@x", "c@x"))
    app.notify(ops)

    @app.workflow(notify=[mail, ops])
    async def deploy(ctx: Any) -> None: ...

    routes, channels = plan(app.notifications.routed)
    assert set(channels) == {"ops", "mail"}
    assert sorted((r.workflow, r.channel, r.recipient) for r in routes) == [
        ("*", "ops", ""),
        ("deploy", "mail", "b@x"),
        ("deploy", "mail", "c@x"),
        ("deploy", "ops", ""),
    ]
    assert all(r.events == ops.events for r in routes)


def test_two_different_channels_with_one_name_are_refused() -> None:
    """A name picks one channel's secrets; two meanings of one name is a mistake."""
    app = App()
    app.notify(SlackChannel(name="x", url_env="A"))
    with pytest.raises(ValueError, match="'x'"):
        app.notify(SlackChannel(name="x", url_env="B"))

    with pytest.raises(ValueError, match="'x'"):

        @app.workflow(notify=[SlackChannel(name="x", url_env="C")])
        async def wf(ctx: Any) -> None: ...

    assert "wf" not in app.workflows
    with pytest.raises(TypeError):
        app.notify("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'x'"):
        plan(
            [
                Routed(SlackChannel(name="x", url_env="A")),
                Routed(SlackChannel(name="x", url_env="B")),
            ]
        )


# --- messages ----------------------------------------------------------------------------------


def note(event: str = "wait.opened", **data: Any) -> Notification:
    wait = {
        "key": "ex_1:approval:publish:3",
        "kind": "approval",
        "name": "publish",
        "prompt": "Ship <!channel> & *bold*?\nsecond line",
        "opened_at": "2026-01-01T00:00:00+00:00",
        "deadline": None,
        "inputs": ["ticket", "note"],
        "required": ["ticket"],
        "form": {"not": "shown"},
    }
    run = {
        "id": "ex_1",
        "workflow": "deploy",
        "business_id": "b",
        "tenant": None,
        "status": "waiting",
    }
    return Notification(
        id=1,
        delivery_id="dl_abc",
        channel="c",
        recipient="",
        event=event,
        execution_id="ex_1",
        data={"run": run, "wait": wait, **data},
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
    )


def test_the_webhook_payload_carries_the_wait_the_run_and_the_decision_links() -> None:
    """Our choice: a stable JSON shape; descriptor fields beyond the listed ones stay out."""
    links = ConsoleLinks("https://t.example.com/")
    page = "https://t.example.com/console/runs/ex_1"
    assert messages.payload(note(), links) == {
        "id": "dl_abc",
        "type": "wait.opened",
        "created_at": "2026-01-01T00:00:00Z",
        "run": {
            "id": "ex_1", "workflow": "deploy", "business_id": "b", "tenant": None,
            "status": "waiting",
        },
        "wait": {
            "key": "ex_1:approval:publish:3",
            "kind": "approval",
            "name": "publish",
            "prompt": "Ship <!channel> & *bold*?\nsecond line",
            "opened_at": "2026-01-01T00:00:00+00:00",
            "deadline": None,
            "inputs": ["ticket", "note"],
            "required": ["ticket"],
        },
        "links": {"run": page, "decisions": {"approve": page, "reject": page, "push_back": page}},
    }  # fmt: skip
    answered = messages.payload(
        note("wait.answered", answer={"key": "k", "by": None, "decision": "reject"}), NoLinks()
    )
    assert answered["answer"] == {"key": "k", "decision": "reject"}
    assert answered["links"] == {"run": None, "decisions": {}}


def test_slack_text_cannot_mention_or_link_and_the_headline_is_one_line() -> None:
    """Text from a wait is escaped for Slack's markup; the header holds no newline."""
    message = messages.slack_message(note(), NoLinks())
    fields = message["blocks"][1]["fields"]
    asks = next(f["text"] for f in fields if f["text"].startswith("*Asks*"))
    assert "&lt;!channel&gt; &amp;" in asks and "<!channel>" not in asks
    assert "*Inputs*\nticket (required), note" in [f["text"] for f in fields]
    assert len(message["blocks"]) == 2  # no links: no buttons
    assert "\n" not in messages.headline(note())


def test_each_event_has_its_headline() -> None:
    """What a person reads first, per event."""
    assert messages.headline(note()) == "Approval 'publish' is waiting for an answer (deploy)"
    answered = note("wait.answered", answer={"key": "k", "by": "ann", "decision": "approve"})
    assert messages.headline(answered) == "Approval 'publish' was answered: approve by ann (deploy)"
    assert (
        messages.headline(note("wait.expired")) == "Approval 'publish' expired unanswered (deploy)"
    )
    ended = Notification(
        **{**vars(note("run.ended")), "data": {"run": {"workflow": "deploy", "status": "failed"}}}
    )
    assert messages.headline(ended) == "Run of deploy ended: failed"


def test_a_remote_question_is_told_of_by_default_with_its_fields() -> None:
    """A remote tool's question (`remote_input`) needs a person like any other wait: every
    channel hears of it unless told otherwise, and the message names the form's fields."""
    assert "remote_input" in SlackChannel(name="ops", url_env="U").kinds
    wait = {
        "key": "ex_1:remote_input:peer/ask#3.1:7",
        "kind": "remote_input",
        "name": "peer/ask#3.1",
        "prompt": "Who signs?",
        "opened_at": "2026-01-01T00:00:00+00:00",
        "deadline": None,
        "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    asked = Notification(**{**vars(note()), "data": {**note().data, "wait": wait}})
    assert (
        messages.headline(asked)
        == "Remote question 'peer/ask#3.1' is waiting for an answer (deploy)"
    )
    fields = [f["text"] for f in messages.slack_message(asked, NoLinks())["blocks"][1]["fields"]]
    assert "*Fields*\nname" in fields


def test_an_email_subject_is_one_line_and_the_body_lists_each_decision_link() -> None:
    """The email says what the Slack message says, as text, with the CLI way to answer."""
    message = messages.email_message(
        note(), ConsoleLinks("https://t.example.com"), "t@example.com", "a@example.com",
        datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    assert message["Subject"] == "Approval 'publish' is waiting for an answer (deploy)"
    assert message["Message-ID"] == "<dl_abc@tether.invalid>"
    text = message.get_content()
    assert "Asks: Ship <!channel> & *bold*? second line" in text
    assert "Push back: https://t.example.com/console/runs/ex_1" in text
    assert "tether runs answer ex_1 ex_1:approval:publish:3" in text


def test_decisions_follow_the_wait_kind_and_a_gates_own_choices() -> None:
    """An approval's decisions, a gate's choices, a task's, or one answer link."""
    assert decisions({"kind": "approval"}) == ("approve", "reject", "push_back")
    assert decisions({"kind": "approval", "choices": ["ship", "hold"]}) == ("ship", "hold")
    assert decisions({"kind": "human_task"}) == ("complete", "push_back")
    assert decisions({"kind": "signal"}) == ("answer",)


# --- backoff -----------------------------------------------------------------------------------


def test_backoff_doubles_with_jitter_honours_retry_after_and_is_capped() -> None:
    """Our choice: base·2^(n-1), jittered to 50-100%, at least Retry-After, at most the cap."""
    settings = SenderSettings(retry_base_s=1.0, retry_max_s=30.0)
    for attempt, full in ((1, 1.0), (2, 2.0), (3, 4.0), (10, 30.0)):
        delay = backoff(attempt, settings)
        assert full / 2 <= delay <= full
    assert backoff(1, settings, asked_s=12.0) == 12.0
    assert backoff(1, settings, asked_s=3600.0) == 30.0
