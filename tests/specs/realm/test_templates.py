"""Template expressions: paths, filters and what each one yields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tether.specs.realm.templates import UnknownFilter, Unresolvable, render, render_strict

ORDER = {"id": "inv_42", "items": [{"sku": "K-7"}, {"sku": "M-31"}], "customer": {"name": "Bea"}}
SCAN = {
    "tags": ["late", "refund"],
    "summary": "Two parcels arrived a week after the promised date",
    "when": "2025-11-03T09:30:00Z",
    "price": 4821.349,
    "ratio": 0.4216,
    "ms": 125000,
    "ok": False,
    "nums": [5, 9, 4],
    "findings": [{"title": "Dead link"}, {"title": "Missing alt text"}, {"title": "Dead link"}],
    "code": "QUEUE_FULL",
}
PARAMS = {"sku": "K-7", "repo": "acme/ledger"}
OUTPUTS = {"order": ORDER, "scan": SCAN}


def test_a_prompt_renders_what_resolves_and_leaves_the_rest_as_written() -> None:
    prompt = (
        "Invoice {{ context.resources.order.id }} for "
        "{{ context.resources.order.customer.name | upper }}.\n"
        'Lines: {{ context.resources.order.items | pluck: "sku" | and_join }}.\n'
        "Absent: {{ run.params.nope }}.\n"
        "No such filter: {{ run.params.sku | sparkle }}.\n"
    )
    assert render(prompt, PARAMS, OUTPUTS) == (
        "Invoice inv_42 for BEA.\nLines: K-7 and M-31.\nAbsent: {{ run.params.nope }}.\n"
        "No such filter: {{ run.params.sku | sparkle }}.\n"
    )


@pytest.mark.parametrize(
    ("expr", "result"),
    [
        ("s.tags | bullets", "• late\n• refund"),
        ('s.tags | join: " / "', "late / refund"),
        ('s.missing | default: "none"', "none"),
        ("run.params.repo | upper", "ACME/LEDGER"),
        ("s.code | lower", "queue_full"),
        ("s.summary | truncate: 30", "Two parcels arrived a week…"),
        ('s.findings | pluck: "title" | join', "Dead link, Missing alt text, Dead link"),
        ('s.findings | pluck: "title" | unique | join', "Dead link, Missing alt text"),
        ("s.findings | count", "3"),
        ("s.nums | limit: 2 | join", "5, 9"),
        ("s.nums | sort | join", "4, 5, 9"),
        ("s.nums | sum", "18"),
        ("s.price | round: 1", "4821.3"),
        ("s.price | floor", "4821"),
        ("s.price | number_format: 2", "4,821.35"),
        ("s.ratio | percent: 1", "42.2%"),
        ('run.params.repo | replace: "/", " / "', "acme / ledger"),
        ('s.ok | yesno: "Open", "Closed"', "Closed"),
        ("s.tags | first", "late"),
        ("s.tags | and_join", "late and refund"),
        ('s.when | date: "long"', "November 3, 2025"),
        ("s.when | date", "Nov 3, 2025"),
        ("s.ms | duration", "2m 5s"),
        ("context.resources.order.items.0.sku", "K-7"),
        ("context.resources.order.customer", '{\n  "name": "Bea"\n}'),
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
    with pytest.raises(UnknownFilter, match="filter that does not exist: 'sparkle'"):
        render_strict("{{ run.params.sku | sparkle }}", PARAMS, OUTPUTS)
    with pytest.raises(Unresolvable):  # workflow.context is outside the subset
        render_strict("{{ workflow.context.notes }}", PARAMS, OUTPUTS)


def test_from_now_counts_back_or_forward_in_the_largest_whole_unit() -> None:
    """`from_now` says how far the time is from now, in its largest whole unit, before or
    after."""
    now = datetime.now(UTC)
    cases = {
        now - timedelta(days=40, hours=3): "40 days ago",
        now - timedelta(hours=1, minutes=5): "1 hour ago",
        now + timedelta(minutes=10, seconds=30): "in 10 minutes",
    }
    for when, said in cases.items():
        outputs = {"scan": {"when": when.isoformat()}}
        got = render_strict("{{ context.resources.scan.when | from_now }}", PARAMS, outputs)
        assert got == said
    left = "{{ context.resources.scan.summary | from_now }}"  # not a date: left as written
    assert render_strict(left, PARAMS, OUTPUTS) == left
