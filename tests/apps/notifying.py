"""A workflow that asks for an approval and tells a webhook when it does: the app worker
subprocesses load in the notification kill test (tests/e2e/test_notify_kill.py). The webhook's
URL and secret come from NOTIFY_TEST_URL and NOTIFY_TEST_SECRET, as an operator's would."""

from __future__ import annotations

from tether.runtime.context import Context
from tether.runtime.notify.channels import WebhookChannel
from tether.runtime.registry import App

app = App("notifying")
SIGN_VAR = "NOTIFY_TEST_SECRET"  # the variable the signing secret is read from

hook = WebhookChannel(
    name="hook",
    url_env="NOTIFY_TEST_URL",
    secret_env=SIGN_VAR,
    events=("wait.opened",),
    timeout_s=2.0,
)


@app.workflow(notify=[hook])
async def ask(ctx: Context) -> str:
    await ctx.approval("go", prompt="Go ahead?")
    return "done"
