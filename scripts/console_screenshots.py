"""Photograph every page of the web console, in both themes, for docs/console.md.

    .venv/bin/python scripts/console_screenshots.py

Real runs on a real server: Tether serves the bundled examples (with a small DAG and a human
task added here) on loopback over PostgreSQL (TETHER_DATABASE_URL, else an embedded one in a
temporary directory); Debian's chromium (scripts/ensure-chromium; never `playwright install`)
driven by Playwright signs in and visits each page. The PNGs go to docs/console-screens/.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page, async_playwright, expect
from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.console.browser import ARGS, SCREENS, ensure_chromium  # noqa: E402
from tests.e2e.conftest import on_loopback  # noqa: E402

from tether.app import create_app  # noqa: E402
from tether.database_url import database_url  # noqa: E402
from tether.examples import app  # noqa: E402
from tether.runtime.context import Context  # noqa: E402
from tether.runtime.operations import Operations  # noqa: E402
from tether.security import new_token  # noqa: E402
from tether.settings import Settings  # noqa: E402

WAIT_MS = 15_000
WIDTH = 1280

RELEASE = """
name: release
steps:
  - name: build
    command: "echo built"
  - name: test
    command: "echo tested"
    depends: build
  - name: docs
    command: "echo documented"
    depends: build
  - name: publish
    command: "echo publishing $TICKET"
    depends: [test, docs]
    approval:
      prompt: Publish the release?
      input: [TICKET]
      required: [TICKET]
  - name: announce
    command: "echo announced"
    depends: publish
"""
app.dag(RELEASE)


class Expense(BaseModel):
    amount: float
    category: str
    receipt_attached: bool


class NoArgs(BaseModel):
    pass


@app.workflow()
async def expense_claim(ctx: Context, args: NoArgs) -> dict[str, Any]:
    """A human task: a person fills in a typed form."""
    done = await ctx.human_task("check", form=Expense, prompt="Check the claim and fill it in")
    return {"checked": getattr(done, "values", None) is not None}


@contextlib.contextmanager
def database() -> Iterator[str]:
    """TETHER_DATABASE_URL's database, else an embedded server in a temporary directory."""
    with (
        tempfile.TemporaryDirectory(prefix="tether-console-shots-", dir="/tmp") as tmp,
        database_url(Settings.from_env(data_dir=Path(tmp))) as dsn,
    ):
        yield dsn


async def parked(ops: Operations, run_id: str) -> None:
    await ops.wait_until(run_id, lambda r: r.status == "waiting" and bool(r.waits), timeout=30)


async def make_runs(ops: Operations) -> dict[str, str]:
    """The runs the pictures show, each started by a named principal; their ids by role."""
    ids: dict[str, str] = {}
    done = await ops.start("long_job", {"steps": 3, "pause_seconds": 0.4}, by="alice")
    failing = await ops.start("failing_job", {}, by="bob")
    review = await ops.start(
        "document_review", {"title": "Q3 plan", "body": "Ship it on Monday."}, by="carol"
    )
    answered = await ops.start(
        "document_review", {"title": "Q2 notes", "body": "Done."}, by="alice"
    )
    ids["completed"] = done.execution.id
    ids["failed"] = failing.execution.id
    ids["waiting"] = review.execution.id
    await parked(ops, answered.execution.id)
    key = (await ops.get(answered.execution.id)).current.waits[0]["key"]
    await ops.answer(
        answered.execution.id, key, {"decision": "approve", "ticket": "CHG-7"}, by="dave"
    )
    release = await ops.start("release", {}, by="dave")
    ids["dag"] = release.execution.id
    claim = await ops.start("expense_claim", {}, by="erin")
    ids["task"] = claim.execution.id
    stale = await ops.start(
        "document_review", {"title": "Hiring plan", "body": "Two roles."}, by="bob"
    )
    ids["stale"] = stale.execution.id
    for run_id in (ids["waiting"], ids["dag"], ids["task"], ids["stale"]):
        await parked(ops, run_id)
    for run_id in (ids["completed"], ids["failed"], answered.execution.id):
        await ops.wait_for_end(run_id, timeout=30)
    return ids


async def signed_in(browser: Browser, base: str, token: str, scheme: Any) -> Page:
    context = await browser.new_context(
        viewport={"width": WIDTH, "height": 900}, color_scheme=scheme
    )
    page = await context.new_page()
    await page.goto(f"{base}/runs")
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    return page


