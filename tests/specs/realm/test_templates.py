"""Template expressions: paths, filters and their documented results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tether.specs.realm.templates import UnknownFilter, Unresolvable, render, render_strict

ORDER = {"id": "ord_7", "items": [{"sku": "A-100"}, {"sku": "B-200"}], "customer": {"name": "Ana"}}
SCAN = {
    "tags": ["urgent", "billing"],
    "summary": "The customer was charged twice for one order",
    "when": "2026-01-28T14:05:00Z",
    "price": 1234.567,
    "ratio": 0.857,
    "ms": 83000,
    "ok": True,
    "nums": [3, 1, 2],
    "findings": [{"title": "Typo"}, {"title": "Broken link"}, {"title": "Typo"}],
    "code": "DATABASE_DOWN",
}
PARAMS = {"sku": "A-100", "repo": "sensigo/realm"}
OUTPUTS = {"order": ORDER, "scan": SCAN}


def test_a_prompt_renders_what_resolves_and_leaves_the_rest_as_written() -> None:
    prompt = (
        "Order {{ context.resources.order.id }} for "
        "{{ context.resources.order.customer.name | upper }}.\n"
        'Items: {{ context.resources.order.items | pluck: "sku" | and_join }}.\n'
        "Not there: {{ run.params.nope }}.\n"
        "Unknown filter: {{ run.params.sku | shout }}.\n"
    )
    assert render(prompt, PARAMS, OUTPUTS) == (
        "Order ord_7 for ANA.\nItems: A-100 and B-200.\nNot there: {{ run.params.nope }}.\n"
        "Unknown filter: {{ run.params.sku | shout }}.\n"
    )


@pytest.mark.parametrize(
    ("expr", "result"),
    [
        ("s.tags | bullets", "• urgent\n• billing"),
        ('s.tags | join: " / "', "urgent / billing"),
        ('s.missing | default: "none"', "none"),
        ("run.params.repo | upper", "SENSIGO/REALM"),
        ("s.code | lower", "database_down"),
        ("s.summary | truncate: 30", "The customer was charged…"),
        ('s.findings | pluck: "title" | join', "Typo, Broken link, Typo"),
        ('s.findings | pluck: "title" | unique | join', "Typo, Broken link"),
        ("s.findings | count", "3"),
        ("s.nums | limit: 2 | join", "3, 1"),
        ("s.nums | sort | join", "1, 2, 3"),
        ("s.nums | sum", "6"),
        ("s.price | round: 1", "1234.6"),
        ("s.price | floor", "1234"),
        ("s.price | number_format: 2", "1,234.57"),
        ("s.ratio | percent: 1", "85.7%"),
        ('run.params.repo | replace: "/", " / "', "sensigo / realm"),
        ('s.ok | yesno: "Active", "Inactive"', "Active"),
        ("s.tags | first", "urgent"),
        ("s.tags | and_join", "urgent and billing"),
        ('s.when | date: "long"', "January 28, 2026"),
        ("s.when | date", "Jan 28, 2026"),
        ("s.ms | duration", "1m 23s"),
        ("context.resources.order.items.0.sku", "A-100"),
        ("context.resources.order.customer", '{\n  "name": "Ana"\n}'),
        ("s.upper_of_a_list | default: 5", "5"),
        ("s.tags | upper", "{{ context.resources.scan.tags | upper }}"),  # does not apply
    ],
)
def test_filters(expr: str, result: str) -> None:
    expr = expr.replace("s.", "context.resources.scan.", 1) if expr.startswith("s.") else expr
    assert render_strict("{{ " + expr + " }}", PARAMS, OUTPUTS) == result


def test_a_gate_message_is_strict() -> None:
    with pytest.raises(Unresolvable, match=r"context\.resources\.order\.customer\.city"):
        render_strict("{{ context.resources.order.customer.city }}", PARAMS, OUTPUTS)
    with pytest.raises(UnknownFilter, match="filter that does not exist: 'shout'"):
        render_strict("{{ run.params.sku | shout }}", PARAMS, OUTPUTS)
    with pytest.raises(Unresolvable):  # workflow.context is outside the subset
        render_strict("{{ workflow.context.glossary }}", PARAMS, OUTPUTS)


def test_from_now_counts_back_or_forward_in_the_largest_whole_unit() -> None:
    """`s.when | from_now` gave `246 days ago` (on 1 Oct 2026 for
    2026-01-28T14:05:00Z); the text is counted from now."""
    now = datetime.now(UTC)
    cases = {
        now - timedelta(days=246, hours=3): "246 days ago",
        now - timedelta(hours=1, minutes=5): "1 hour ago",
        now + timedelta(minutes=10, seconds=30): "in 10 minutes",
    }
    for when, said in cases.items():
        outputs = {"scan": {"when": when.isoformat()}}
        got = render_strict("{{ context.resources.scan.when | from_now }}", PARAMS, outputs)
        assert got == said
    left = "{{ context.resources.scan.summary | from_now }}"  # not a date: left as written
    assert render_strict(left, PARAMS, OUTPUTS) == left
