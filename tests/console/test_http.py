"""The console over plain HTTP (no browser): CSRF, sign-in, cookie flags, audit rows, the SSE
streams and their cap, cancel and retry, signal forms."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.console.conftest import Site, console_site

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def _field(html: str, name: str) -> str:
    found = re.search(rf'name="{re.escape(name)}" value="([^"]+)"', html)
    assert found is not None, name
    return found.group(1)


async def _signed_in(http: httpx.AsyncClient, site: Site, who: str) -> None:
    page = await http.get(site.url("/sign-in"))
    reply = await http.post(
        site.url("/sign-in"), data={"csrf": _field(page.text, "csrf"), "token": site.tokens[who]}
    )
    assert reply.status_code == 303


async def test_csrf_signin_audit_and_live_stream(site: Site) -> None:
    run_id = await site.start("gate")
    async with httpx.AsyncClient() as http:
        page = await http.get(site.url("/sign-in"))
        assert "httponly" in page.headers["set-cookie"].lower()
        assert "samesite=strict" in page.headers["set-cookie"].lower()
        wrong = await http.post(
            site.url("/sign-in"), data={"csrf": _field(page.text, "csrf"), "token": "tt_nope"}
        )
        assert wrong.status_code == 401 and "unknown, expired or revoked" in wrong.text
        await _signed_in(http, site, "operator")
        run = await http.get(site.url(f"/runs/{run_id}"))
        key = _field(run.text, "key")
        forged = await http.post(
            site.url(f"/runs/{run_id}/answer"),
            data={"csrf": "0" * 40, "key": key, "decision": "approve", "f.ticket": "T"},
        )
        assert forged.status_code == 403
        assert await site.status(run_id) == "waiting"

        async with http.stream("GET", site.url(f"/runs/{run_id}/events")) as stream:
            lines = stream.aiter_lines()
            assert await _until(lines, "event: update")
            answered = await http.post(
                site.url(f"/runs/{run_id}/answer"),
                data={
                    "csrf": _field(run.text, "csrf"),
                    "key": key,
                    "decision": "approve",
                    "f.ticket": "T-9",
                },
            )
            assert answered.status_code == 303
            assert await _until(lines, "completed")
    rows = await site.audit_rows(run_id, 2)
    assert [r["outcome"] for r in rows] == ["refused", "ok"]


async def _until(lines: object, text: str) -> bool:
    async with asyncio.timeout(10):
        async for line in lines:  # type: ignore[attr-defined]
            if text in line:
                return True
    return False


async def test_cancel_and_retry_need_confirmation_and_an_operator(site: Site) -> None:
    run_id = await site.start("gate")
    async with httpx.AsyncClient() as reader, httpx.AsyncClient() as operator:
        await _signed_in(reader, site, "reader")
        await _signed_in(operator, site, "operator")
        assert (await reader.get(site.url(f"/runs/{run_id}/cancel"))).status_code == 403
        page = await reader.get(site.url(f"/runs/{run_id}"))
        assert "Cancel run" not in page.text
        refused = await reader.post(
            site.url(f"/runs/{run_id}/cancel"), data={"csrf": _field(page.text, "csrf")}
        )
        assert refused.status_code == 403
        assert await site.status(run_id) == "waiting"

        confirm = await operator.get(site.url(f"/runs/{run_id}/cancel"))
        assert confirm.status_code == 200 and "Yes, cancel this run" in confirm.text
        assert await site.status(run_id) == "waiting"  # asking is not doing
        done = await operator.post(
            site.url(f"/runs/{run_id}/cancel"), data={"csrf": _field(confirm.text, "csrf")}
        )
        assert done.status_code == 303
        view = await site.ops.wait_until(run_id, lambda r: not r.live, timeout=10)
        assert view.current.status == "cancelled"

        confirm = await operator.get(site.url(f"/runs/{run_id}/retry"))
        retried = await operator.post(
            site.url(f"/runs/{run_id}/retry"), data={"csrf": _field(confirm.text, "csrf")}
        )
        assert retried.status_code == 303
        new_id = retried.headers["location"].split("/runs/")[1].split("?")[0]
        assert new_id != run_id
        assert (await site.ops.get(run_id)).current.id == new_id  # the handle follows
        assert (await operator.get(site.url(f"/runs/{run_id}/terminate"))).status_code == 404


async def test_inbox_stream_shows_a_new_wait_without_polling(site: Site) -> None:
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        async with http.stream("GET", site.url("/inbox/events")) as stream:
            lines = stream.aiter_lines()
            assert await _until(lines, "open wait")
            run_id = await site.start("gate")
            assert await _until(lines, run_id)
    async with httpx.AsyncClient() as anonymous:
        assert (await anonymous.get(site.url("/inbox/events"))).status_code == 401


async def test_live_streams_are_capped_per_caller(module_db: str) -> None:
    async with console_site(module_db, max_streams_per_token=1) as small:
        run_id = await small.start("gate")
        async with httpx.AsyncClient() as http:
            await _signed_in(http, small, "operator")
            url = small.url(f"/runs/{run_id}/events")
            async with http.stream("GET", url) as first:
                assert first.status_code == 200
                assert (await http.get(small.url("/inbox/events"))).status_code == 429
            async with http.stream("GET", url) as again:  # the slot came back
                assert again.status_code == 200


@pytest.mark.parametrize(
    ("workflow", "fields", "output"),
    [
        ("sig", {"f.n": "7"}, {"n": 7}),
        ("free", {"payload": '{"a": [1, 2]}'}, {"got": {"a": [1, 2]}}),
    ],
)
async def test_a_signal_form_sends_its_payload(
    site: Site, workflow: str, fields: dict[str, str], output: dict[str, object]
) -> None:
    run_id = await site.start(workflow)
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        page = await http.get(site.url(f"/runs/{run_id}"))
        assert ('name="payload"' in page.text) == (workflow == "free")
        sent = await http.post(
            site.url(f"/runs/{run_id}/answer"),
            data={"csrf": _field(page.text, "csrf"), "key": _field(page.text, "key"), **fields},
        )
        assert sent.status_code == 303, sent.text
    assert await site.output(run_id) == output


async def test_a_stale_form_never_answers_the_next_wait_of_the_same_name(site: Site) -> None:
    run_id = await site.start("twice")
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        page = await http.get(site.url(f"/runs/{run_id}"))
        csrf, first = _field(page.text, "csrf"), _field(page.text, "key")
        answer = {"csrf": csrf, "key": first, "decision": "approve", "f.note": "one"}
        assert (await http.post(site.url(f"/runs/{run_id}/answer"), data=answer)).status_code == 303
        view = await site.ops.wait_until(
            run_id, lambda r: any(w["key"] != first for w in r.waits), timeout=10
        )
        second = view.current.waits[0]["key"]
        stale = await http.post(site.url(f"/runs/{run_id}/answer"), data={**answer, "f.note": "x"})
        assert stale.status_code == 409
        assert "This form is stale" in stale.text
        assert f'value="{second}"' in stale.text  # the wait open now, with its own form
    row = (await site.ops.get(run_id)).current
    assert row.status == "waiting" and row.waits[0]["key"] == second  # nothing changed


async def test_a_form_over_the_body_cap_is_refused_and_changes_nothing(module_db: str) -> None:
    """Our choice: TETHER_MAX_BODY_BYTES holds for the console's forms as for /mcp — a declared
    length over it and a chunked body crossing it both get 413, and the confirmed cancel the
    form carries (with a valid CSRF token) does not happen."""
    cap = 16 * 1024
    async with console_site(module_db, max_body_bytes=cap) as small:
        run_id = await small.start("gate")
        async with httpx.AsyncClient() as http:
            await _signed_in(http, small, "operator")
            confirm = await http.get(small.url(f"/runs/{run_id}/cancel"))
            form = f"csrf={_field(confirm.text, 'csrf')}&reason=".encode()
            padded = form + b"x" * (2 * cap)
            declared = await http.post(
                small.url(f"/runs/{run_id}/cancel"),
                content=padded,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert declared.status_code == 413

            async def chunks() -> AsyncIterator[bytes]:
                yield form
                for _ in range(2 * cap // 1024):
                    yield b"x" * 1024

            chunked = await http.post(
                small.url(f"/runs/{run_id}/cancel"),
                content=chunks(),
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert "content-length" not in chunked.request.headers
            assert chunked.status_code == 413
            assert await small.status(run_id) == "waiting"
            # The same form within the cap is acted on: the refusals were the cap's.
            done = await http.post(
                small.url(f"/runs/{run_id}/cancel"),
                content=form + b"x" * 100,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert done.status_code == 303


async def test_steering_a_run_id_that_is_no_id_is_not_found(site: Site) -> None:
    """Our choice: cancel and retry of an id that has not the shape of one (a NUL, say) find
    no run (404), as the run page does; retry used to fail with a 500."""
    async with httpx.AsyncClient() as http:
        await _signed_in(http, site, "operator")
        page = await http.get(site.url("/runs"))
        csrf = _field(page.text, "csrf")
        for action in ("retry", "cancel"):
            for bad in ("%00", "ex_nope", "x%00y"):
                resp = await http.post(site.url(f"/runs/{bad}/{action}"), data={"csrf": csrf})
                assert resp.status_code == 404, (action, bad)
