"""Answering open waits and sending signals: the one path every surface answers through.

First answer wins; an identical repeat is a no-op; a different answer to an answered key is a
conflict; a key that is not open is reported with the waits open now, never guessed at.
`answer_wait` also takes a wait's name (the single open wait of that name), for the answer
tool and `tether runs answer`.

An approval decided by votes (`votes`) takes each answer as its giver's vote, in the same
transaction as any answer: the vote is judged (who may cast it: `VoteRefused` naming the
rule), kept on the wait's vote channel and shown on the wait, and once the round is decided
(a quorum of approvals, or the first rejection or push-back) the decided answer is delivered
under the wait's key like any first answer. The same rules hold per voter: their first vote
stands, the same vote again is a duplicate, another vote from them (or any answer once the
wait is decided) a conflict.

An answer may carry `once`, the nonce of a single-use approval link (`runtime/links.py`): it
is marked used in the transaction that accepts the answer, and an answer carrying a nonce
already used is refused with `LinkUsed` before anything else is judged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tether.observability import metrics
from tether.runtime import answer_rules, clock, errors, votes, waits
from tether.runtime.operations.env import Env
from tether.runtime.operations.queries import get
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import ballots, carryover, repo
from tether.storage.rows import BufferedSignal, ExecutionRow

AnswerOutcome = Literal["accepted", "duplicate", "conflict", "not_open"]


@dataclass(frozen=True)
class AnswerResult:
    status: Literal["accepted", "duplicate"]
    execution_id: str
    key: str


@dataclass(frozen=True)
class SignalResult:
    status: Literal["accepted", "duplicate"]
    execution_id: str
    key: str | None


@dataclass(frozen=True)
class _Delivery:
    """One answer to deliver: the wait's key, the open wait, the response, and whether it
    is a vote (the wait is decided by votes)."""

    key: str
    wait: dict[str, Any]
    response: Any
    vote: bool = False


async def answer(
    env: Env,
    execution_id: str,
    key: str,
    response: Any,
    *,
    by: str | None = None,
    once: str | None = None,
) -> AnswerResult:
    """Answer the open wait `key` — the one path every surface answers through.

    First answer wins; an identical repeat is a no-op (`duplicate`); a different answer to
    an answered key raises AnswerConflict; a key that is not open raises WaitNotOpen; an
    answer that does not fit raises AnswerRejected. On an approval decided by votes the
    answer is `by`'s vote (module docstring): a vote `by` may not cast raises VoteRefused.
    `once`: a single-use link's nonce, marked used with the answer (LinkUsed when it was).
    Raises ExecutionNotFound, Unavailable.
    """
    (outcome,) = await answer_many(env, execution_id, [(key, response)], by=by, once=once)
    if outcome == "conflict":
        raise errors.AnswerConflict(f"wait {key!r} was already answered differently")
    if outcome == "not_open":
        run = await _current_or_none(env, execution_id)
        raise _not_open(f"wait {key!r} is not open", run)
    return AnswerResult(outcome, execution_id, key)


def open_waits(run: ExecutionRow) -> list[dict[str, str]]:
    """The run's open waits that can be answered from outside, as `{key, kind, name}`."""
    return [
        {"key": w["key"], "kind": w["kind"], "name": w["name"]}
        for w in run.waits
        if w.get("kind") in answer_rules.ANSWERABLE_KINDS
    ]


def resolve_wait(run: ExecutionRow, ref: str) -> str | None:
    """The key `ref` stands for on `run`: a key as given; a name, the key of the single open
    wait of that name (None when no open wait has it). Pure.

    Raises WaitAmbiguous when several open waits have that name (an approval and a signal
    may share one).
    """
    if waits.parse_key(ref) is not None:
        return ref
    named = [w for w in open_waits(run) if w["name"] == ref]
    if len(named) > 1:
        message = f"{len(named)} open waits are named {ref!r}: answer with the key"
        raise _not_open(message, run, errors.WaitAmbiguous)
    return named[0]["key"] if named else None


def open_wait(run: ExecutionRow, ref: str) -> dict[str, Any] | None:
    """The open wait `ref` (its key, or its name) names on `run`, as `resolve_wait` finds it;
    None when no open wait is. Pure. Raises WaitAmbiguous."""
    key = resolve_wait(run, ref)
    return next((w for w in run.waits if w.get("key") == key), None)


