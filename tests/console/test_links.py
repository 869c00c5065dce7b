"""Approval links over real HTTP against a real server and PostgreSQL: a GET only shows the
confirmation page; the POST from that page decides once, as the link's person, audited; a
second POST, an expired, tampered or stale link, and a POST without the page's form token all
change nothing (our choice: docs/answering-waits.md, docs/security.md)."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from tests.console.conftest import Site
from tether.console.links import COOKIE, form_token
from tether.runtime import links, votes
from tether.runtime.links import LinkMinter

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def minter(site: Site) -> LinkMinter:
    return LinkMinter("test-key", site.base)  # the console site's TETHER_STATE_KEY


async def wait_of(site: Site, run_id: str) -> dict[str, Any]:
    (wait,) = (await site.ops.get(run_id)).current.waits
    return wait


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


async def version(site: Site, run_id: str) -> int:
    return (await site.ops.get(run_id, follow_chain=False)).requested.version


async def test_a_links_get_shows_a_confirm_form_and_changes_nothing(site: Site) -> None:
    """Link scanners and previews fetch links: a GET never decides, however often."""
    run_id = await site.start("gate")
    before = await version(site, run_id)
    url = minter(site).links(await wait_of(site, run_id), "alice")["approve"]
    async with httpx.AsyncClient() as http:
        pages = [await http.get(url) for _ in range(3)]
    for page in pages:
        assert page.status_code == 200
        assert 'method="post"' in page.text and "Approve as alice" in page.text
        assert 'name="f.ticket"' in page.text  # the approval's required input
        assert page.headers["cache-control"] == "no-store"
        assert page.headers["referrer-policy"] == "same-origin"  # the link stays on this site
    cookie = pages[0].headers["set-cookie"].lower()
    assert COOKIE in cookie and "httponly" in cookie and "path=/console/links" in cookie
    assert await site.status(run_id) == "waiting"
    assert await version(site, run_id) == before


async def test_the_post_decides_once_as_the_links_person_and_is_audited(site: Site) -> None:
    """The POST from the page answers as the link's person; the same POST again says the link
    was used and changes nothing; both leave an audit row naming the person."""
    run_id = await site.start("gate")
    url = minter(site).links(await wait_of(site, run_id), "alice")["approve"]
    async with httpx.AsyncClient() as http:
        page = await http.get(url)
        form = {"csrf": csrf_of(page.text), "f.ticket": "CHG-7"}
        done = await http.post(url, data=form)
        output = await site.output(run_id)
        again = await http.post(url, data=form)
        shown_again = await http.get(url)
    assert done.status_code == 200 and "approved by alice" in done.text
    assert output == {"decision": "approved", "inputs": {"ticket": "CHG-7"}}
    assert again.status_code == 409 and "has been used" in again.text
    assert shown_again.status_code == 409 and "has been used" in shown_again.text
    history = await site.ops.history(run_id)
    assert [e.data["by"] for e in history if e.type == "answer"] == ["alice"]
    rows = await site.audit_rows(run_id, 2)
    assert [(r["principal"], r["surface"], r["method"], r["outcome"]) for r in rows] == [
        ("alice", "console", "links/approve", "ok"),
        ("alice", "console", "links/approve", "refused"),
    ]


async def test_a_post_without_the_pages_form_token_is_refused(site: Site) -> None:
    """CSRF: the token is bound to the link and to the browser that loaded its page: none, a
    wrong one, or the page's token sent from another browser, are each refused (403)."""
    run_id = await site.start("twice")
    url = minter(site).links(await wait_of(site, run_id), "alice")["approve"]
    async with httpx.AsyncClient() as http, httpx.AsyncClient() as elsewhere:
        page = await http.get(url)
        token = csrf_of(page.text)
        replies = [
            await http.post(url, data={}),
            await http.post(url, data={"csrf": "0" * 40}),
            await elsewhere.post(url, data={"csrf": token}),
        ]
        assert await site.status(run_id) == "waiting"
        accepted = await http.post(url, data={"csrf": token})
    assert [r.status_code for r in replies] == [403, 403, 403]
    assert all("did not come from the link" in r.text for r in replies)
    assert accepted.status_code == 200


async def test_an_expired_link_is_refused(site: Site) -> None:
    run_id = await site.start("twice")
    wait = await wait_of(site, run_id)
    made = minter(site).mint(wait, "alice", "approve", now=time.time() - 120, ttl_s=60)
    url = minter(site).url(made)
    async with httpx.AsyncClient(cookies={COOKIE: "b" * 32}) as http:
        shown = await http.get(url)
        token = form_token(links.link_key(b"test-key"), made, "b" * 32)
        posted = await http.post(url, data={"csrf": token})
    assert (shown.status_code, posted.status_code) == (410, 410)
    assert "expired" in shown.text and "expired" in posted.text
    assert await site.status(run_id) == "waiting"


async def test_a_tampered_link_is_refused(site: Site) -> None:
    """Another decision or person spliced into a link breaks its signature."""
    run_id = await site.start("twice")
    wait = await wait_of(site, run_id)
    made = minter(site).mint(wait, "alice", "approve")
    swapped = links.sign(b"not the server's key", wait["key"], "reject", "mallory", made.expires)
    forged = f"{swapped.token.split('.')[0]}.{made.token.split('.')[1]}"
    url = f"{site.base}{links.PATH}/{forged}"
    async with httpx.AsyncClient(cookies={COOKIE: "b" * 32}) as http:
        shown = await http.get(url)
        posted = await http.post(url, data={"csrf": "0" * 40})
    assert (shown.status_code, posted.status_code) == (403, 403)
    assert "not valid" in shown.text and "not valid" in posted.text
    assert await site.status(run_id) == "waiting"


