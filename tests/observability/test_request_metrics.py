"""The MCP request metrics, kept as plain numbers (observability/metrics.py), expose exactly
what prometheus_client's own Counter and Histogram expose for the same requests."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest

from tether.observability import metrics

OBSERVED = [
    ("tasks/get", "", "ok", 0.0004),
    ("tasks/get", "", "ok", 0.001),  # on a bound: counted in that bucket (le is inclusive)
    ("tasks/get", "", "error", 0.02),
    ("tools/call", "start", "tool_error", 7.0),
    ("tools/call", "start", "ok", 120.0),  # over every bound: +Inf only
]


def _lines(registry: CollectorRegistry) -> list[str]:
    return [
        line
        for line in generate_latest(registry).decode().splitlines()
        if not line.split("{")[0].endswith("_created")  # creation times differ by nature
    ]


def test_the_request_collector_exposes_what_prometheus_client_would() -> None:
    mine, theirs = CollectorRegistry(), CollectorRegistry()
    collector = metrics._RequestCollector(metrics._FAST)
    mine.register(collector)
    requests = Counter(
        "tether_mcp_requests",
        "MCP requests by method, tool (tools/call) and outcome",
        ["method", "tool", "outcome"],
        registry=theirs,
    )
    latency = Histogram(
        "tether_mcp_request_duration_seconds",
        "MCP request latency by method and tool",
        ["method", "tool"],
        buckets=metrics._FAST,
        registry=theirs,
    )
    for method, tool, outcome, seconds in OBSERVED:
        collector.add(method, tool, outcome, seconds)
        requests.labels(method, tool, outcome).inc()
        latency.labels(method, tool).observe(seconds)
    assert _lines(mine) == _lines(theirs)
    created = [line for line in generate_latest(mine).decode().splitlines() if "_created{" in line]
    assert len(created) == 4 + 2  # one per labelled counter and histogram, as theirs


def test_request_finished_records_only_while_enabled() -> None:
    def count() -> float:
        value = REGISTRY.get_sample_value(
            "tether_mcp_requests_total", {"method": "ping", "tool": "", "outcome": "ok"}
        )
        return value or 0.0

    before = count()
    metrics.request_finished("ping", "", "ok", 0.001)
    assert count() == before + 1
    metrics.enabled = False
    try:
        metrics.request_finished("ping", "", "ok", 0.001)
    finally:
        metrics.enabled = True
    assert count() == before + 1
