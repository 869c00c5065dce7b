"""Approval links and vote policies as pure functions: signing and reading links (a changed
byte, another server's secret, an expired link), the decisions a wait's links take, who a link
may be made for, the vote rules in words (our choice: docs/answering-waits.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.runtime import links, votes
from tether.runtime.links import LinkMinter, LinkRefused
from tether.runtime.notify.links import SignedLinks
from tether.settings import Settings

KEY = links.link_key(b"server secret")
WAIT_KEY = "ex_abc:approval:deploy:7"


def approval(**extra: Any) -> dict[str, Any]:
    return {"key": WAIT_KEY, "kind": "approval", "name": "deploy", "inputs": [], **extra}


def voted(**policy: Any) -> dict[str, Any]:
    made = votes.make_policy(policy.get("approvers"), policy.get("quorum"), None)
    assert made is not None
    return approval(**{votes.POLICY: made.as_json(), votes.VOTES: []})


def test_a_signed_link_reads_back_as_signed() -> None:
    link = links.sign(KEY, WAIT_KEY, "approve", "alice", 2_000_000_000)
    assert links.read(KEY, link.token) == link
    assert (link.execution_id, link.decision, link.approver) == ("ex_abc", "approve", "alice")
    assert len(link.nonce) == 32


def test_a_link_with_any_byte_changed_or_from_another_secret_is_refused() -> None:
    """Tampering with the payload (another decision or approver) or the signature, or a link
    signed with another server's secret, reads as no link at all."""
    link = links.sign(KEY, WAIT_KEY, "approve", "alice", 2_000_000_000)
    payload, mac = link.token.split(".")
    other = links.sign(KEY, WAIT_KEY, "reject", "mallory", 2_000_000_000)
    assert links.read(KEY, f"{other.token.split('.')[0]}.{mac}") is None
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    assert links.read(KEY, f"{payload}.{flipped}") is None
    assert links.read(links.link_key(b"another secret"), link.token) is None
    for junk in ("", ".", "abc", "é.é", "x" * 5000, f"{payload}."):
        assert links.read(KEY, junk) is None


def test_a_link_expires_at_its_time() -> None:
    link = links.sign(KEY, WAIT_KEY, "approve", "alice", 1000)
    assert not link.expired(999.0)
    assert link.expired(1000.0)


def test_each_kind_of_wait_takes_its_own_decisions() -> None:
    assert links.decisions(approval()) == ("approve", "reject", "push_back")
    assert links.decisions(approval(choices=["go", "stop"])) == ("go", "stop")
    assert links.decisions({"kind": "human_task"}) == ("complete", "push_back")
    assert links.decisions({"kind": "human_task", "rules": "scalar", "feedback": None}) == (
        "complete",
    )
    assert links.decisions({"kind": "signal"}) == ()


def test_the_minter_makes_a_url_per_decision_for_one_person() -> None:
    minter = LinkMinter("secret", "https://tether.example.com/", ttl_s=60)
    urls = minter.links(approval(), "alice", now=1000.0)
    assert set(urls) == {"approve", "reject", "push_back"}
    prefix = "https://tether.example.com/console/links/"
    assert all(u.startswith(prefix) for u in urls.values())
    read = {d: links.read(minter.key, u.removeprefix(prefix)) for d, u in urls.items()}
    assert all(r is not None and r.decision == d for d, r in read.items())
    assert {r.expires for r in read.values() if r is not None} == {1060}
    assert len({r.nonce for r in read.values() if r is not None}) == 3


def test_links_are_refused_for_a_non_approver_or_a_wait_people_do_not_decide() -> None:
    minter = LinkMinter("secret", "https://tether.example.com", roles={"ops": {"dan"}})
    with pytest.raises(LinkRefused, match="not among the approvers"):
        minter.links(voted(approvers=["alice", "bob"]), "mallory")
    assert set(minter.links(voted(approvers=["alice", "bob"]), "bob")) == {
        "approve",
        "reject",
        "push_back",
    }
    with pytest.raises(LinkRefused, match="not in role 'ops'"):
        minter.links(voted(approvers="ops"), "alice")
    with pytest.raises(LinkRefused, match="not decided from a link"):
        minter.links({"key": "k", "kind": "signal", "name": "go"}, "alice")
    with pytest.raises(LinkRefused, match="takes no decision"):
        minter.mint(approval(), "alice", "complete")
    with pytest.raises(LinkRefused, match="approver"):
        minter.links(approval(), "a,b")