async def answer_wait(
    env: Env, handle: str, ref: str, response: Any, *, by: str | None = None
) -> AnswerResult:
    """Answer the wait `ref` (its key, or its name) of the run this handle resolves to,
    through `answer`. A name answered before with the same response is a no-op (`duplicate`),
    with a different one a conflict, like a key.

    Raises WaitNotOpen (its `open_waits` name the waits open now), WaitAmbiguous,
    AnswerConflict, AnswerRejected, ExecutionNotFound, Unavailable.
    """
    view = await get(env, handle)
    run = view.current
    key = resolve_wait(run, ref)
    if key is None:
        prior = await _answered_by_name(env, run, ref)
        if prior is None:
            raise _not_open(f"no open wait is named {ref!r}", run)
        key = prior
    parts = waits.parse_key(key)
    chain_ids = {r.id for r in view.chain}
    target = parts.execution_id if parts is not None and parts.execution_id in chain_ids else run.id
    return await answer(env, target, key, response, by=by)


async def _answered_by_name(env: Env, run: ExecutionRow, name: str) -> str | None:
    """The key of the last answered wait of this name on `run`, if any (a repeat by name)."""
    async with storage_errors(), env.pool.acquire() as conn:
        history = await repo.get_history(conn, run.id)
    for event in reversed(history):
        data = event.data if event.type == "answer" and isinstance(event.data, dict) else {}
        key = data.get("key")
        parts = waits.parse_key(key) if isinstance(key, str) else None
        if parts is not None and parts.name == name:
            return key
    return None


async def _current_or_none(env: Env, execution_id: str) -> ExecutionRow | None:
    try:
        return (await get(env, execution_id)).current
    except errors.ExecutionNotFound:
        return None


def _not_open(
    message: str, run: ExecutionRow | None, cls: type[errors.WaitNotOpen] = errors.WaitNotOpen
) -> errors.WaitNotOpen:
    """`cls` naming the waits open now on `run` (or that the run has ended)."""
    listed = open_waits(run) if run is not None else []
    if listed:
        now = ", ".join(f"{w['kind']} {w['name']!r} (key {w['key']})" for w in listed)
        message += f"; open now: {now}"
    elif run is not None and not run.live:
        message += f"; the run has ended ({run.status})"
    elif run is not None:
        message += "; the run has no open wait now"
    return cls(message, open_waits=listed)


async def answer_many(
    env: Env,
    execution_id: str,
    answers: Sequence[tuple[str, Any]],
    *,
    by: str | None = None,
    once: str | None = None,
) -> list[AnswerOutcome]:
    """Answer several open waits of one run at once, atomically: every answer for an open
    key is checked before any is delivered, so an AnswerRejected changes nothing. Returns
    per answer `accepted`, `duplicate` (the same answer was given before), `conflict`
    (answered differently before) or `not_open`. `once`: as for `answer`. Raises
    ExecutionNotFound, VoteRefused, LinkUsed, Unavailable."""
    for _, response in answers:
        env.check_payload(response, errors.AnswerRejected)
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        row = await repo.get_execution(conn, execution_id, lock=True)
        if row is None or not env.sees(row):
            raise errors.ExecutionNotFound(f"no run {execution_id!r}")
        if once is not None and await ballots.link_used(conn, once):
            raise errors.LinkUsed("this link has been used already; nothing changed")
        open_waits = {
            d["key"]: d for d in row.waits if d.get("kind") in answer_rules.ANSWERABLE_KINDS
        }
        outcomes: list[AnswerOutcome] = []
        deliver: list[_Delivery] = []
        for key, response in answers:
            outcome, vote = await _judge(conn, env, row.id, open_waits, key, response, deliver, by)
            if outcome == "accepted":
                deliver.append(_Delivery(key, open_waits[key], response, vote))
            outcomes.append(outcome)
        if once is not None and deliver:
            await ballots.use_link(conn, once, row.id, deliver[0].key, by or "")
        ended = await _deliver(conn, row, deliver, by)
    if ended:
        metrics.run_ended(row.workflow, "failed", row.created_at)
    return outcomes


def _repeat(prior: Any, response: Any) -> AnswerOutcome:
    return "duplicate" if prior == response else "conflict"


