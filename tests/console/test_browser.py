"""The console in a real headless Chromium, one browser for the module:
sign in, find a waiting run, answer an approval with a required input (first without it: the
error shows and nothing changes), watch the run finish on its open page without reloading
(its timeline too); a human task form with every scalar type; a reader cannot answer; another
tenant's run is not found; a stale form; keyboard-only answering and filtering; the theme
switch; axe-core finds no serious violation on any page in either theme. Each page is
photographed into a scratch directory (docs/console.md's pictures come from
scripts/console_screenshots.py)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.console.browser import ARGS, axe_violations, ensure_axe, ensure_chromium
from tests.console.conftest import Site
from tether.runtime.links import LinkMinter

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
    """Where a page's screenshot goes: a scratch directory (the suite must not change tracked
    files on every run; scripts/console_screenshots.py makes the docs' pictures)."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    return str(SCRATCH / f"{name}.png")


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
    timeline = watcher.locator("#run-timeline")
    await expect(timeline).to_contain_text("approval publish answered by operator: approve")
    await expect(timeline).to_contain_text("ended completed")
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


async def test_keyboard_only_filtering_and_theme(browser: Browser, site: Site) -> None:
    run_id = await site.start("gate")
    page = await signed_in(browser, site, "operator", color_scheme="light")
    await _tab_to(page, "#f-q")
    await page.keyboard.type(run_id[3:14])
    await page.keyboard.press("Enter")  # submits the filters
    await expect(page).to_have_url(re.compile(r"\?q="))
    await expect(page.locator("table.runs tbody tr")).to_have_count(1)
    await expect(page.get_by_label("Run id or business id")).to_have_value(run_id[3:14])
    await _tab_to(page, "form.theme button[value=dark]")
    await page.keyboard.press("Enter")
    await expect(page.locator("html[data-theme=dark]")).to_be_attached()
    await page.reload()  # remembered
    await expect(page.locator("html[data-theme=dark]")).to_be_attached()
    await expect(page.locator("form.theme button[value=dark]")).to_have_attribute(
        "aria-pressed", "true"
    )
    background = "getComputedStyle(document.body).backgroundColor"
    assert await page.evaluate(background) == "rgb(20, 24, 29)"
    await page.locator("form.theme button[value=system]").click()
    await expect(page.locator("html[data-theme]")).to_have_count(0)
    assert await page.evaluate(background) == "rgb(255, 255, 255)"  # the system's: light
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
    dag_run = await site.start("gated")
    done = await site.start("progress")
    key = (await site.ops.get(done)).current.waits[0]["key"]
    await site.ops.answer(done, key, {"decision": "approve"}, by="operator")
    await site.ops.wait_for_end(done, timeout=10)
    found: dict[str, Any] = {}
    for scheme in ("light", "dark"):
        # bypass_csp: to inject axe-core; the system's colour scheme picks the theme
        context = await browser.new_context(bypass_csp=True, color_scheme=scheme)
        page = await context.new_page()
        await page.goto(site.url("/sign-in"))
        await page.screenshot(path=shot(f"sign-in-{scheme}"), full_page=True)
        found[f"sign-in {scheme}"] = await axe_violations(page, axe)
        await page.get_by_label("API token").fill(site.tokens["operator"])
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        pages = (
            ("runs", "/runs"),
            ("runs filtered", "/runs?status=waiting&by=nobody"),
            ("run", f"/runs/{run_id}"),
            ("run ended", f"/runs/{done}"),
            ("dag run", f"/runs/{dag_run}"),
            ("dag", f"/runs/{dag_run}/dag"),
            ("inbox", "/inbox"),
        )
        for name, path in pages:
            await page.goto(site.url(path))
            await page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")
            await page.screenshot(path=shot(f"{name.replace(' ', '-')}-{scheme}"), full_page=True)
            found[f"{name} {scheme}"] = await axe_violations(page, axe)
        await page.goto(site.url(f"/runs/{run_id}"))
        await page.get_by_role("button", name="Approve").click()
        found[f"run-with-error {scheme}"] = await axe_violations(page, axe)
        # the other theme chosen by hand, over this system's preference
        other = "light" if scheme == "dark" else "dark"
        await page.locator(f"form.theme button[value={other}]").click()
        await expect(page.locator(f"html[data-theme={other}]")).to_be_attached()
        found[f"run-with-error {other} chosen"] = await axe_violations(page, axe)
        await page.goto(site.url("/runs"))
        found[f"runs {other} chosen"] = await axe_violations(page, axe)
        await context.close()
        found |= await _link_pages(browser, site, axe, scheme)
    assert {k: v for k, v in found.items() if v} == {}


async def _link_pages(
    browser: Browser, site: Site, axe: str, scheme: Literal["light", "dark"]
) -> dict[str, Any]:
    """axe-core over an approval link's pages, opened with no sign-in: its confirmation form
    (with its required input), the page after deciding, and a used link's page."""
    run_id = await site.start("gate")
    wait = (await site.ops.get(run_id)).current.waits[0]
    url = LinkMinter("test-key", site.base).links(wait, "alice")["approve"]
    context = await browser.new_context(bypass_csp=True, color_scheme=scheme)
    page = await context.new_page()
    found: dict[str, Any] = {}
    await page.goto(url)
    found[f"link {scheme}"] = await axe_violations(page, axe)
    await page.get_by_label("ticket").fill("CHG-1")
    await page.get_by_role("button", name="Approve as alice").click()
    await expect(page.get_by_role("status")).to_contain_text("approved by alice")
    await page.screenshot(path=shot(f"link-done-{scheme}"), full_page=True)
    found[f"link done {scheme}"] = await axe_violations(page, axe)
    await page.goto(url)
    await expect(page.get_by_role("alert")).to_contain_text("only once")
    found[f"link used {scheme}"] = await axe_violations(page, axe)
    await context.close()
    return found