async def shoot(page: Page, name: str) -> None:
    await page.screenshot(path=str(SCREENS / f"{name}.png"), full_page=True)
    print(f"docs/console-screens/{name}.png")


async def photograph(browser: Browser, base: str, token: str, ops: Operations) -> None:
    ids = await make_runs(ops)
    SCREENS.mkdir(parents=True, exist_ok=True)

    anonymous = await browser.new_page(viewport={"width": WIDTH, "height": 700})
    await anonymous.goto(f"{base}/sign-in")
    await shoot(anonymous, "sign-in")
    await anonymous.context.close()

    for scheme, suffix in (("light", ""), ("dark", "-dark")):
        page = await signed_in(browser, base, token, scheme)
        await shoot(page, f"runs{suffix}")
        await page.goto(f"{base}/runs/{ids['waiting']}")
        await expect(page.locator("body[data-live=open]")).to_be_attached(timeout=WAIT_MS)
        await shoot(page, f"run-waiting{suffix}")
        await page.goto(f"{base}/runs/{ids['dag']}")
        await shoot(page, f"run-dag{suffix}")
        await page.goto(f"{base}/inbox")
        await shoot(page, f"inbox{suffix}")
        await page.context.close()

    page = await signed_in(browser, base, token, "light")
    await page.get_by_label("Started by").fill("bob")
    await page.get_by_role("button", name="Apply").click()
    await expect(page.get_by_label("Started by")).to_have_value("bob")
    await shoot(page, "runs-filtered")
    for name in ("completed", "failed"):
        await page.goto(f"{base}/runs/{ids[name]}")
        await shoot(page, f"run-{name}")
    await page.goto(f"{base}/runs/{ids['dag']}/dag")
    await shoot(page, "dag")
    await page.goto(f"{base}/runs/{ids['task']}")
    await page.get_by_label("Amount (required)").fill("42.50")
    await page.get_by_label("Category (required)").fill("travel")
    await shoot(page, "human-task")
    await page.goto(f"{base}/runs/{ids['waiting']}")
    await page.get_by_role("button", name="Approve").click()  # without its required ticket
    await expect(page.get_by_role("alert")).to_be_visible()
    await shoot(page, "run-answer-refused")

    stale = await page.context.browser.new_context(  # type: ignore[union-attr]
        viewport={"width": WIDTH, "height": 900}, java_script_enabled=False
    )
    await stale.add_cookies(await page.context.cookies())
    form = await stale.new_page()
    await form.goto(f"{base}/runs/{ids['stale']}")
    key = (await ops.get(ids["stale"])).current.waits[0]["key"]
    await ops.answer(ids["stale"], key, {"decision": "approve", "ticket": "CHG-9"}, by="alice")
    await form.get_by_label("ticket (required)").fill("CHG-10")
    await form.get_by_role("button", name="Approve").click()
    await expect(form.get_by_role("alert")).to_contain_text("stale")
    await shoot(form, "stale-form")
    await stale.close()

    await page.goto(f"{base}/runs/{ids['completed']}")
    watch = await page.context.new_page()  # a run that finishes while its page is open
    await watch.goto(f"{base}/runs/{ids['waiting']}")
    await expect(watch.locator("body[data-live=open]")).to_be_attached(timeout=WAIT_MS)
    key = (await ops.get(ids["waiting"])).current.waits[0]["key"]
    await ops.answer(ids["waiting"], key, {"decision": "approve", "ticket": "CHG-8"}, by="carol")
    await expect(watch.locator("#run-status")).to_contain_text("completed", timeout=WAIT_MS)
    await shoot(watch, "run-completed-live")
    await page.context.close()


@contextlib.asynccontextmanager
async def console(dsn: str, token_entry: str) -> AsyncIterator[tuple[str, Operations]]:
    settings = Settings(
        database_url=dsn,
        console=True,
        poll_s=0.05,
        janitor_interval_s=3600.0,
        state_key="console-screenshots",
        api_tokens=token_entry,
    )
    web = create_app(app, settings, dsn)
    async with on_loopback(web, "/console") as base:
        yield base, web.state.runtime.ops


async def main() -> None:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    token, entry = new_token("alice", "operator", None)
    executable = ensure_chromium()
    with database() as dsn:
        async with console(dsn, entry) as (base, ops), async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=executable, args=ARGS)
            try:
                await photograph(browser, base, token, ops)
            finally:
                await browser.close()


if __name__ == "__main__":
    asyncio.run(main())
