"""dagu:// URIs (pure): percent-encoded segments round-trip; other URIs are not ours."""

from __future__ import annotations

from tether.tools.dagu.uris import RunRef, logs_uri, parse_run_uri, run_uri, step_logs_uri


def test_run_uris_round_trip_with_encoded_segments() -> None:
    uri = run_uri("my dag", "r/1")
    assert uri == "dagu://runs/my%20dag/r%2F1"
    assert parse_run_uri(uri) == RunRef("my dag", "r/1")
    assert parse_run_uri(logs_uri("a", "b")) == RunRef("a", "b", "logs")
    assert parse_run_uri(step_logs_uri("a", "b", "s 1")) == RunRef("a", "b", "step", "s 1")


def test_other_uris_are_not_run_uris() -> None:
    for uri in ("tether://runs/x", "dagu://runs/a", "dagu://runs/a/b/c", "dagu://dags/a"):
        assert parse_run_uri(uri) is None
