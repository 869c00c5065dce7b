"""PURE: how to answer an open wait (runtime/hints.py), and the name-or-key resolution the
answer tool and `tether runs answer` share (operations/answering.resolve_wait). Our choice
(every hint names a way that works for its reader)."""

from __future__ import annotations

import shlex
from typing import Any

import orjson
import pytest

from tests.factories import execution_row
from tether.runtime import errors, hints
from tether.runtime.answer_rules import validate_answer
from tether.runtime.operations.answering import open_waits, resolve_wait
from tether.storage.rows import ExecutionRow

RUN_ID = "ex_" + "b" * 32
APPROVAL: dict[str, Any] = {
    "key": f"{RUN_ID}:approval:publish:4",
    "kind": "approval",
    "name": "publish",
    "prompt": "Publish?",
    "schema": {},
    "inputs": ["ticket", "comment"],
    "required": ["ticket"],
}
FORM = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "size": {"type": "string", "enum": ["s", "m"]},
    },
    "required": ["title", "count", "ratio", "ok", "size"],
}
GATE: dict[str, Any] = {
    "key": f"{RUN_ID}:approval:confirm:4",
    "kind": "approval",
    "name": "confirm",
    "prompt": "Refund 30 EUR?",
    "schema": {
        "type": "object",
        "required": ["decision"],
        "properties": {"decision": {"type": "string", "enum": ["refund", "decline"]}},
    },
    "choices": ["refund", "decline"],
    "inputs": [],
    "required": [],
}
HUMAN: dict[str, Any] = {
    "key": f"{RUN_ID}:human_task:fill:4",
    "kind": "human_task",
    "name": "fill",
    "form": FORM,
}
SIGNAL: dict[str, Any] = {
    "key": f"{RUN_ID}:signal:publish:4",
    "kind": "signal",
    "name": "publish",
    "schema": {},
}
UPDATE: dict[str, Any] = {
    "key": f"{RUN_ID}:update:bump:4",
    "kind": "update",
    "name": "bump",
    "schema": {},
}


def parked(*waits: dict[str, Any]) -> ExecutionRow:
    return execution_row(id=RUN_ID, workflow="review", status="waiting", waits=list(waits))


@pytest.mark.parametrize("wait", [APPROVAL, GATE, HUMAN])
def test_the_example_answer_is_one_the_wait_accepts(wait: dict[str, Any]) -> None:
    """The placeholder a hint shows passes the wait's own checks: a reader who fills it in
    as shown is not refused for its shape."""
    assert validate_answer(wait, hints.example_answer(wait)) == []


def test_a_protocol_gate_is_answered_with_one_of_its_own_choices() -> None:
    """A protocol gate's decision is one of its choices, not approve/reject: the command and
    the tool call a hint shows name its first choice and list the others (our choice)."""
    run = parked(GATE)
    tool, cli = hints.answer_hints(run, GATE, tool="answer_refund")
    assert tool.endswith('response: decision: one of "refund", "decline"')
    assert orjson.loads(shlex.split(cli)[5]) == {"decision": "refund"}


def test_a_hint_names_the_wait_by_name_unless_another_open_wait_shares_it() -> None:
    """Names are for people; a shared name would be ambiguous, so the key is shown."""
    assert hints.wait_ref(parked(APPROVAL, HUMAN), APPROVAL) == "publish"
    assert hints.wait_ref(parked(APPROVAL, SIGNAL), APPROVAL) == APPROVAL["key"]


def test_hints_name_only_the_ways_given_and_the_cli_line_is_a_runnable_command() -> None:
    run = parked(APPROVAL)
    lines = hints.answer_hints(run, APPROVAL, tool="answer_review", tasks_update=True)
    assert [line.split(" ", 2)[:2] for line in lines[:1]] == [["call", "answer_review"]]
    assert APPROVAL["key"] in lines[1] and lines[1].startswith("tasks/update")
    argv = shlex.split(lines[2])
    assert argv[:5] == ["tether", "runs", "answer", RUN_ID, "publish"]
    assert orjson.loads(argv[5]) == {"decision": "approve", "ticket": "..."}
    plain = hints.answer_hints(run, APPROVAL, tool="answer_review", cli=False)
    assert len(plain) == 1 and "tasks/update" not in plain[0]
    assert hints.answer_hints(run, APPROVAL, cli=False) == []
    call = hints.tool_call_hint("answer_review", run, APPROVAL)
    assert call == {
        "tool": "answer_review",
        "arguments": {
            "handle": RUN_ID,
            "wait": "publish",
            "response": {"decision": "approve", "ticket": "..."},
        },
    }


def test_a_name_resolves_to_the_single_open_wait_of_that_name() -> None:
    """A key is taken as given (answer() judges it); a name finds its one open wait; an
    update wait is never answered from outside, so its name resolves to nothing."""
    run = parked(APPROVAL, HUMAN, UPDATE)
    assert resolve_wait(run, "fill") == HUMAN["key"]
    assert resolve_wait(run, "publish") == APPROVAL["key"]
    assert resolve_wait(run, "nope") is None
    assert resolve_wait(run, "bump") is None
    stale = f"{RUN_ID}:approval:publish:2"
    assert resolve_wait(run, stale) == stale
    assert open_waits(run) == [
        {"key": APPROVAL["key"], "kind": "approval", "name": "publish"},
        {"key": HUMAN["key"], "kind": "human_task", "name": "fill"},
    ]


def test_a_name_two_open_waits_share_is_refused_listing_both() -> None:
    with pytest.raises(errors.WaitAmbiguous) as info:
        resolve_wait(parked(APPROVAL, SIGNAL), "publish")
    assert [w["key"] for w in info.value.open_waits] == [APPROVAL["key"], SIGNAL["key"]]
    assert info.value.open_keys == [APPROVAL["key"], SIGNAL["key"]]
    assert isinstance(info.value, errors.WaitNotOpen)