async def _judge(
    conn: Any,
    env: Env,
    execution_id: str,
    open_waits: dict[str, dict[str, Any]],
    key: str,
    response: Any,
    deliver: list[_Delivery],
    by: str | None,
) -> tuple[AnswerOutcome, bool]:
    """What one answer would do, given the answers already accepted in this call, and
    whether it is a vote. Raises AnswerRejected when the answer does not fit its open wait,
    VoteRefused when `by` may not vote on it."""
    parts = waits.parse_key(key)
    if parts is None or parts.execution_id != execution_id:
        return "not_open", False
    wait = open_waits.get(key)
    policy = votes.policy_of(wait) if wait is not None else None
    if by is not None and (wait is None or policy is not None):
        # `by`'s own vote on this key stands, decided or not: theirs to repeat, not to change
        mine = await repo.get_signal_by_key(conn, execution_id, votes.vote_key(key, by))
        if mine is not None:
            return _repeat(_ballot(mine)[0], response), False
    prior = await repo.get_signal_by_key(conn, execution_id, key)
    if prior is not None:
        return _repeat(prior.payload, response), False
    if wait is None or any(d.key == key for d in deliver):
        return "not_open", False
    if policy is not None:
        decision = response.get("decision") if isinstance(response, dict) else None
        self_check = decision == "approve" and not policy.allow_self_approval
        starter = await ballots.starter(conn, execution_id) if self_check else None
        roles = env.approver_roles
        why = votes.refusal(policy, wait["name"], by, decision, starter=starter, roles=roles)
        if why is not None:
            raise errors.VoteRefused(f"{key}: {why}", errors=[why])
        ballot = votes.channel(wait["kind"], wait["name"])
        cast = await carryover.get_buffered_signals(conn, execution_id, ballot)
        mine_now = next((v for v in cast if v.by == by), None)  # cast under an earlier key
        if mine_now is not None:
            return _repeat(_ballot(mine_now)[0], response), False
    problems = answer_rules.validate_answer(wait, response)
    if problems:
        raise errors.AnswerRejected(f"{key}: " + "; ".join(problems), errors=problems)
    return "accepted", policy is not None


def _ballot(signal: BufferedSignal) -> tuple[Any, str]:
    """A kept vote: the answer as its voter gave it, and when."""
    payload = signal.payload if isinstance(signal.payload, dict) else {}
    return payload.get("response"), str(payload.get("at"))


async def link_used(env: Env, nonce: str) -> bool:
    """Whether the single-use link with this nonce has acted already. Raises Unavailable."""
    async with storage_errors(), env.pool.acquire() as conn:
        return await ballots.link_used(conn, nonce)


async def answer_unchecked(
    env: Env, execution_id: str, key: str, response: Any, *, by: str | None = None
) -> bool:
    """Deliver `response` to the open wait `key` without checking it against the wait: for a
    surface that decided the answer itself (Realm ends an agent step whose refused answers
    spent its budget with a marker its interpreter reads). False when the wait is not open.
    Raises ExecutionNotFound, Unavailable."""
    env.check_payload(response, errors.AnswerRejected)
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        row = await repo.get_execution(conn, execution_id, lock=True)
        if row is None or not env.sees(row):
            raise errors.ExecutionNotFound(f"no run {execution_id!r}")
        wait = next((d for d in row.waits if d.get("key") == key), None)
        if wait is None or await repo.get_signal_by_key(conn, row.id, key) is not None:
            return False
        ended = await _deliver(conn, row, [_Delivery(key, wait, response)], by)
    if ended:
        metrics.run_ended(row.workflow, "failed", row.created_at)
    return True


async def _cast(
    conn: Any, run_id: str, vote: _Delivery, by: str | None, rest: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], Any]:
    """Keep `by`'s vote, show the round's votes on the wait (the run stays parked, its keys
    unchanged), and return the waits so updated with the decided answer (None while the
    round is open)."""
    voter = str(by)  # a vote is judged only with a voter's name
    at = clock.now().isoformat()
    channel = votes.channel(vote.wait["kind"], vote.wait["name"])
    earlier = await carryover.get_buffered_signals(conn, run_id, channel)
    kept = {"response": vote.response, "at": at}
    await repo.insert_signal(conn, run_id, channel, votes.vote_key(vote.key, voter), kept, voter)
    given = [(str(v.by), *_ballot(v)) for v in earlier] + [(voter, vote.response, at)]
    cast = [votes.cast(who, answer, when) for who, answer, when in given]
    rest = [{**d, votes.VOTES: cast} if d.get("key") == vote.key else d for d in rest]
    event = {"key": vote.key, **{k: v for k, v in cast[-1].items() if k != "at"}}
    await repo.answer_keep_parked(conn, run_id, rest, "vote", event)
    policy = votes.policy_of(vote.wait)
    assert policy is not None  # noqa: S101 — a vote's wait has a policy (_judge)
    decision = votes.outcome(policy, [(who, answer.get("decision")) for who, answer, _ in given])
    if decision is None:
        return rest, None
    fields = [
        (answer.get("decision"), answer_rules.answer_fields(answer), answer.get("reason"))
        for _, answer, _ in given
    ]
    return rest, votes.decided_answer(decision, fields, cast)


