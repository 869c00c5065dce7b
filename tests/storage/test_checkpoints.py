"""Group commit of checkpoints (storage/checkpoints.py) on a real PostgreSQL: concurrent
writes of different runs share statements, every write lands as `repo.checkpoint` would land
it (records, events, settle) and wakes the run's watchers once committed, each keeps its own
fence, two writes of one run never share a statement, a statement the server refuses
fails only the bad write, the lighter statement of a lone write that only records calls
lands as `repo.checkpoint` lands it, the writer keeps its connection between statements
(given back when unused, at close, after a failure), and a cancelled caller does not cancel
its statement."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.conftest import direct_url
from tests.waiting import until
from tether.storage import repo
from tether.storage.checkpoints import CheckpointWriter, Refill
from tether.storage.errors import IntegrityError, LeaseLost, StorageError
from tether.storage.queries import Q
from tether.storage.repo import Checkpoint
from tether.storage.rows import ENDED_STATUSES, STATUSES

pytestmark = pytest.mark.postgres

INSERT = """
INSERT INTO executions (id, workflow, business_id, status, root_id, last_event_id,
                        lease_owner, attempt)
SELECT id, 'wf', id, 'running', id, 1, 'w', 1 FROM unnest($1::text[]) AS id
"""


class CountingPool:
    """A real pool that records the size (`groups`) and text (`sent`) of each checkpoint
    statement the writer sends, and how often the writer took a connection from it."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.groups: list[int] = []
        self.sent: list[str] = []
        self.acquired = 0
        self.released = 0
        self.gate: asyncio.Event | None = None  # set: statements wait for it before going
        self.arrived = asyncio.Event()  # a statement has reached the gate
        self.max_size = pool.get_max_size()

    async def acquire(self) -> CountingConnection:
        self.acquired += 1
        return CountingConnection(self, await self.pool.acquire())

    async def release(self, conn: CountingConnection) -> None:
        self.released += 1
        await self.pool.release(conn.conn)

    def get_max_size(self) -> int:
        return self.max_size


class CountingConnection:
    def __init__(self, counting: CountingPool, conn: asyncpg.pool.PoolConnectionProxy) -> None:
        self.counting = counting
        self.conn = conn

    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Any]:
        self.counting.groups.append(len(args[0]) if isinstance(args[0], list) else 1)
        self.counting.sent.append(query)
        if self.counting.gate is not None:
            self.counting.arrived.set()
            await self.counting.gate.wait()
        return await self.conn.fetch(query, *args, timeout=timeout)

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        return await self.conn.execute(query, *args, timeout=timeout)  # the wake-ups


@contextlib.asynccontextmanager
async def listening(
    db_url: str, channel: str, expect: int
) -> AsyncIterator[tuple[list[str], asyncio.Event]]:
    """The payloads NOTIFY sends on `channel` while the block runs, and an event set once
    `expect` of them arrived."""
    heard: list[str] = []
    enough = asyncio.Event()

    def hear(*args: Any) -> None:
        heard.append(args[3])
        if len(heard) >= expect:
            enough.set()

    conn = await asyncpg.connect(direct_url(db_url))  # LISTEN needs a direct connection
    await conn.add_listener(channel, hear)
    try:
        yield heard, enough
    finally:
        await conn.close()


def _step(seq: int, result: Any) -> Checkpoint:
    return Checkpoint(
        records=[{"seq": seq, "kind": "step", "name": "add", "result": result, "done": True}],
        events=[{"type": "note", "data": {"seq": seq}}],
    )


async def test_concurrent_writes_share_statements_and_land_as_single_writes(
    db: asyncpg.Pool, db_url: str
) -> None:
    ids = [f"ex_{i}" for i in range(12)]
    await db.execute(INSERT, ids)
    counting = CountingPool(db)
    writer = CheckpointWriter(counting, max_statements=1)  # type: ignore[arg-type]
    steps = await asyncio.gather(
        *(writer.write(i, "w", 1, 1, _step(0, [n, {"list": [n]}])) for n, i in enumerate(ids))
    )
    assert counting.groups == [1, 11]  # 12 writes, 2 statements
    assert {r.last_event_id for r in steps} == {2}
    async with listening(db_url, "tether_change", len(ids)) as (heard, enough):
        settled = await asyncio.gather(
            *(
                writer.write(i, "w", 1, 2, Checkpoint(status="completed", output=[n]))
                for n, i in enumerate(ids)
            )
        )
        await asyncio.wait_for(enough.wait(), 5)
    assert sorted(heard) == sorted(ids)  # each settled run's watchers woken, once
    assert {r.status for r in settled} == {"completed"}
    rows = await db.fetch(
        "SELECT e.id, e.status, e.output, e.ended_at IS NOT NULL AS ended, e.lease_owner, "
        "s.result, h.data FROM executions e JOIN steps s ON s.execution_id = e.id "
        "JOIN history h ON h.execution_id = e.id AND h.event_id = 2 ORDER BY e.id"
    )
    for row in rows:
        n = int(row["id"][3:])
        assert (row["status"], row["output"], row["ended"], row["lease_owner"]) == (
            "completed", [n], True, None
        )  # fmt: skip
        assert (row["result"], row["data"]) == ([n, {"list": [n]}], {"seq": 0})
    assert len(rows) == 12


