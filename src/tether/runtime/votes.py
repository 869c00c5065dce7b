"""Votes: approvals several people decide (a quorum, named approvers or a role, separation of
duties). Pure: no I/O.

An approval with a vote policy (`Policy`) is decided by the votes of the people it admits
rather than by its first answer. A vote is an answer like any other, through the one answer
path (`operations.answering`), made by someone named (`by`):

- a vote from someone the policy does not admit is refused, and the refusal names the rule
  (`refusal`): not among the approvers, not in the role, or the run's own starter approving;
- an approve counts toward the quorum, and the wait stays open under the same key until
  `quorum` different people have approved;
- one rejection or one push-back ends the round at once: it becomes the wait's answer;
- each person votes once a round: the same vote again changes nothing (a duplicate), another
  vote from them is a conflict, as a different answer to an answered key is.

The wait's descriptor holds the policy (`POLICY`) and the votes cast so far (`VOTES`), so every
surface shows them from the run's row alone (`summary`). The votes themselves are kept beside
the run's answers, on the wait's vote channel (`channel`), until the run takes the decided
answer (and its votes with it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tether.specs.approvers import check_approvers, check_quorum, check_role, check_voter

__all__ = [
    "DECIDED_BY",
    "POLICY",
    "VOTES",
    "Policy",
    "approvers_of",
    "cast",
    "channel",
    "check_role",
    "check_voter",
    "decided_answer",
    "make_policy",
    "outcome",
    "parse_roles",
    "policy_of",
    "refusal",
    "summary",
    "vote_key",
]

#: A wait descriptor's vote policy (`Policy.as_json`); absent: the first answer decides.
POLICY: Final = "vote"
#: A wait descriptor's votes cast so far this round, oldest first (`cast`).
VOTES: Final = "votes"
#: The decided answer's record of the votes that decided it.
DECIDED_BY: Final = "votes"


@dataclass(frozen=True)
class Policy:
    """Who decides an approval, and how many must agree.

    Attributes:
        quorum: How many different people must approve.
        approvers: Who may vote, by name (empty: anyone the surface lets answer, or `role`).
        role: Who may vote: the members of this role (`TETHER_APPROVER_ROLES`).
        allow_self_approval: Whether the person who started the run may approve it.
    """

    quorum: int = 1
    approvers: tuple[str, ...] = ()
    role: str | None = None
    allow_self_approval: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "quorum": self.quorum,
            "approvers": list(self.approvers),
            "role": self.role,
            "allow_self_approval": self.allow_self_approval,
        }


def make_policy(
    approvers: Sequence[str] | str | None,
    quorum: int | None,
    allow_self_approval: bool | None,
) -> Policy | None:
    """The policy an approval declares: `approvers` a list of names or a role (a string);
    None when it declares none of the three (its first answer decides, as ever). A policy
    that leaves `allow_self_approval` unset does not allow it.

    Raises:
        ValueError: `quorum` is not a whole number from 1; `approvers` is empty, holds a
            name twice or a name that is not one, has more than 100 names, or fewer names
            than `quorum`; a role is not a role name.
    """
    if approvers is None and quorum in (None, 1) and allow_self_approval is None:
        return None
    count = check_quorum(1 if quorum is None else quorum)
    names: tuple[str, ...] = ()
    role = None
    if isinstance(approvers, str):
        role = check_role(approvers)
    elif approvers is not None:
        names = check_approvers(list(approvers), count)
    return Policy(count, names, role, bool(allow_self_approval))


def policy_of(descriptor: Mapping[str, Any]) -> Policy | None:
    """The vote policy of a wait's descriptor; None when its first answer decides it."""
    raw = descriptor.get(POLICY)
    if not isinstance(raw, Mapping):
        return None
    return Policy(
        quorum=int(raw.get("quorum") or 1),
        approvers=tuple(raw.get("approvers") or ()),
        role=raw.get("role"),
        allow_self_approval=bool(raw.get("allow_self_approval")),
    )


def channel(kind: str, name: str) -> str:
    """Where the votes of the wait `kind:name` are kept beside its answers."""
    return f"vote:{kind}:{name}"


def vote_key(key: str, by: str) -> str:
    """The idempotency key of `by`'s vote on the wait `key` (never a wait key itself)."""
    return f"{key}#{by}"


# --- who may vote --------------------------------------------------------------------------


