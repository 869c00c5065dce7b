"""The console's pages over plain HTTP: the runs list's filters and pages, who started a run and
what it does now, the run page's timeline a bounded page at a time, the inbox and its count,
and the theme choice."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.console.conftest import Site
from tests.console.test_http import _field, _signed_in
from tether.console import pages
from tether.runtime import timeline
from tether.runtime.operations import Operations

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def _run_ids(html: str) -> list[str]:
    return re.findall(r'<a href="/console/runs/(ex_[a-z0-9]+)"><code>', html)


async def test_runs_filters_stay_in_every_page_link(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: started-by and text filters narrow the list, and the next page keeps them."""
    monkeypatch.setattr(pages, "PAGE", 2)
    mine = [(await site.ops.start("sig", {}, by="ann")).execution.id for _ in range(3)]
    other = (await site.ops.start("sig", {}, by="ben")).execution.id
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        first = await http.get(site.url("/runs"), params={"by": "ann", "workflow": "sig"})
        assert first.status_code == 200
        assert _run_ids(first.text) == mine[::-1][:2]
        older = re.search(r'<a href="([^"]+)">Older runs</a>', first.text)
        assert older is not None
        link = older.group(1).replace("&amp;", "&")
        assert "by=ann" in link and "workflow=sig" in link
        second = await http.get(site.base + link)
        assert _run_ids(second.text) == [mine[0]]
        assert 'value="ann"' in second.text  # the form still shows the filter
        assert "Newest runs" in second.text

        part = other[3:12]  # a run's business id is its id: a piece of it finds it
        found = await http.get(site.url("/runs"), params={"q": part})
        assert _run_ids(found.text) == [other]
        whole = await http.get(site.url("/runs"), params={"q": other})
        assert whole.status_code == 303 and whole.headers["location"].endswith(other)
        none = await http.get(site.url("/runs"), params={"by": "nobody"})
        assert "No runs match." in none.text


async def test_the_runs_list_says_who_started_a_run_and_what_it_does_now(site: Site) -> None:
    """Our choice: a live run's progress line shows; an ended run's last one was stale."""
    run_id = (await site.ops.start("progress", {}, by="cora")).execution.id
    view = await site.ops.wait_until(run_id, lambda r: bool(r.waits), timeout=10)
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        listed = await http.get(site.url("/runs"), params={"by": "cora"})
        row = listed.text.split(run_id, 1)[1].split("</tr>", 1)[0]
        assert "waiting for the go-ahead" in row and ">cora<" in row
        page = await http.get(site.url(f"/runs/{run_id}"))
        assert "waiting for the go-ahead" in page.text

        key = view.current.waits[0]["key"]
        await site.ops.answer(run_id, key, {"decision": "approve"}, by="dan")
        await site.ops.wait_for_end(run_id, timeout=10)
        assert (await site.ops.get(run_id)).current.details == "waiting for the go-ahead"
        listed = await http.get(site.url("/runs"), params={"by": "cora"})
        row = listed.text.split(run_id, 1)[1].split("</tr>", 1)[0]
        assert "completed" in row and "waiting for the go-ahead" not in row
        page = await http.get(site.url(f"/runs/{run_id}"))
        assert "waiting for the go-ahead" not in page.text
        assert "approval go answered" in page.text and "by dan" in page.text


