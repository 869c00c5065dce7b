"""The console in a real headless Chromium, one browser for the module:
sign in, find a waiting run, answer an approval with a required input (first without it: the
error shows and nothing changes), watch the run finish on its open page without reloading;
a human task form with every scalar type; a reader cannot answer; another tenant's run is not
found; a stale form; keyboard-only answering; axe-core finds no serious violation. Each page
is photographed (into docs/console-screens/ for docs/console.md with TETHER_CONSOLE_SCREENS=1)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.console.browser import ARGS, SCREENS, axe_violations, ensure_axe, ensure_chromium
from tests.console.conftest import Site

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]
WAIT_MS = 10_000
SCRATCH = Path(tempfile.gettempdir()) / "tether-console-screens"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    executable = ensure_chromium()
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def signed_in(browser: Browser, site: Site, who: str, **options: Any) -> Page:
    """A new browser context signed in as `who` through the sign-in page."""
    context = await browser.new_context(**options)
    page = await context.new_page()
    await page.goto(site.url("/runs"))
    await expect(page).to_have_url(re.compile(r"/console/sign-in"))
    await page.get_by_label("API token").fill(site.tokens[who])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    return page


def shot(name: str) -> str:
    """Where a page's screenshot goes: docs/console-screens/ with TETHER_CONSOLE_SCREENS=1
    (to refresh docs/console.md's pictures), else a scratch directory (the suite must not
    change tracked files on every run)."""
    folder = SCREENS if os.environ.get("TETHER_CONSOLE_SCREENS") == "1" else SCRATCH
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / f"{name}.png")


async def test_answer_an_approval_and_watch_the_run_finish(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    page = await signed_in(browser, site, "operator")
    await page.get_by_label("Waiting for me").check()
    await page.get_by_role("button", name="Apply").click()
    await page.get_by_role("link", name=run_id).click()
    await expect(page.get_by_role("heading", name=f"Run {run_id}")).to_be_visible()
    await page.screenshot(path=shot("run-waiting"), full_page=True)
    watcher = await page.context.new_page()  # the run page, left open
    await watcher.goto(site.url(f"/runs/{run_id}"))
    await expect(watcher.locator("body[data-live=open]")).to_be_attached(timeout=WAIT_MS)
    await watcher.evaluate("window.__notReloaded = true")

    await page.get_by_role("button", name="Approve").click()  # without the required ticket
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("ticket: required to approve")
    await expect(page.get_by_text("ticket (required)")).to_be_visible()
    await page.screenshot(path=shot("run-answer-refused"), full_page=True)
    assert (await site.status(run_id)) == "waiting"  # nothing changed

    await page.get_by_label("ticket (required)").fill("T-42")
    await page.get_by_role("button", name="Approve").click()
    await expect(page.get_by_text("Answer accepted.")).to_be_visible()
    status = watcher.locator("#run-status")
    await expect(status).to_contain_text("completed", timeout=WAIT_MS)
    assert await watcher.evaluate("window.__notReloaded === true")
    await expect(watcher.locator("#run-result")).to_contain_text("T-42")
    await watcher.screenshot(path=shot("run-completed"), full_page=True)
    await page.context.close()


async def test_a_lost_stream_is_shown(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    page = await signed_in(browser, site, "operator")
    await page.route("**/events", lambda route: route.abort())  # the stream cannot connect
    await page.goto(site.url(f"/runs/{run_id}"))
    banner = page.locator("#conn")
    await expect(banner).to_be_visible()
    await expect(banner).to_contain_text("Connection lost")
    await page.unroute("**/events")  # the browser reconnects by itself: the banner goes
    await expect(banner).to_be_hidden(timeout=WAIT_MS)
    await page.context.close()


async def test_human_task_form_with_every_scalar_type(browser: Browser, site: Site) -> None:
    run_id = await site.start("form")
    page = await signed_in(browser, site, "operator")
    await page.goto(site.url(f"/runs/{run_id}"))
    await page.get_by_label("Title (required)").fill("Quarterly")
    await page.get_by_label("Count (required)").fill("3")
    await page.get_by_label("Ratio (required)").fill("2.5")
    await page.get_by_label("Ok (required)").check()
    await page.screenshot(path=shot("human-task"), full_page=True)
    await page.get_by_role("button", name="Complete").click()
    await expect(page.locator("#run-status")).to_contain_text("completed", timeout=WAIT_MS)
    output = await site.output(run_id)
    assert output == {"values": {"title": "Quarterly", "count": 3, "ratio": 2.5, "ok": True}}
    await page.context.close()


async def test_reader_sees_but_cannot_answer(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    page = await signed_in(browser, site, "reader")
    await page.goto(site.url(f"/runs/{run_id}"))
    await expect(page.get_by_text("You can read this wait but not answer it.")).to_be_visible()
    assert await page.get_by_role("button", name="Approve").count() == 0
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    key = f"{run_id}:approval:publish:1"
    reply = await page.request.post(
        site.url(f"/runs/{run_id}/answer"),
        form={"csrf": csrf or "", "key": key, "decision": "approve", "f.ticket": "T-1"},
    )
    assert reply.status == 403
    assert (await site.status(run_id)) == "waiting"
    await page.goto(site.url("/inbox"))
    await page.screenshot(path=shot("inbox-reader"), full_page=True)
    await page.context.close()


async def test_another_tenants_run_is_not_found(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    page = await signed_in(browser, site, "other")
    reply = await page.goto(site.url(f"/runs/{run_id}"))
    assert reply is not None and reply.status == 404
    await expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    assert run_id not in await (await page.goto(site.url("/runs?status=waiting"))).text()  # type: ignore[union-attr]
    await page.context.close()


async def test_a_stale_form_says_so_and_changes_nothing(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    first = await signed_in(browser, site, "operator")
    second = await signed_in(browser, site, "operator", java_script_enabled=False)
    await second.goto(site.url(f"/runs/{run_id}"))  # its form, left open without JavaScript
    await first.goto(site.url(f"/runs/{run_id}"))
    await first.get_by_label("ticket (required)").fill("FIRST")
    await first.get_by_role("button", name="Approve").click()
    await expect(first.get_by_text("Answer accepted.")).to_be_visible()

    await second.get_by_label("ticket (required)").fill("SECOND")
    await second.get_by_role("button", name="Reject").click()
    await expect(second.get_by_role("alert")).to_contain_text("This form is stale")
    await second.screenshot(path=shot("stale-form"), full_page=True)
    await expect(first.locator("#run-status")).to_contain_text("completed", timeout=WAIT_MS)
    assert (await site.output(run_id))["inputs"]["ticket"] == "FIRST"
    await first.context.close()
    await second.context.close()


async def _tab_to(page: Page, selector: str, limit: int = 60) -> None:
    target = page.locator(selector)
    for _ in range(limit):
        await page.keyboard.press("Tab")
        if await target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"{selector} is not reachable with Tab")


async def test_keyboard_only_answering(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    page = await signed_in(browser, site, "operator")
    await page.goto(site.url(f"/runs/{run_id}"))
    await _tab_to(page, "input[name='f.ticket']")
    await page.keyboard.type("KB-1")
    await _tab_to(page, "button[value=approve]")
    await page.keyboard.press("Enter")
    await expect(page.get_by_text("Answer accepted.")).to_be_visible()
    await expect(page.locator("#run-status")).to_contain_text("completed", timeout=WAIT_MS)
    await page.context.close()


async def test_dag_page_draws_each_step_with_its_status(browser: Browser, site: Site) -> None:
    run_id = await site.start("gated")
    page = await signed_in(browser, site, "operator")
    await page.goto(site.url(f"/runs/{run_id}"))
    await page.get_by_role("link", name="DAG graph").click()
    graph = page.locator("svg.dag")
    await expect(graph.locator("g.node", has_text="build")).to_contain_text("succeeded")
    await expect(graph.locator("g.node", has_text="publish")).to_contain_text("waiting")
    await expect(graph.locator("g.node", has_text="after")).to_contain_text("not started")
    assert await graph.locator("path.edge").count() == 2
    await page.screenshot(path=shot("dag"), full_page=True)

    await page.goto(site.url(f"/runs/{run_id}"))  # the DAG's approval, answered here
    await page.get_by_label("TICKET (required)").fill("D-7")
    await page.get_by_role("button", name="Approve").click()
    await expect(page.locator("#run-status")).to_contain_text("completed", timeout=WAIT_MS)
    await page.goto(site.url(f"/runs/{run_id}/dag"))
    await expect(graph.locator("g.node", has_text="after")).to_contain_text("succeeded")
    await page.context.close()


@pytest.mark.upstream(
    "axe-core's rules are those of the version tests/node/package-lock.json pins. If that lock "
    "changed (`make lock`), a new or stricter rule may flag a page that passed before: read each "
    "violation's help text and fix the page; keep the previous axe-core in the lock only until "
    "then. If the lock did not change, the page did."
)
async def test_pages_have_no_serious_accessibility_violations(browser: Browser, site: Site) -> None:
    axe = ensure_axe()
    run_id = await site.start("gate")
    context = await browser.new_context(bypass_csp=True)  # to inject axe-core
    page = await context.new_page()
    await page.goto(site.url("/sign-in"))
    await page.screenshot(path=shot("sign-in"), full_page=True)
    found = {"sign-in": await axe_violations(page, axe)}
    await page.get_by_label("API token").fill(site.tokens["operator"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    await page.screenshot(path=shot("runs"), full_page=True)
    found["runs"] = await axe_violations(page, axe)
    dag_run = await site.start("gated")
    pages = (("run", f"/runs/{run_id}"), ("dag", f"/runs/{dag_run}/dag"), ("inbox", "/inbox"))
    for name, path in pages:
        await page.goto(site.url(path))
        found[name] = await axe_violations(page, axe)
    await page.screenshot(path=shot("inbox"), full_page=True)
    await page.goto(site.url(f"/runs/{run_id}"))
    await page.get_by_role("button", name="Approve").click()
    found["run-with-error"] = await axe_violations(page, axe)
    assert {k: v for k, v in found.items() if v} == {}
    await context.close()