def refusal(
    policy: Policy,
    wait_name: str,
    by: str | None,
    decision: Any,
    *,
    starter: str | None,
    roles: Mapping[str, Iterable[str]],
) -> str | None:
    """Why `by` may not cast this vote on the approval `wait_name`, naming the rule; None
    when they may. `starter`: who started the run (None: unknown); `roles`: each role's
    members."""
    if by is None:
        return f"approval {wait_name!r} is decided by votes: a vote needs the voter's name"
    if policy.approvers and by not in policy.approvers:
        named = ", ".join(policy.approvers)
        return f"{by} is not among the approvers of approval {wait_name!r} ({named})"
    if policy.role is not None and by not in set(roles.get(policy.role, ())):
        return f"{by} is not in role {policy.role!r}, whose members approve {wait_name!r}"
    if decision == "approve" and not policy.allow_self_approval and by == starter:
        return (
            f"{by} started this run and may not approve it (approval {wait_name!r} does not "
            "allow self-approval)"
        )
    return None


# --- counting ------------------------------------------------------------------------------


def cast(by: str, response: Mapping[str, Any], at: str) -> dict[str, Any]:
    """One vote as the wait's descriptor shows it: who, what, when (and a rejection's
    reason)."""
    vote: dict[str, Any] = {"by": by, "decision": response.get("decision"), "at": at}
    reason = response.get("reason")
    if response.get("decision") == "reject" and isinstance(reason, str) and reason:
        vote["reason"] = reason
    return vote


def outcome(policy: Policy, decisions: Sequence[tuple[str, Any]]) -> str | None:
    """The round's decision from its votes `(by, decision)`, oldest first: the first
    rejection or push-back; else `approve` once `quorum` different people approved; else
    None (still open)."""
    approvers: set[str] = set()
    for by, decision in decisions:
        if decision != "approve":
            return str(decision)
        approvers.add(by)
    return "approve" if len(approvers) >= policy.quorum else None


def decided_answer(
    decision: str,
    given: Sequence[tuple[Any, Mapping[str, Any], Any]],
    votes: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The wait's answer once its round is decided: the decision, its inputs (an approval's:
    every approve's inputs, a later one's over an earlier one's; a rejection's or push-back's:
    its own) in an `inputs` envelope, a rejection's reason, and the votes (`DECIDED_BY`).
    `given`: the round's answers as `(decision, inputs, reason)`, oldest first."""
    inputs: dict[str, Any] = {}
    reason = None
    for voted, fields, why in given:
        if voted != decision:
            continue
        if decision != "approve":
            inputs, reason = dict(fields), why
            break
        inputs.update(fields)
    answer: dict[str, Any] = {"decision": decision, "inputs": inputs}
    if decision == "reject" and isinstance(reason, str):
        answer["reason"] = reason
    answer[DECIDED_BY] = [dict(v) for v in votes]
    return answer


def approvers_of(answer: Mapping[str, Any]) -> tuple[str, ...]:
    """Who approved, by the votes a decided answer records (empty for a first answer)."""
    votes = answer.get(DECIDED_BY)
    if not isinstance(votes, list):
        return ()
    return tuple(
        str(v["by"]) for v in votes if isinstance(v, dict) and v.get("decision") == "approve"
    )


# --- what surfaces show ---------------------------------------------------------------------


def summary(descriptor: Mapping[str, Any]) -> str | None:
    """The wait's votes in words (None when it has no vote policy), e.g. `1 of 2 approvals:
    alice approved; approvers: alice, bob, carol; the run's starter may not approve`."""
    policy = policy_of(descriptor)
    if policy is None:
        return None
    votes = [v for v in descriptor.get(VOTES) or [] if isinstance(v, dict)]
    approved = len({v.get("by") for v in votes if v.get("decision") == "approve"})
    parts = [f"{approved} of {policy.quorum} approval{'s' if policy.quorum != 1 else ''}"]
    if votes:
        parts[0] += ": " + ", ".join(_voted(v) for v in votes)
    if policy.approvers:
        parts.append("approvers: " + ", ".join(policy.approvers))
    elif policy.role is not None:
        parts.append(f"approvers: role {policy.role}")
    if not policy.allow_self_approval:
        parts.append("the run's starter may not approve")
    return "; ".join(parts)


_PAST: Final = {"approve": "approved", "reject": "rejected", "push_back": "pushed back"}


def _voted(vote: Mapping[str, Any]) -> str:
    done = _PAST.get(str(vote.get("decision")), str(vote.get("decision")))
    reason = f" ({vote['reason']})" if vote.get("reason") else ""
    return f"{vote.get('by')} {done}{reason}"


def parse_roles(text: str) -> dict[str, frozenset[str]]:
    """`TETHER_APPROVER_ROLES`: `role=name,name;role=name` → each role's members.

    Raises:
        ValueError: an entry without `=`, a role or member that is not a name, or a role
            given twice.
    """
    roles: dict[str, frozenset[str]] = {}
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        role, sep, members = entry.partition("=")
        if not sep:
            raise ValueError(f"{entry!r} is not role=name,name")
        role = check_role(role.strip())
        if role in roles:
            raise ValueError(f"role {role!r} is given twice")
        roles[role] = frozenset(check_voter(m.strip()) for m in members.split(",") if m.strip())
    return roles
