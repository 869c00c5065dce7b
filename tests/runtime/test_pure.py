"""Pure parts of the runtime: wait keys, answer validation, chain following, outcomes, policy."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.factories import execution_row
from tether.runtime import answer_rules, waits
from tether.runtime.chain import follow, outcome
from tether.runtime.policy import RetryPolicy
from tether.storage.rows import STATUSES, ExecutionRow

ids = st.from_regex(r"ex_[a-z2-7]{32}", fullmatch=True)
names = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40)


@given(ids, st.sampled_from(waits.KINDS), names, st.integers(min_value=0, max_value=2**62))
def test_wait_keys_round_trip(execution_id: str, kind: str, name: str, n: int) -> None:
    """parse_key inverts make_key for every id, kind, name (even with ':') and position."""
    parts = waits.parse_key(waits.make_key(execution_id, kind, name, n))
    assert parts == waits.KeyParts(execution_id, kind, name, n)


@given(st.text(max_size=60))
def test_parse_key_never_raises_and_accepts_only_well_formed_keys(text: str) -> None:
    """Arbitrary text parses to None or to parts that rebuild the same key."""
    parts = waits.parse_key(text)
    if parts is not None:
        assert waits.make_key(parts.execution_id, parts.kind, parts.name, parts.n) == text


def test_keys_with_a_leading_zero_or_unknown_kind_are_refused() -> None:
    """Only canonical keys parse, so equal keys are equal strings."""
    assert waits.parse_key("ex_a:signal:go:01") is None
    assert waits.parse_key("ex_a:bogus:go:1") is None
    assert waits.parse_key("ex_a:signal::1") is None


def test_approval_answers_are_checked_from_the_descriptor_alone() -> None:
    """Decision, string inputs and required inputs (Dagu gate rules: an approval keeps inputs
    the gate does not list, as Dagu's applyApproval stores them)."""
    spec = waits.Approval("gate", "ok?", ("ticket", "note"), ("ticket",))
    d = spec.descriptor("k", "t", None)
    assert answer_rules.validate_answer(d, {"decision": "approve", "ticket": "T-1"}) == []
    assert answer_rules.validate_answer(d, {"decision": "reject", "reason": "no"}) == []
    assert answer_rules.validate_answer(d, {"decision": "push_back", "anything": "x"}) == []
    assert answer_rules.validate_answer(d, {"decision": "approve"}) == [
        "ticket: required to approve"
    ]
    assert answer_rules.validate_answer(d, {"decision": "approve", "ticket": 1})[0].startswith(
        "ticket"
    )
    assert answer_rules.validate_answer(d, {"decision": "approve", "ticket": "T", "x": "y"}) == []
    assert answer_rules.validate_answer(d, {"decision": "approve", "ticket": "T", "x": 2})
    assert answer_rules.validate_answer(d, {"decision": "maybe"})
    assert answer_rules.validate_answer(d, "approve")


def test_only_the_decisions_own_arguments_are_not_inputs() -> None:
    """`reason` is an input except on a rejection; an input named `decision` travels in the
    `inputs` envelope, which surfaces build with `decision_answer`."""
    assert answer_rules.answer_fields({"decision": "approve", "reason": "r", "x": "1"}) == {
        "reason": "r",
        "x": "1",
    }
    assert answer_rules.answer_fields({"decision": "reject", "reason": "no"}) == {}
    assert answer_rules.decision_answer("push_back", {"reason": "r"}) == {
        "decision": "push_back",
        "reason": "r",
    }
    enveloped = answer_rules.decision_answer("approve", {"decision": "go", "reason": "r"})
    assert enveloped == {"decision": "approve", "inputs": {"decision": "go", "reason": "r"}}
    assert answer_rules.answer_fields(enveloped) == {"decision": "go", "reason": "r"}
    assert answer_rules.decision_answer("reject", None, "no") == {
        "decision": "reject",
        "reason": "no",
    }


def test_an_enveloped_approval_answer_is_checked_like_a_flat_one() -> None:
    """The envelope's inputs are strings and hold the required ones; beside it only the
    decision and a reason; a gate whose inputs take the decision's name shows the envelope."""
    d = waits.Approval("gate", None, ("ticket",), ("ticket",)).descriptor("k", "t", None)
    assert answer_rules.validate_answer(d, {"decision": "approve", "inputs": {"ticket": "T"}}) == []
    assert answer_rules.validate_answer(d, {"decision": "approve", "inputs": {}}) == [
        "inputs/ticket: required to approve"
    ]
    assert answer_rules.validate_answer(d, {"decision": "approve", "inputs": {"ticket": 1}})
    assert answer_rules.validate_answer(
        d, {"decision": "approve", "inputs": {"ticket": "T"}, "x": "y"}
    )
    assert answer_rules.validate_answer(d, {"decision": "reject", "reason": 3})
    schema = answer_rules.approval_schema(("decision", "reason"))
    assert set(schema["properties"]) == {"decision", "reason", "inputs"}
    assert set(schema["properties"]["inputs"]["properties"]) == {"decision", "reason"}


class Form(BaseModel):
    title: str
    pages: int


def test_human_task_answers_are_checked_against_the_form() -> None:
    """complete validates the form; push_back the (permissive) feedback; decision defaults."""
    d = waits.HumanTask("fill", None, Form).descriptor("k", "t", None)
    assert answer_rules.validate_answer(d, {"title": "a", "pages": 1}) == []
    assert answer_rules.validate_answer(d, {"decision": "push_back", "why": "unclear"}) == []
    assert answer_rules.validate_answer(d, {"title": "a"})
    assert d["schema"]["properties"]["decision"]["enum"] == ["complete", "push_back"]


def test_update_waits_are_not_answerable() -> None:
    """Update waits are fed by the worker, never by an answer."""
    assert answer_rules.validate_answer(waits.Update("u").descriptor("k", "t", None), {})


def test_wait_specs_refuse_bad_declarations() -> None:
    """Reserved names, required inputs that are not inputs, empty names."""
    with pytest.raises(ValueError):
        waits.Approval("g", None, ("decision",))
    with pytest.raises(ValueError):
        waits.Approval("g", None, ("a",), ("b",))
    with pytest.raises(ValueError):
        waits.Signal("")


NOW = datetime(2026, 11, 30, tzinfo=UTC)


def row(id_: str, successor: str | None = None, **kw: Any) -> ExecutionRow:
    base: dict[str, Any] = {
        "id": id_,
        "successor_id": successor,
        "status": "completed",
        "created_at": NOW,
        "updated_at": NOW,
        "ended_at": NOW,
    }
    return execution_row(**{**base, **kw})


@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=30))
def test_follow_ends_at_a_run_without_a_reachable_successor(links: list[int]) -> None:
    """Whatever the links (cycles, dangling ids), follow terminates at a run whose successor
    is missing, already seen, or absent."""
    rows = {f"r{i}": row(f"r{i}", f"r{t}") for i, t in enumerate(links)}
    end = follow(rows, "r0")
    seen = {"r0"}
    cur = rows["r0"]
    while cur.successor_id in rows and cur.successor_id not in seen:
        cur = rows[cur.successor_id]
        seen.add(cur.id)
    assert end.id == cur.id