async def test_a_stale_link_says_the_request_moved_on_and_changes_nothing(site: Site) -> None:
    """Once the wait it names is answered (here by an operator's answer), the link's
    page and its POST say so; the run's next wait of the same name is left alone."""
    run_id = await site.start("twice")
    first = await wait_of(site, run_id)
    url = minter(site).links(first, "alice")["approve"]
    async with httpx.AsyncClient() as http:
        page = await http.get(url)
        await site.ops.answer(run_id, first["key"], {"decision": "approve"}, by="operator")
        nxt = await site.ops.wait_until(
            run_id,
            lambda r: r.status == "waiting" and r.waits[0]["key"] != first["key"],
            timeout=10,
        )
        posted = await http.post(url, data={"csrf": csrf_of(page.text)})
        shown = await http.get(url)
    assert (posted.status_code, shown.status_code) == (409, 409)
    assert "moved on" in posted.text and "moved on" in shown.text
    now = (await site.ops.get(run_id)).current
    assert now.waits == nxt.current.waits and now.version == nxt.current.version


async def test_a_bare_reject_link_still_takes_one_confirming_click(site: Site) -> None:
    run_id = await site.start("twice")
    url = minter(site).links(await wait_of(site, run_id), "alice")["reject"]
    async with httpx.AsyncClient() as http:
        page = await http.get(url)
        assert page.status_code == 200 and "Reject as alice" in page.text
        assert 'name="reason"' in page.text
        assert await site.status(run_id) == "waiting"
        done = await http.post(url, data={"csrf": csrf_of(page.text), "reason": "too late"})
    assert done.status_code == 200 and "rejected by alice" in done.text
    view = await site.ops.wait_until(run_id, lambda r: not r.live, timeout=10)
    assert view.current.error["reason"] == "too late"


async def test_links_cast_votes_and_a_non_approvers_link_is_refused(site: Site) -> None:
    """Two approvers' links decide a two-of-three approval; the first leaves it open showing
    the vote; a link signed for someone outside the approvers is refused naming the rule."""
    run_id = await site.start("vote")
    wait = await wait_of(site, run_id)
    m = minter(site)
    outsider = m.url(links.sign(m.key, wait["key"], "approve", "mallory", int(time.time()) + 60))
    async with httpx.AsyncClient() as http:
        refused_page = await http.get(outsider)
        refused = await http.post(outsider, data={"csrf": csrf_of(refused_page.text)})
        alice_url = m.links(wait, "alice")["approve"]
        alice = await http.post(alice_url, data={"csrf": csrf_of((await http.get(alice_url)).text)})
        open_now = await wait_of(site, run_id)
        bob_url = m.links(open_now, "bob")["approve"]
        bob_page = await http.get(bob_url)
        bob = await http.post(bob_url, data={"csrf": csrf_of(bob_page.text)})
    assert refused.status_code == 403 and "not among the approvers" in refused.text
    assert alice.status_code == 200 and "stays open for more votes" in alice.text
    assert [v["by"] for v in open_now[votes.VOTES]] == ["alice"]
    assert "alice approved" in bob_page.text  # the votes so far, on the page
    assert bob.status_code == 200
    assert await site.output(run_id) == {"decision": "approved", "approvers": ["alice", "bob"]}
    rows = await site.audit_rows(run_id, 3)
    assert [(r["principal"], r["outcome"]) for r in rows] == [
        ("mallory", "refused"),
        ("alice", "ok"),
        ("bob", "ok"),
    ]


async def test_the_run_page_shows_the_votes_cast(site: Site) -> None:
    run_id = await site.start("vote")
    await site.ops.answer(
        run_id, (await wait_of(site, run_id))["key"], {"decision": "approve"}, by="carol"
    )
    async with httpx.AsyncClient() as http:
        page = await http.get(site.url(f"/runs/{run_id}"), headers=_bearer(site))
    assert page.status_code == 200
    assert "1 of 2 approvals: carol approved" in page.text
    assert "approvers: alice, bob, carol" in page.text
    assert "vote cast" in page.text  # the history's vote event, on the timeline


def _bearer(site: Site) -> dict[str, str]:
    return {"authorization": f"Bearer {site.tokens['operator']}"}


async def test_a_human_tasks_complete_link_opens_its_form_and_reads_it_typed(site: Site) -> None:
    """A link whose decision has inputs opens a small form; its boxes are read as their
    fields' types (a bad number is refused, naming the field, and the link stays usable)."""
    run_id = await site.start("form")
    url = minter(site).links(await wait_of(site, run_id), "alice")["complete"]
    async with httpx.AsyncClient() as http:
        page = await http.get(url)
        assert all(f'name="f.{n}"' in page.text for n in ("title", "count", "ratio", "ok"))
        form = {"csrf": csrf_of(page.text), "f.title": "T", "f.count": "x", "f.ratio": "0.5"}
        refused = await http.post(url, data=form)
        assert await site.status(run_id) == "waiting"
        done = await http.post(url, data={**form, "f.count": "3", "f.ok": "true"})
    assert refused.status_code == 422 and "count" in refused.text
    assert done.status_code == 200
    assert await site.output(run_id) == {
        "values": {"title": "T", "count": 3, "ratio": 0.5, "ok": True}
    }
