"""The `tether` command line against a real database: migrate, start, list, show, signal,
answer, cancel, and a clear error for bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import database_env

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[1]


def tether(
    db_url: str, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "tether", "--log-level", "WARNING", *args],
        cwd=REPO,
        env={**os.environ, **database_env(db_url), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    return orjson.loads(proc.stdout)


def test_migrate_is_idempotent(db_url: str) -> None:
    """`tether migrate` on an up-to-date database changes nothing and says so."""
    assert "up to date" in tether(db_url, "migrate").stdout


def test_runs_can_be_started_listed_shown_signalled_and_cancelled(db_url: str) -> None:
    """The runs subcommands drive the operations module (no worker needed for these)."""
    started = as_json(
        tether(
            db_url,
            "runs",
            "--json",
            "start",
            "long_job",
            '{"steps": 2}',
            "--idempotency-key",
            "cli-1",
        )
    )
    again = as_json(
        tether(
            db_url,
            "runs",
            "--json",
            "start",
            "long_job",
            '{"steps": 2}',
            "--idempotency-key",
            "cli-1",
        )
    )
    assert (started["deduped"], again["deduped"]) == (False, True)
    assert again["id"] == started["id"]
    listed = as_json(tether(db_url, "runs", "--json", "list", "--workflow", "long_job"))
    assert [r["id"] for r in listed["items"]] == [started["id"]]
    labelled = as_json(
        tether(db_url, "runs", "--json", "start", "long_job", '{"steps": 1}', "--label", "team=a")
    )
    by_label = as_json(tether(db_url, "runs", "--json", "list", "--label", "team=a"))
    assert [r["id"] for r in by_label["items"]] == [labelled["id"]]
    assert as_json(tether(db_url, "runs", "--json", "list", "--label", "team=b"))["items"] == []
    sent = as_json(tether(db_url, "runs", "--json", "signal", started["id"], "nudge", "1"))
    assert sent["status"] == "accepted"
    shown = as_json(tether(db_url, "runs", "--json", "show", started["id"], "--history"))
    assert [e["type"] for e in shown["history"]] == ["created", "signal"]
    cancelled = as_json(tether(db_url, "runs", "--json", "cancel", started["id"]))
    assert cancelled["status"] == "pending"  # cooperative: a worker ends it at its next call


def test_bad_input_is_refused_with_a_clear_message_and_exit_code(db_url: str) -> None:
    """Invalid input exits 1 naming the problem; an unknown run too; bad JSON exits 2."""
    bad = tether(db_url, "runs", "start", "long_job", '{"steps": 0}', check=False)
    assert bad.returncode == 1 and "InvalidInput" in bad.stderr
    missing = tether(db_url, "runs", "show", "ex_nope", check=False)
    assert missing.returncode == 1 and "ExecutionNotFound" in missing.stderr
    not_json = tether(db_url, "runs", "start", "long_job", "{oops", check=False)
    assert not_json.returncode == 2 and "not JSON" in not_json.stderr


def test_runs_tenant_scopes_what_the_cli_sees_and_starts(db_url: str) -> None:
    """`runs --tenant T` acts as a caller bound to T: its starts belong to T, and
    another tenant's run reads as not found."""
    started = as_json(
        tether(db_url, "runs", "--tenant", "acme", "--json", "start", "long_job", '{"steps": 1}')
    )
    assert started["tenant"] == "acme"
    own = as_json(tether(db_url, "runs", "--tenant", "acme", "--json", "list"))
    assert [r["id"] for r in own["items"]] == [started["id"]]
    assert as_json(tether(db_url, "runs", "--tenant", "other", "--json", "list"))["items"] == []
    hidden = tether(db_url, "runs", "--tenant", "other", "show", started["id"], check=False)
    assert hidden.returncode == 1 and "ExecutionNotFound" in hidden.stderr


def test_cli_mutations_leave_audit_rows_refused_ones_too(db_url: str) -> None:
    """One audit row per CLI mutation (surface `cli`), a refused one included; reads
    leave none."""
    started = as_json(tether(db_url, "runs", "--json", "start", "long_job", '{"steps": 1}'))
    tether(db_url, "runs", "--json", "list")
    refused = tether(db_url, "runs", "signal", "ex_nope", "nudge", "1", check=False)
    assert refused.returncode == 1
    rows = as_json(tether(db_url, "--json", "audit"))
    mine = [(r["method"], r["outcome"], r["execution_id"]) for r in rows if r["surface"] == "cli"]
    assert sorted(mine) == sorted(
        [("runs/start", "ok", started["id"]), ("runs/signal", "refused", "ex_nope")]
    )


def test_runs_start_batch_starts_json_lines_and_refuses_a_bad_file_whole(
    db_url: str, tmp_path: Path
) -> None:
    """`runs start --batch FILE`: one result line per input line (exit 1 when any item was
    refused, the others started); a malformed line is refused by number and starts nothing."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"workflow": "long_job", "input": {"steps": 1}}\n{"workflow": "long_job", "x": 2}\n'
        '{"workflow": "long_job", "queue": 3}\n'
    )
    refused = tether(db_url, "runs", "start", "--batch", str(bad), check=False)
    assert refused.returncode == 2 and "line 2: unknown key(s) x" in refused.stderr
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"workflow": "long_job", "input": {"steps": 1}, "idempotency_key": "b1"}\n\n'
        '{"workflow": "long_job", "input": {"steps": 0}}\n'
        '{"workflow": "long_job", "input": {"steps": 1}, "idempotency_key": "b1"}\n'
    )
    proc = tether(db_url, "runs", "start", "--batch", str(good), check=False)
    assert proc.returncode == 1 and "1 of 3 starts were refused" in proc.stderr
    lines = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [line["line"] for line in lines] == [1, 3, 4]
    assert lines[1]["error"]["type"] == "InvalidInput"
    assert (lines[0]["deduped"], lines[2]["deduped"]) == (False, True)
    assert lines[0]["execution_id"] == lines[2]["execution_id"]
    listed = as_json(tether(db_url, "runs", "--json", "list"))
    assert [item["id"] for item in listed["items"]] == [lines[0]["execution_id"]]
