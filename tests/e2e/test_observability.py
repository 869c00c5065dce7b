"""Observability end to end over a real socket: /metrics scraped and parsed with the
Prometheus text parser while runs start, park, fail and end; /readyz and its anonymous form."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tests.sse import listen
from tether import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.security.tokens import new_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

app = App("observed")


def add_one(value: int) -> int:
    return value + 1


@app.workflow(expose=Exposure(tool_set=True))
async def finishes(ctx: Context) -> int:
    return int(await ctx.step(add_one, 1))


@app.workflow(expose=Exposure(tool_set=True))
async def parks(ctx: Context) -> str:
    await ctx.wait_for_signal("go")
    return "went"


@app.workflow(expose=Exposure(tool_set=True))
async def fails(ctx: Context) -> int:
    raise RuntimeError("boom")


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(base: str, headers: Mapping[str, str] | None = None) -> Samples:
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"{base}/metrics", headers=dict(headers or {}))
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    return parse(resp.text)


async def scrape_until(
    base: str, check: Callable[[Samples], bool], timeout: float = 10.0
) -> Samples:
    """Scrape until `check` holds (counters move when the worker finishes; bounded)."""
    async with asyncio.timeout(timeout):
        while True:
            samples = await scrape(base)
            if check(samples):
                return samples
            await asyncio.sleep(0.05)


async def test_counters_move_as_runs_start_park_fail_and_end(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Runs started/ended by workflow and outcome, attempts that park, the status
    gauge from the database, step durations and MCP request counts, from one scrape."""
    async with mcp_server(app) as url:
        base = url.removesuffix("/mcp")
        c = client(url)
        before = await scrape(base)
        ids = {}
        for wf in ("finishes", "parks", "fails"):
            created = await c.result("tools/call", {"name": f"start_{wf}", "arguments": {}})
            ids[wf] = created["taskId"]
        await c.wait_task(ids["finishes"], {"completed"})

        def moved(s: Samples) -> bool:
            return (
                value(s, "tether_runs_ended_total", workflow="finishes", status="completed")
                > value(before, "tether_runs_ended_total", workflow="finishes", status="completed")
                and value(s, "tether_runs_ended_total", workflow="fails", status="failed")
                > value(before, "tether_runs_ended_total", workflow="fails", status="failed")
                and value(s, "tether_run_attempts_total", workflow="parks", outcome="waiting")
                > value(before, "tether_run_attempts_total", workflow="parks", outcome="waiting")
                # the status gauge is read from the database, at most once a second
                and value(s, "tether_runs", status="waiting") >= 1
            )

        after = await scrape_until(base, moved)
        for wf in ("finishes", "parks", "fails"):
            assert value(after, "tether_runs_started_total", workflow=wf) == (
                value(before, "tether_runs_started_total", workflow=wf) + 1
            ), wf
        assert value(after, "tether_runs", status="completed") >= 1
        assert value(
            after, "tether_step_duration_seconds_count", workflow="finishes", outcome="completed"
        ) == 1 + value(
            before, "tether_step_duration_seconds_count", workflow="finishes", outcome="completed"
        )
        assert (
            value(after, "tether_run_duration_seconds_count", workflow="fails", status="failed")
            >= 1
        )
        calls = value(
            after,
            "tether_mcp_requests_total",
            method="tools/call",
            tool="start_parks",
            outcome="ok",
        )
        assert calls == 1 + value(
            before,
            "tether_mcp_requests_total",
            method="tools/call",
            tool="start_parks",
            outcome="ok",
        )
        assert value(after, "tether_listen_connected") == 1
        assert value(after, "tether_workers_running") == 1
        assert value(after, "tether_database_up") == 1
        # A tool outside the catalog is counted as `other`, never by the caller's name.
        await c.call("tools/call", {"name": "no_such_tool_x1", "arguments": {}})
        later = await scrape(base)
        assert not any("no_such_tool_x1" in str(key) for key in later)
        # signal the parked run: it ends, and the waiting gauge is read again next second
        await c.result(
            "tools/call",
            {"name": "signal_parks", "arguments": {"handle": ids["parks"], "name": "go"}},
        )
        await scrape_until(
            base,
            lambda s: (
                value(s, "tether_runs_ended_total", workflow="parks", status="completed")
                > value(before, "tether_runs_ended_total", workflow="parks", status="completed")
            ),
        )


async def test_metrics_and_readyz_sit_behind_the_security_layer(mcp_server: ServeFn) -> None:
    """/metrics needs a token when tokens are configured (a reader's will do); /readyz lets an
    anonymous probe through and tells it only the status."""
    token, entry = new_token("scraper", "reader")
    async with mcp_server(app, api_tokens=entry) as url:
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{base}/metrics")).status_code == 401
            ready = await http.get(f"{base}/readyz")
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}
            auth = {"Authorization": f"Bearer {token}"}
            full = await http.get(f"{base}/readyz", headers=auth)
        assert full.json() == {
            "status": "ready",
            "checks": {"database": True, "migrations": True, "listener": True, "workers": True},
        }
        samples = await scrape(base, auth)
        assert value(samples, "tether_database_up") == 1


async def test_subscription_gauges_follow_listen_streams(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Open listen streams and what they follow (task ids, resource URIs, by kind:
    a bounded label, never an id), read at scrape time: up when a stream opens, down as a
    followed run ends and when the stream closes."""
    async with mcp_server(app) as url:
        base = url.removesuffix("/mcp")
        c = client(url)
        a, b = [
            (await c.result("tools/call", {"name": "start_parks", "arguments": {}}))["taskId"]
            for _ in range(2)
        ]
        before = await scrape(base)

        def delta(s: Samples, name: str, **labels: str) -> float:
            return value(s, name, **labels) - value(before, name, **labels)

        wanted = {
            "taskIds": [a, b, "ex_nosuchtask"],
            "resourceSubscriptions": [f"tether://runs/{a}"],
        }
        async with listen(c, wanted) as stream:
            await stream.next()  # the ack: both tasks and the resource agreed
            opened = await scrape(base)
            assert delta(opened, "tether_subscriptions") == 1
            assert delta(opened, "tether_subscription_feeds", kind="task") == 2
            assert delta(opened, "tether_subscription_feeds", kind="resource") == 1
            assert delta(opened, "tether_subscription_feeds", kind="tools_list") == 0
            assert delta(opened, "tether_subscription_watched_runs") == 2
            assert not any(a in str(key) or b in str(key) for key in opened)
            await c.result(
                "tools/call", {"name": "signal_parks", "arguments": {"handle": a, "name": "go"}}
            )
            while True:  # until a's final view arrives
                frame = await stream.next()
                params = frame.get("params", {})
                if params.get("taskId") == a and params.get("status") == "completed":
                    break
            ended = await scrape_until(
                base,
                lambda s: (
                    delta(s, "tether_subscription_feeds", kind="task") == 1
                    and delta(s, "tether_subscription_feeds", kind="resource") == 0
                ),
            )
            assert delta(ended, "tether_subscriptions") == 1
        await scrape_until(
            base,
            lambda s: (
                delta(s, "tether_subscriptions") == 0
                and delta(s, "tether_subscription_feeds", kind="task") == 0
                and delta(s, "tether_subscription_watched_runs") == 0
            ),
        )
        await c.result(
            "tools/call", {"name": "signal_parks", "arguments": {"handle": b, "name": "go"}}
        )