async def test_each_write_keeps_its_fence_and_one_run_never_shares_a_statement(
    db: asyncpg.Pool,
) -> None:
    await db.execute(INSERT, ["ex_a", "ex_b", "ex_c"])
    counting = CountingPool(db)
    writer = CheckpointWriter(counting, max_statements=1)  # type: ignore[arg-type]
    results = await asyncio.gather(
        writer.write("ex_a", "w", 1, 1, _step(0, 1)),
        writer.write("ex_b", "other", 1, 1, _step(0, 1)),  # not its lease
        writer.write("ex_c", "w", 1, 1, _step(0, 1)),
        writer.write("ex_c", "w", 1, 2, _step(1, 2)),  # the same run again
        return_exceptions=True,
    )
    assert isinstance(results[1], LeaseLost)
    assert counting.groups == [1, 2, 1]  # ex_a; ex_b and the first ex_c; the second ex_c
    events = await db.fetch("SELECT execution_id, event_id FROM history ORDER BY 1, 2")
    assert [tuple(r) for r in events] == [("ex_a", 2), ("ex_c", 2), ("ex_c", 3)]
    assert await db.fetchval("SELECT count(*) FROM steps WHERE execution_id = 'ex_b'") == 0


async def test_a_refused_statement_fails_only_the_bad_write(db: asyncpg.Pool) -> None:
    """A record without a name breaks steps' NOT NULL: the group is refused and retried one
    write per statement, so the good writes land and only the bad one fails."""
    await db.execute(INSERT, ["ex_a", "ex_b", "ex_c"])
    counting = CountingPool(db)
    writer = CheckpointWriter(counting, max_statements=1)  # type: ignore[arg-type]
    bad = Checkpoint(records=[{"seq": 0, "kind": "step", "name": None, "result": 1, "done": True}])
    results = await asyncio.gather(
        writer.write("ex_a", "w", 1, 1, _step(0, 1)),
        writer.write("ex_b", "w", 1, 1, bad),
        writer.write("ex_c", "w", 1, 1, _step(0, 1)),
        return_exceptions=True,
    )
    assert isinstance(results[1], IntegrityError) and isinstance(results[1], StorageError)
    assert counting.groups == [1, 2, 1, 1]  # ex_a; the refused pair; each of it again alone
    done = await db.fetch("SELECT execution_id FROM steps ORDER BY 1")
    assert [r["execution_id"] for r in done] == ["ex_a", "ex_c"]
    assert await repo.get_execution(db, "ex_b") is not None