async def test_a_long_history_is_shown_a_bounded_page_at_a_time(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: the run page reads one page of its timeline however long the history, and
    `Show earlier entries` reaches every entry."""
    monkeypatch.setattr(timeline, "PAGE", 5)
    run_id = await site.start("gate")
    for n in range(12):
        await site.ops.signal(run_id, "poke", {"n": n})

    async def whole(self: Operations, execution_id: str) -> None:
        raise AssertionError("the run page read a whole history")

    monkeypatch.setattr(Operations, "history", whole)
    monkeypatch.setattr(Operations, "steps", whole)
    seen: list[str] = []
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        url = site.url(f"/runs/{run_id}")
        for _ in range(10):
            page = await http.get(url)
            assert page.status_code == 200
            entries = re.findall(r'<li class="tl tl-[a-z]+">', page.text)
            assert 1 <= len(entries) <= 6
            seen = re.findall(r"<strong>(signal poke|started)</strong>", page.text) + seen
            earlier = re.search(r'href="([^"]+)">Show earlier entries', page.text)
            if earlier is None:
                break
            url = site.base + earlier.group(1).replace("&amp;", "&").split("#")[0]
        else:
            raise AssertionError("the pages never reached the run's start")
    assert seen == ["started"] + ["signal poke"] * 12


async def test_the_inbox_is_newest_first_and_counted_in_the_nav(site: Site) -> None:
    """Our choice: the nav counts the open waits the visitor may answer (its tenant's)."""
    older = await site.start("gate")
    newer = await site.start("sig")
    async with httpx.AsyncClient() as http, httpx.AsyncClient() as other:
        await _signed_in(http, site, "operator")
        await _signed_in(other, site, "other")
        inbox = await http.get(site.url("/inbox"))
        assert inbox.text.index(newer) < inbox.text.index(older)
        count = re.search(r'id="nav-inbox-count">(\d+)<', inbox.text)
        assert count is not None and int(count.group(1)) >= 2
        listed = re.search(r'data-count="(\d+)"', inbox.text)
        assert listed is not None and listed.group(1) == count.group(1)
        runs = await http.get(site.url("/runs"))
        assert f'id="nav-inbox-count">{count.group(1)}<' in runs.text
        theirs = await other.get(site.url("/runs"))  # another tenant: none of these
        assert 'id="nav-inbox-count">0<' in theirs.text


async def test_the_inbox_lists_an_approval_decided_by_votes_to_its_approvers_only(
    site: Site,
) -> None:
    """Our choice: an approval with named approvers is in their inbox and counted in their nav,
    and not in the inbox of anyone else of the tenant; other waits are in everyone's."""
    voted = await site.start("vote")
    plain = await site.start("gate")
    async with httpx.AsyncClient() as op, httpx.AsyncClient() as alice:
        await _signed_in(op, site, "operator")
        await _signed_in(alice, site, "alice")
        theirs = (await alice.get(site.url("/inbox"))).text
        mine = (await op.get(site.url("/inbox"))).text
        for_me = (await op.get(site.url("/runs?waiting=1"))).text
        for_them = (await alice.get(site.url("/runs?waiting=1"))).text
    assert voted in theirs and plain in theirs
    assert plain in mine and voted not in mine
    assert voted in for_them and voted not in for_me and plain in for_me
    counts = [re.search(r'id="nav-inbox-count">(\d+)<', page) for page in (theirs, mine)]
    assert all(counts)
    assert int(counts[0].group(1)) == int(counts[1].group(1)) + 1  # type: ignore[union-attr]


async def test_a_chosen_theme_is_remembered_and_a_bad_one_changes_nothing(site: Site) -> None:
    """Our choice: the theme buttons work without JavaScript (a form, a cookie)."""
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        page = await http.get(site.url("/runs"))
        assert "data-theme" not in page.text.split(">", 2)[1]  # the system's, by default
        csrf = _field(page.text, "csrf")
        form = {"csrf": csrf, "theme": "dark", "next": "/console/runs?status=waiting"}
        chosen = await http.post(site.url("/theme"), data=form)
        assert chosen.status_code == 303
        assert chosen.headers["location"] == "/console/runs?status=waiting"
        page = await http.get(site.url("/runs"))
        assert '<html lang="en" data-theme="dark">' in page.text
        assert 'value="dark" aria-pressed="true"' in page.text
        bad = await http.post(site.url("/theme"), data={**form, "theme": "neon"})
        forged = await http.post(site.url("/theme"), data={**form, "csrf": "0" * 40})
        assert (bad.status_code, forged.status_code) == (400, 403)
        page = await http.get(site.url("/runs"))
        assert 'data-theme="dark"' in page.text  # neither changed it
        await http.post(site.url("/theme"), data={**form, "theme": "system"})
        page = await http.get(site.url("/runs"))
        assert "data-theme" not in page.text.split(">", 2)[1]


async def test_a_step_that_succeeded_on_its_second_try_shows_two_attempts(site: Site) -> None:
    """Our choice: a step's record keeps its failed tries, so the timeline can count them."""
    run_id = (await site.ops.start("flaky", {})).execution.id
    await site.ops.wait_for_end(run_id, timeout=10)
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        page = await http.get(site.url(f"/runs/{run_id}"))
    entry = page.text.split("<strong>step call</strong>", 1)[1].split("</li>", 1)[0]
    assert "2 attempts" in entry


async def test_the_theme_form_on_a_page_sent_for_a_form_returns_to_the_page_it_came_from(
    site: Site,
) -> None:
    """Our choice: a page answering a POST has no address of its own to come back to."""
    run_id = await site.start("gate")
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        page = await http.get(site.url(f"/runs/{run_id}"))
        form = {"csrf": _field(page.text, "csrf"), "key": _field(page.text, "key")}
        refused = await http.post(  # approve without the required ticket
            site.url(f"/runs/{run_id}/answer"),
            data={**form, "decision": "approve"},
            headers={"referer": site.url(f"/runs/{run_id}")},
        )
        assert refused.status_code == 422
        assert f'name="next" value="/console/runs/{run_id}"' in refused.text
        blind = await http.post(
            site.url(f"/runs/{run_id}/answer"), data={**form, "decision": "approve"}
        )
        assert 'name="next" value="/console/runs"' in blind.text