async def _deliver(conn: Any, row: ExecutionRow, deliver: list[_Delivery], by: str | None) -> bool:
    """Buffer the answers for the run and record them: the run wakes once the last of its
    open waits is answered, or at once when an answer wakes it on its own; an answer that
    ends it ends it here, in the same transaction (`answer_rules.answer_effect`). A vote is kept
    first (`_cast`), and delivered as its wait's answer only when it decides the round.
    Returns whether it ended the run."""
    rest = list(row.waits)
    decided: list[_Delivery] = []
    for item in deliver:
        if item.vote:
            rest, answer_ = await _cast(conn, row.id, item, by, rest)
            if answer_ is None:
                continue
            item = _Delivery(item.key, item.wait, answer_)
        decided.append(item)
    effects = [answer_rules.answer_effect(d.wait, d.response) for d in decided]
    ending = next((i for i, e in enumerate(effects) if e == "end"), None)
    wakes = "wake" in effects
    for i, item in enumerate(decided):
        channel = f"{item.wait['kind']}:{item.wait['name']}"
        await repo.insert_signal(conn, row.id, channel, item.key, item.response, by)
        event = {"key": item.key, "by": by}
        rest = [d for d in rest if d.get("key") != item.key]
        last = i == len(decided) - 1
        others = any(d.get("kind") in answer_rules.ANSWERABLE_KINDS for d in rest)
        if ending is not None or not last or (others and not wakes):
            # Waits opened together are answered one by one: the others keep their keys
            # (unless an answer wakes the run on its own: `Context.wait_any`, a DAG's
            # push-back).
            await repo.answer_keep_parked(conn, row.id, rest, "answer", event)
        else:
            await repo.append_event(conn, row.id, "answer", event)
    if ending is None:
        return False
    item = decided[ending]
    error = answer_rules.rejection_error(item.wait, item.response, by)
    return await repo.end_parked(conn, row.id, "failed", error)


async def signal(
    env: Env,
    execution_id: str,
    name: str,
    payload: Any = None,
    *,
    idempotency_key: str | None = None,
    by: str | None = None,
) -> SignalResult:
    """Send signal `name` to the live run of this handle's chain.

    When that run is parked on a signal wait of that name, this answers it (through
    `answer`); otherwise the signal is buffered for the wait to come. Raises RunEnded,
    AnswerRejected (schema or size), ExecutionNotFound, Unavailable.
    """
    waits.check_name(name)
    env.check_payload(payload, errors.AnswerRejected)
    run = (await get(env, execution_id)).current
    if not run.live:
        raise errors.RunEnded(f"run {run.id!r} has ended ({run.status})")
    wait = next((d for d in run.waits if d.get("kind") == "signal" and d.get("name") == name), None)
    if wait is not None and idempotency_key is None:
        with contextlib.suppress(errors.WaitNotOpen):
            res = await answer(env, run.id, wait["key"], payload, by=by)
            return SignalResult(res.status, run.id, res.key)
    key = f"sig:{idempotency_key}" if idempotency_key is not None else None
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        locked = await repo.get_execution(conn, run.id, lock=True)
        if locked is None or not locked.live:
            raise errors.RunEnded(f"run {run.id!r} has ended")
        if key is not None and await repo.get_signal_by_key(conn, run.id, key) is not None:
            return SignalResult("duplicate", run.id, key)
        await repo.insert_signal(conn, run.id, f"signal:{name}", key, payload, by)
        await repo.append_event(conn, run.id, "signal", {"name": name, "by": by})
    return SignalResult("accepted", run.id, key)


async def note(
    env: Env,
    execution_id: str,
    name: str,
    payload: Any,
    *,
    by: str | None = None,
    counted: bool = False,
) -> None:
    """Buffer `payload` on channel `name` of the live run without waking it: a note the run
    holds (durable, sealed like a signal) and reads only if it ever waits on that channel.
    `counted`: the note is a change of the run (a `signal` event, its version rises), still
    without waking it (a parked run stays parked with the same waits).
    Raises RunEnded, AnswerRejected (size), ExecutionNotFound, Unavailable."""
    waits.check_name(name)
    env.check_payload(payload, errors.AnswerRejected)
    run = (await get(env, execution_id)).current
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        locked = await repo.get_execution(conn, run.id, lock=True)
        if locked is None or not locked.live:
            raise errors.RunEnded(f"run {run.id!r} has ended")
        await repo.insert_signal(conn, run.id, f"signal:{name}", None, payload, by)
        if counted and locked.status == "waiting":
            event = {"name": name, "by": by}
            await repo.answer_keep_parked(conn, run.id, locked.waits, "signal", event)