async def test_a_lone_records_only_write_lands_as_a_checkpoint_does(db: asyncpg.Pool) -> None:
    """The commonest write (a running run's records, nothing else) goes as the lighter
    `checkpoint_step` when it has its statement to itself: the row and the records end as
    `repo.checkpoint` leaves its twin (progress counted, the lost-lease count reset), and a
    write whose fence fails is refused without writing."""
    await db.execute(INSERT, ["ex_a", "ex_b", "ex_c"])
    await db.execute("UPDATE executions SET lost_leases = 2, wake_at = now() + interval '1 h'")
    counting = CountingPool(db)
    writer = CheckpointWriter(counting)  # type: ignore[arg-type]
    records = [
        {"seq": 0, "kind": "step", "name": "add", "result": {"value": 1}, "done": True},
        {"seq": 1, "kind": "uuid", "name": "uuid", "result": "u", "done": True},
    ]
    got = await writer.write("ex_a", "w", 1, 1, Checkpoint(records=records))
    async with db.acquire() as conn:
        want = await repo.checkpoint(conn, "ex_b", "w", 1, 1, Checkpoint(records=records))
    assert counting.sent == [Q["checkpoint_step"]]
    assert (got.status, got.cancel_requested, got.last_event_id) == (
        want.status, want.cancel_requested, want.last_event_id
    )  # fmt: skip
    rows = await db.fetch(
        "SELECT id, status, version, lost_leases, last_event_id, lease_owner, wake_at, "
        "updated_at > created_at AS touched FROM executions WHERE id IN ('ex_a', 'ex_b') "
        "ORDER BY id"
    )
    assert {k: v for k, v in rows[0].items() if k != "id"} == {
        k: v for k, v in rows[1].items() if k != "id"
    }
    assert (rows[0]["version"], rows[0]["lost_leases"]) == (2, 0)
    steps = await db.fetch("SELECT execution_id, seq, kind, name, result, done FROM steps")
    by_run = {r: [tuple(s)[1:] for s in steps if s["execution_id"] == r] for r in ("ex_a", "ex_b")}
    assert by_run["ex_a"] == by_run["ex_b"] and len(by_run["ex_a"]) == 2
    with pytest.raises(LeaseLost):
        await writer.write("ex_c", "other", 1, 1, Checkpoint(records=records))
    assert await db.fetchval("SELECT count(*) FROM steps WHERE execution_id = 'ex_c'") == 0
    assert await db.fetchval("SELECT version FROM executions WHERE id = 'ex_c'") == 1


async def test_a_connection_is_kept_between_statements_and_given_back_when_unused(
    db: asyncpg.Pool,
) -> None:
    """Writes that follow one another run on the connection the first took; it goes back to
    the pool once unused for the linger, at close, and at once after a failed statement; from
    a pool of fewer than four connections nothing is kept."""
    await db.execute(INSERT, ["ex_a", "ex_b"])
    counting = CountingPool(db)
    writer = CheckpointWriter(counting, linger_s=0.2)  # type: ignore[arg-type]
    for seq in range(3):
        await writer.write("ex_a", "w", 1, 1 + seq, _step(seq, seq))
    assert (counting.acquired, counting.released) == (1, 0)
    # unused for the linger (0.2 s), the connection goes back
    await until(lambda: counting.released == 1, what="the connection given back")
    assert (counting.acquired, counting.released) == (1, 1)
    await writer.write("ex_a", "w", 1, 4, _step(3, 3))
    bad = Checkpoint(records=[{"seq": 0, "kind": "step", "name": None, "result": 1, "done": True}])
    with pytest.raises(IntegrityError):
        await writer.write("ex_b", "w", 1, 1, bad)
    assert (counting.acquired, counting.released) == (2, 2)  # the failed one's: at once
    await writer.write("ex_b", "w", 1, 1, _step(0, 0))
    await writer.close()
    assert (counting.acquired, counting.released) == (3, 3)
    assert await db.fetchval("SELECT count(*) FROM steps") == 5
    counting.max_size = 3  # a small pool: the writer keeps nothing from it
    small = CheckpointWriter(counting, linger_s=0.2)  # type: ignore[arg-type]
    await small.write("ex_b", "w", 1, 1, _step(1, 1))
    assert (counting.acquired, counting.released) == (4, 4)