def test_follow_walks_a_simple_chain_to_its_end() -> None:
    """a → b → c resolves to c from any handle."""
    rows = {"a": row("a", "b"), "b": row("b", "c"), "c": row("c")}
    assert {follow(rows, k).id for k in rows} == {"c"}


@given(st.sampled_from(STATUSES), st.sampled_from([None, "workflow", "protocol", "rejected"]))
def test_outcome_is_defined_for_every_status(status: str, kind: str | None) -> None:
    """Every status maps; protocol errors are the only failures that are protocol errors."""
    r = row("a", status=status, error={"kind": kind} if kind else None)
    out = outcome(r)
    if status in ("failed", "timed_out"):
        assert out.outcome == ("protocol_error" if kind == "protocol" else "workflow_error")
    elif status == "completed":
        assert out.outcome == "succeeded"
    elif status in ("cancelled", "terminated"):
        assert out.outcome == "cancelled"


def test_a_sealed_run_keeps_the_ending_it_had() -> None:
    """An operator rerun seals a failed run as continued_as_new; its outcome stays failed."""
    r = row("a", status="continued_as_new", sealed_from="failed", error={"kind": "workflow"})
    assert outcome(r).outcome == "workflow_error"
    assert outcome(dataclasses.replace(r, sealed_from=None)).outcome == "continued"


@given(st.integers(min_value=1, max_value=50))
def test_backoff_grows_and_is_capped(failures: int) -> None:
    """Delays never shrink and never pass max_interval."""
    p = RetryPolicy(max_attempts=100, initial_interval=0.5, backoff=2.0, max_interval=10.0)
    assert p.delay(failures) <= p.delay(failures + 1) <= 10.0


def test_linear_backoff_grows_by_the_first_wait() -> None:
    """Realm's `backoff: linear`: 0.2, 0.4, 0.6 … up to the cap."""
    p = RetryPolicy(
        max_attempts=9, initial_interval=0.2, backoff=1.0, max_interval=0.5, linear=True
    )
    assert [round(p.delay(n), 3) for n in (1, 2, 3)] == [0.2, 0.4, 0.5]


def test_retry_policy_refuses_nonsense() -> None:
    """Zero attempts, negative intervals, shrinking backoff."""
    for kwargs in ({"max_attempts": 0}, {"initial_interval": -1}, {"backoff": 0.5}):
        with pytest.raises(ValueError):
            RetryPolicy(**kwargs)


def test_unstorable_names_the_limit_or_where_the_nul_character_is() -> None:
    """Our choice: a payload is refused for its size (with the limit) or for U+0000 (with a
    JSON pointer to it); text that only spells the escape out is stored."""
    from tether.runtime.operations.env import unstorable

    big = unstorable({"a": "x" * 100}, 50)
    assert big is not None and (big.limit_bytes, big.size_bytes) == (50, 108)
    nul = unstorable({"a/b": [1, {"k": "v\x00"}]}, 1000)
    assert nul is not None and nul.nul_at == "/a~1b/1/k"
    key = unstorable({"ok": {"bad\x00key": 1}}, 1000)
    assert key is not None and key.nul_at == "/ok/bad\x00key"
    assert unstorable({"text": "\\u0000 spelled out"}, 1000) is None