def test_the_minter_refuses_settings_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="TETHER_STATE_KEY"):
        LinkMinter("", "https://x")
    with pytest.raises(ValueError, match="https://"):
        LinkMinter("s", "ftp://x")
    with pytest.raises(ValueError, match="life"):
        LinkMinter("s", "https://x", ttl_s=0)


def test_a_round_is_decided_by_a_quorum_or_its_first_rejection_or_push_back() -> None:
    two = votes.Policy(quorum=2)
    assert votes.outcome(two, [("a", "approve")]) is None
    assert votes.outcome(two, [("a", "approve"), ("b", "approve")]) == "approve"
    assert votes.outcome(two, [("a", "approve"), ("b", "reject")]) == "reject"
    assert votes.outcome(two, [("a", "push_back")]) == "push_back"


def test_the_decided_answer_holds_the_inputs_and_the_votes() -> None:
    cast = [{"by": "a", "decision": "approve"}, {"by": "b", "decision": "approve"}]
    given = [("approve", {"t": "1", "n": "x"}, None), ("approve", {"t": "2"}, None)]
    assert votes.decided_answer("approve", given, cast) == {
        "decision": "approve",
        "inputs": {"t": "2", "n": "x"},
        "votes": cast,
    }
    assert votes.approvers_of(votes.decided_answer("approve", given, cast)) == ("a", "b")
    rejected = votes.decided_answer("reject", [("reject", {}, "no")], cast[:1])
    assert rejected["reason"] == "no" and rejected["inputs"] == {}


def test_the_votes_read_in_words() -> None:
    wait = voted(approvers=["alice", "bob", "carol"], quorum=2)
    wait[votes.VOTES] = [
        {"by": "alice", "decision": "approve"},
        {"by": "bob", "decision": "reject", "reason": "late"},
    ]
    assert votes.summary(wait) == (
        "1 of 2 approvals: alice approved, bob rejected (late); approvers: alice, bob, carol; "
        "the run's starter may not approve"
    )
    assert votes.summary(approval()) is None


def test_approver_roles_are_read_from_their_setting() -> None:
    assert votes.parse_roles(" finance = dan, erin ; ops=zed") == {
        "finance": frozenset({"dan", "erin"}),
        "ops": frozenset({"zed"}),
    }
    for bad in ("finance", "fi nance=a", "a=b;a=c"):
        with pytest.raises(ValueError):
            votes.parse_roles(bad)


def test_notifications_carry_each_recipients_own_signed_links_where_one_can_be_made() -> None:
    """With TETHER_STATE_KEY and TETHER_PUBLIC_URL, an email's decisions are that recipient's
    signed links; a one-message channel, a signal, or a recipient outside the approvers gets
    the console's run page."""
    setup = Settings.from_env(
        {"TETHER_PUBLIC_URL": "https://t.example.com", "TETHER_STATE_KEY": "k"}
    ).notify_setup("/console")
    assert isinstance(setup.links, SignedLinks)
    page = "https://t.example.com/console/runs/ex_abc"
    mine = setup.links.decisions("ex_abc", approval(), "ann@example.com")
    prefix = "https://t.example.com/console/links/"
    read = {d: links.read(links.link_key(b"k"), u.removeprefix(prefix)) for d, u in mine.items()}
    assert {(d, r.approver) for d, r in read.items() if r is not None} == {
        (d, "ann@example.com") for d in ("approve", "reject", "push_back")
    }
    assert setup.links.decisions("ex_abc", approval(), "") == dict.fromkeys(mine, page)
    outsider = setup.links.decisions("ex_abc", voted(approvers=["bob"]), "ann@example.com")
    assert outsider == dict.fromkeys(mine, page)
    signal = {"key": "ex_abc:signal:go:3", "kind": "signal", "name": "go"}
    assert setup.links.decisions("ex_abc", signal, "ann@example.com") == {"answer": page}
    unsigned = Settings.from_env({"TETHER_PUBLIC_URL": "https://t.example.com"})
    assert not isinstance(unsigned.notify_setup("/console").links, SignedLinks)