async def test_a_cancelled_caller_does_not_cancel_its_statement(db: asyncpg.Pool) -> None:
    """Cancelling a run while its write is in flight raises CancelledError in the run at
    once; the statement goes on and commits its write and the writes it carries."""
    await db.execute(INSERT, ["ex_a", "ex_b"])
    counting = CountingPool(db)
    counting.gate = asyncio.Event()
    writer = CheckpointWriter(counting, max_statements=1)  # type: ignore[arg-type]
    first = asyncio.create_task(writer.write("ex_a", "w", 1, 1, _step(0, 1)))
    await asyncio.wait_for(counting.arrived.wait(), 5)  # in flight, held at the gate
    second = asyncio.create_task(writer.write("ex_b", "w", 1, 1, _step(0, 2)))
    third = asyncio.create_task(writer.write("ex_a", "w", 1, 2, _step(1, 3)))
    await until(lambda: len(writer._queued) == 2, what="the two later writes queued")
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    third.cancel()  # queued, its statement not started: it still goes
    counting.gate.set()
    assert (await second).status == "running"
    with pytest.raises(asyncio.CancelledError):
        await third
    await writer.close()
    assert counting.groups == [1, 2]
    rows = await db.fetch("SELECT execution_id, seq, result FROM steps ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [("ex_a", 0, 1), ("ex_a", 1, 3), ("ex_b", 0, 2)]


DUE = """
INSERT INTO executions (id, workflow, business_id, status, root_id, last_event_id, wake_at,
                        lease_owner, attempt, lost_leases)
SELECT id, 'wf', id, status, id, 1, now() - make_interval(secs => n), owner, attempt, lost
FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[])
     WITH ORDINALITY AS x(id, status, owner, attempt, lost, n)
"""


class Refilled:
    """The Refill side of a worker: how often it was asked for room, what it was given."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.taken: list[Any] = []

    def room(self, settling: int) -> int:
        self.asked.append(settling)
        return settling

    def take(self, rows: list[Any]) -> None:
        self.taken += rows

    def refill(self, after: int = 3) -> Refill:
        return Refill("w2", 30.0, repo.Abandon(after=after), self.room, self.take)


async def test_a_settling_statement_claims_as_many_due_runs_never_one_it_writes(
    db: asyncpg.Pool, db_url: str
) -> None:
    """Two settles claim two runs for the refill's owner in the same commit, oldest due first;
    a run whose own lease has expired (so it is due) is written, not claimed; a run the claim
    abandons (lost leases) comes back failed with its `ended` event and its watchers woken;
    a write that settles nothing claims nothing."""
    await db.execute(INSERT, ["ex_a", "ex_b", "ex_c"])
    await db.execute("UPDATE executions SET wake_at = now() - interval '1 hour' WHERE id = 'ex_a'")
    await db.execute(
        DUE,
        ["due_lost", "due_1", "due_2", "due_3"],
        ["running", "pending", "pending", "pending"],
        ["gone", None, None, None],
        [4, 0, 0, 0],
        [2, 0, 0, 0],
    )  # wake_at: due_lost the latest of them, due_3 the oldest
    refilled = Refilled()
    counting = CountingPool(db)
    writer = CheckpointWriter(counting, max_statements=1, refill=refilled.refill(after=3))  # type: ignore[arg-type]
    await writer.write("ex_c", "w", 1, 1, _step(0, 1))  # no settle: no room asked, no claim
    assert refilled.asked == [] and refilled.taken == []
    async with listening(db_url, "tether_change", 3) as (heard, enough):
        settled = await asyncio.gather(
            writer.write("ex_a", "w", 1, 1, Checkpoint(status="completed", output=1)),
            writer.write("ex_b", "w", 1, 1, Checkpoint(status="completed", output=2)),
            writer.write("ex_c", "w", 1, 2, Checkpoint(status="completed", output=3)),
        )
        await asyncio.wait_for(enough.wait(), 5)
    assert [r.status for r in settled] == ["completed"] * 3
    assert refilled.asked == [1, 2]  # ex_a alone, then ex_b and ex_c together
    taken = [(r.id, r.status, r.lease_owner, r.attempt) for r in refilled.taken]
    assert taken[0] == ("due_3", "running", "w2", 1)  # the oldest due, with the first settle
    assert sorted(taken[1:]) == [("due_1", "running", "w2", 1), ("due_2", "running", "w2", 1)]
    lost = await repo.get_execution(db, "due_lost")
    assert lost is not None and (lost.status, lost.lease_owner) == ("running", "gone")
    assert sorted(heard) == ["ex_a", "ex_b", "ex_c"]
    # The oldest due run left is the one with lost leases: the next settle abandons it.
    await db.execute(INSERT, ["ex_d"])
    async with listening(db_url, "tether_change", 2) as (heard, enough):
        await writer.write("ex_d", "w", 1, 1, Checkpoint(status="completed", output=4))
        await asyncio.wait_for(enough.wait(), 5)
    assert sorted(heard) == ["due_lost", "ex_d"]
    abandoned = refilled.taken[-1]
    assert (abandoned.id, abandoned.status, abandoned.lease_owner) == ("due_lost", "failed", None)
    history = await db.fetch("SELECT type, data FROM history WHERE execution_id = 'due_lost'")
    assert [h["type"] for h in history] == ["ended"]
    assert history[0]["data"]["error"]["lost_leases"] == 3


def _claim_rules(query: str, params: dict[int, str]) -> str:
    """The claim's `claimed` and `ended` CTEs of `query`, its parameters named by `params`."""
    text = query[query.index("), claimed AS (") : query.index("FROM claimed WHERE status")]
    return re.sub(r"\$(\d+)", lambda m: params.get(int(m.group(1)), m.group(0)), text)


def test_the_refill_claims_by_the_claim_loops_rules() -> None:
    """The claim's rules (lease, attempt, the poison-run guard and its `ended` event) are one
    part, which `claim_executions` and the settling statement's refill both include: the two
    are the same text, parameter for parameter, so the two kinds of claim cannot differ."""
    loop = _claim_rules(
        Q["claim_executions"], {1: "owner", 2: "lease", 4: "after", 5: "error", 6: "message"}
    )
    refill = _claim_rules(
        Q["checkpoint_many"], {18: "owner", 19: "lease", 21: "after", 22: "error", 23: "message"}
    )
    assert "$" not in loop and "$" not in refill
    assert loop == refill


class SettingPool(CountingPool):
    """A CountingPool whose statements run in a transaction of their own that reads
    `synchronous_commit` just before it commits (`commit_settings`)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.commit_settings: list[str] = []

    async def acquire(self) -> CountingConnection:
        self.acquired += 1
        return SettingConnection(self, await self.pool.acquire())


class SettingConnection(CountingConnection):
    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Any]:
        self.counting.sent.append(query)
        async with self.conn.transaction():
            rows = await self.conn.fetch(query, *args, timeout=timeout)
            setting = await self.conn.fetchval("SELECT current_setting('synchronous_commit')")
        assert isinstance(self.counting, SettingPool)
        self.counting.commit_settings.append(setting)
        return rows


async def test_a_records_only_write_may_commit_without_waiting_for_the_flush(
    db: asyncpg.Pool,
) -> None:
    """`Checkpoint.flush=False`: the lone records-only write commits with synchronous_commit
    off for its own transaction (the session keeps the server's setting); the default keeps
    the server's setting; a write that settles ignores the flag and waits."""
    await db.execute(INSERT, ["ex_a", "ex_b", "ex_c"])
    counting = SettingPool(db)
    writer = CheckpointWriter(counting)  # type: ignore[arg-type]
    relaxed = _step(0, {"value": 1})
    relaxed.events, relaxed.flush = [], False
    await writer.write("ex_a", "w", 1, 1, relaxed)
    flushed = _step(0, {"value": 2})
    flushed.events = []
    await writer.write("ex_b", "w", 1, 1, flushed)
    settle = Checkpoint(status="completed", output={"x": 1}, flush=False)
    await writer.write("ex_c", "w", 1, 1, settle)
    await writer.close()
    assert counting.sent == [Q["checkpoint_step"], Q["checkpoint_step"], Q["checkpoint_one"]]
    assert counting.commit_settings == ["off", "on", "on"]
    assert await db.fetchval("SELECT current_setting('synchronous_commit')") == "on"
    values = await db.fetch("SELECT execution_id, result FROM steps ORDER BY execution_id")
    assert [(r["execution_id"], r["result"]) for r in values] == [
        ("ex_a", {"value": 1}),
        ("ex_b", {"value": 2}),
    ]


async def test_every_checkpoint_statement_ends_a_run_exactly_for_the_ended_statuses(
    db: asyncpg.Pool,
) -> None:
    """Our choice: a write that sets a status ends the run (ended_at, expires_at) when, and
    only when, the status is in ENDED_STATUSES, the definition the runtime reads, whichever
    statement carries it (`checkpoint_one`, `checkpoint_many`, `checkpoint`)."""
    found = []
    for status in STATUSES:
        ids = [f"{status}_{way}" for way in ("alone", "grouped_a", "grouped_b", "in_tx")]
        await db.execute(INSERT, ids)
        await db.execute("UPDATE executions SET retention_s = 60 WHERE id = ANY($1)", ids)
        counting = CountingPool(db)
        writer = CheckpointWriter(counting, max_statements=1)  # type: ignore[arg-type]
        settle = Checkpoint(status=status, output=1)
        await asyncio.gather(*(writer.write(i, "w", 1, 1, settle) for i in ids[:3]))
        await writer.close()
        assert counting.sent == [Q["checkpoint_one"], Q["checkpoint_many"]]
        async with db.acquire() as conn:
            await repo.checkpoint(conn, ids[3], "w", 1, 1, settle)
        rows = await db.fetch(
            "SELECT status, ended_at IS NOT NULL AS ended, expires_at IS NOT NULL AS expires "
            "FROM executions WHERE id = ANY($1)",
            ids,
        )
        found += [(r["status"], r["ended"], r["expires"]) for r in rows]
    ended = ENDED_STATUSES
    assert sorted(found) == sorted((s, s in ended, s in ended) for s in STATUSES for _ in range(4))
