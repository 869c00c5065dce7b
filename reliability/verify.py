"""End-of-phase checks against the database, reported by kind.

Every run the suite starts carries its phase and plan number in its input (`phase`, `n`), and
every transaction effect row its phase, so the checker selects by those, never by idempotency
key: a second run for one plan is seen whatever its key (none, or a changed one), and so are
its effects. For each plan, against the row the driver polled (its task id):

- exactly one run exists (`lost run` / `extra run`); the driver's task id is that run's id and
  the task it saw last names it (`wrong task id`);
- the run ended as planned with the planned output, and the driver saw that ending
  (`wrong status`, `wrong output`, `driver saw wrong end`);
- each transaction effect exists exactly once (`missing effect` / `duplicated effect`), no
  effect belongs to another run or step (`stray effect`), a cancelled run never ran past its
  cancellation (`ran past cancel`);
- exactly one `ended` event (`missing ended event` / `duplicate ended event`);
- an approval was delivered once: one signal row and one `answer` event (`answer missing` /
  `answer recorded twice`), and the effect saw the ticket it was given (`wrong output`);
- plain steps (calls to the recorder): a recorded step was called at least once and its
  recorded result is one of its calls (`plain step never ran`, `plain result not from a call`);
  a call that arrived when the step's record already existed, or more calls than claims, is
  `recorded step ran again`; other repeated calls are at-least-once re-executions, counted in
  `plain_reruns` and never a failure. See `reliability/recorder.py` for what is detectable.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from reliability.recorder import Call
from reliability.report import DUP_KINDS, LOST_KINDS, PhaseReport
from reliability.runs import Plan, RunResult

EFFECTS: dict[str, tuple[str, ...]] = {
    "rel_steps": ("s1", "s2", "s3"),
    "rel_timer": ("before", "after"),
    "rel_approval": ("asked", "answered"),
    "rel_cancel": ("began",),
    "rel_lease": ("l1", "l2"),
}
PLAIN: dict[str, tuple[str, ...]] = {"rel_steps": ("c1", "c2"), "rel_timer": ("c0",)}
DB_STATUS = {"completed": "completed", "cancelled": "cancelled"}

KINDS = (
    "lost run",
    "extra run",
    "wrong task id",
    "wrong status",
    "wrong output",
    "driver saw wrong end",
    "missing effect",
    "duplicated effect",
    "stray effect",
    "ran past cancel",
    "missing ended event",
    "duplicate ended event",
    "answer missing",
    "answer recorded twice",
    "plain step never ran",
    "plain result not from a call",
    "recorded step ran again",
)


@dataclass
class Verdict:
    runs: int = 0
    ended_ok: int = 0
    answers: int = 0
    plain_calls: int = 0
    plain_reruns: int = 0  # at-least-once re-executions of plain steps (expected, counted)
    recovered: int = 0  # rel_steps runs finished by a later claim (attempt > 1: never parks)
    ok_ids: set[str] = field(default_factory=set)  # runs that ended exactly as planned
    resumed_ids: set[str] = field(default_factory=set)  # the rel_steps runs with attempt > 1
    kinds: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def flag(self, kind: str, text: str, count: int = 1) -> None:
        assert kind in KINDS, kind
        self.kinds[kind] += count
        if len(self.problems) < 100:
            self.problems.append(f"{kind}: {text}")

    @property
    def lost(self) -> int:
        return sum(n for k, n in self.kinds.items() if k in LOST_KINDS)

    @property
    def duplicated(self) -> int:
        return sum(n for k, n in self.kinds.items() if k in DUP_KINDS)

    @property
    def wrong(self) -> int:
        return sum(n for k, n in self.kinds.items() if k not in LOST_KINDS | DUP_KINDS)


@dataclass
class _Data:
    rows: dict[int, list[asyncpg.Record]]
    effects: dict[str, Counter[str]]
    values: dict[tuple[str, str], list[str]]
    stray: list[asyncpg.Record]
    ended: Counter[str]
    answers: Counter[str]
    signals: Counter[str]
    records: dict[tuple[str, str], Any]
    calls: dict[tuple[str, str], list[Call]]


def expected_output(plan: Plan) -> Any:
    n = plan.n
    if plan.workflow == "rel_steps":
        return {"n": n, "total": 3 * n}
    if plan.workflow == "rel_approval":
        return {"n": n, "ticket": plan.ticket}
    return n


async def _load(db: asyncpg.Pool, phase: str, calls: Sequence[Call]) -> tuple[_Data, set[str]]:
    rows = await db.fetch(
        "SELECT id, idempotency_key, workflow, status, output, error, attempt,"
        " (input->>'n')::int AS n FROM executions WHERE input->>'phase' = $1",
        phase,
    )
    by_n: dict[int, list[asyncpg.Record]] = defaultdict(list)
    for row in rows:
        by_n[row["n"]].append(row)
    ids = {r["id"] for r in rows}
    data = _Data(by_n, defaultdict(Counter), defaultdict(list), [], Counter(), Counter(),
                 Counter(), {}, defaultdict(list))  # fmt: skip
    for eff in await db.fetch(
        "SELECT execution_id, step, value FROM rel_effects WHERE phase = $1", phase
    ):
        if eff["execution_id"] not in ids:
            data.stray.append(eff)
            continue
        data.effects[eff["execution_id"]][eff["step"]] += 1
        data.values[(eff["execution_id"], eff["step"])].append(eff["value"])
    for ev in await db.fetch(
        "SELECT execution_id, type, count(*) AS n FROM history WHERE execution_id = ANY($1)"
        " AND type IN ('ended', 'answer') GROUP BY 1, 2",
        list(ids),
    ):
        target = data.ended if ev["type"] == "ended" else data.answers
        target[ev["execution_id"]] = int(ev["n"])
    for sig in await db.fetch(
        "SELECT execution_id, count(*) AS n FROM signals WHERE execution_id = ANY($1) GROUP BY 1",
        list(ids),
    ):
        data.signals[sig["execution_id"]] = int(sig["n"])
    for rec in await db.fetch(
        "SELECT execution_id, name, result FROM steps WHERE execution_id = ANY($1)"
        " AND kind = 'step' AND done",
        list(ids),
    ):
        data.records[(rec["execution_id"], rec["name"])] = rec["result"]
    for call in calls:
        data.calls[(call.run, call.step)].append(call)
    return data, ids


async def verify(
    db: asyncpg.Pool,
    phase: str,
    plans: Sequence[Plan],
    results: Sequence[RunResult],
    calls: Sequence[Call] = (),
) -> Verdict:
    """Check every run and effect of `phase` against its plans and the driver's results;
    `calls` are the recorder's calls of this phase (plain-step effects)."""
    v = Verdict(runs=len(plans))
    data, ids = await _load(db, phase, calls)
    planned = {p.n for p in plans}
    for n, found in data.rows.items():
        if n not in planned:
            v.flag("extra run", f"{phase} n={n}: {len(found)} run(s) nobody planned", len(found))
    for eff in data.stray:
        v.flag("stray effect", f"{eff['step']} for {eff['execution_id']}, not a run of {phase}")
    for call in calls:
        if call.run not in ids:
            v.flag("stray effect", f"call {call.step} for {call.run}, not a run of {phase}")
    by_plan = {r.plan.n: r for r in results}
    for plan in plans:
        _check_plan(v, plan, data.rows.get(plan.n, []), by_plan.get(plan.n), data)
    return v


def _pick(
    v: Verdict, plan: Plan, found: list[asyncpg.Record], res: RunResult | None
) -> asyncpg.Record:
    """The row the driver followed (by task id); a task id that is none of the plan's rows is
    `wrong task id`, and every other row of the plan is an `extra run`."""
    task_id = res.task_id if res is not None else None
    row = next((r for r in found if r["id"] == task_id), None)
    if task_id is not None and row is None:
        v.flag("wrong task id", f"{plan.key}: driver followed {task_id}, not a run of this plan")
    if row is None:
        row = next((r for r in found if r["idempotency_key"] == plan.key), found[0])
    if len(found) > 1:
        v.flag("extra run", f"{plan.key}: {len(found)} runs {[r['id'] for r in found]}",
               len(found) - 1)  # fmt: skip
    final = res.final if res is not None else None
    if final is not None and final.get("taskId") != row["id"]:
        v.flag("wrong task id", f"{plan.key}: last task seen is {final.get('taskId')}")
    return row


def _check_plan(
    v: Verdict, plan: Plan, found: list[asyncpg.Record], res: RunResult | None, data: _Data
) -> None:
    if not found:
        v.flag("lost run", f"{plan.key}: no run in the database")
        return
    flagged = sum(v.kinds.values())
    row = _pick(v, plan, found, res)
    ok = _check_end(v, plan, row, res)
    for extra in found:
        _check_effects(v, plan, extra, data, primary=extra is row)
        ended = data.ended.get(extra["id"], 0)
        if ended == 0:
            v.flag("missing ended event", f"{plan.key}: {extra['id']} has no ended event")
        elif ended > 1:
            v.flag("duplicate ended event", f"{plan.key}: {ended} ended events", ended - 1)
    rid = row["id"]
    if plan.workflow == "rel_approval":
        ok = _check_answer(v, plan, rid, data) and ok
    _check_plain(v, plan, row, data)
    if plan.workflow == "rel_steps" and row["attempt"] > 1:
        v.recovered += 1
        v.resumed_ids.add(rid)
    if ok and sum(v.kinds.values()) == flagged:
        v.ended_ok += 1
        v.ok_ids.add(rid)


def _check_effects(
    v: Verdict, plan: Plan, row: asyncpg.Record, data: _Data, *, primary: bool
) -> None:
    counts = data.effects.get(row["id"], Counter())
    expected = EFFECTS[plan.workflow]
    for step, count in counts.items():
        if step == "not_reached" and plan.workflow == "rel_cancel":
            v.flag("ran past cancel", f"{plan.key}: effect {step} x{count}")
        elif step not in expected:
            v.flag("stray effect", f"{plan.key}: unexpected effect {step} x{count}")
        elif not primary:
            v.flag("duplicated effect", f"{plan.key}: {step} by extra run {row['id']}", count)
        elif count > 1:
            v.flag("duplicated effect", f"{plan.key}: effect {step} x{count}", count - 1)
    if primary and row["status"] in ("completed", "cancelled"):
        for step in expected:
            if counts.get(step, 0) == 0:
                v.flag("missing effect", f"{plan.key}: effect {step} missing")


def _check_end(v: Verdict, plan: Plan, row: asyncpg.Record, res: RunResult | None) -> bool:
    want = DB_STATUS[plan.expect]
    if row["status"] != want:
        v.flag("wrong status", f"{plan.key}: status {row['status']} (want {want}) {row['error']}")
        return False
    if want == "completed" and row["output"] != expected_output(plan):
        v.flag("wrong output", f"{plan.key}: output {row['output']!r}")
        return False
    final = res.final if res is not None else None
    if final is None or final.get("status") != plan.expect:
        seen = None if final is None else final.get("status")
        v.flag("driver saw wrong end", f"{plan.key}: last task seen {seen}")
        return False
    if plan.expect == "completed":
        result = final.get("result") or {}
        if result.get("isError") or _seen_output(result) != expected_output(plan):
            v.flag("wrong output", f"{plan.key}: driver saw {str(result)[:200]}")
            return False
    return True


def _seen_output(result: dict[str, Any]) -> Any:
    try:
        return json.loads(result["content"][0]["text"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _check_answer(v: Verdict, plan: Plan, rid: str, data: _Data) -> bool:
    ok = True
    v.answers += data.answers.get(rid, 0)
    for label, count in (("signal row", data.signals.get(rid, 0)),
                         ("answer event", data.answers.get(rid, 0))):  # fmt: skip
        if count > 1:
            v.flag("answer recorded twice", f"{plan.key}: {count} {label}s", count - 1)
        elif count == 0:
            v.flag("answer missing", f"{plan.key}: no {label}")
            ok = False
    vals = data.values.get((rid, "answered"), [])
    if vals and vals[0] != plan.ticket:
        v.flag("wrong output", f"{plan.key}: answered with {vals[0]!r}")
        ok = False
    return ok


def _check_plain(v: Verdict, plan: Plan, row: asyncpg.Record, data: _Data) -> None:
    for step in PLAIN.get(plan.workflow, ()):
        calls = data.calls.get((row["id"], step), [])
        v.plain_calls += len(calls)
        record = data.records.get((row["id"], step))
        if record is None:
            if row["status"] == "completed":
                v.flag("plain step never ran", f"{plan.key}: no record of step {step}")
            continue
        if not calls:
            v.flag("plain step never ran", f"{plan.key}: {step} recorded but never called")
            continue
        if (record.get("value") if isinstance(record, dict) else None) not in {c.id for c in calls}:
            v.flag("plain result not from a call", f"{plan.key}: {step} recorded {record!r}")
        late = [c for c in calls if c.recorded_before]
        if late:
            v.flag("recorded step ran again",
                   f"{plan.key}: {step} called {len(late)}x after its record existed",
                   len(late))  # fmt: skip
        elif len(calls) > row["attempt"]:
            v.flag("recorded step ran again",
                   f"{plan.key}: {step} called {len(calls)}x in {row['attempt']} claims",
                   len(calls) - row["attempt"])  # fmt: skip
        v.plain_reruns += len(calls) - 1 - len(late)


async def judge(
    report: PhaseReport,
    db: asyncpg.Pool,
    plans: Sequence[Plan],
    results: Sequence[RunResult],
    calls: Sequence[Call] = (),
) -> Verdict:
    """verify(), folded into the phase's report with each run's own problems."""
    verdict = await verify(db, report.phase, plans, results, calls)
    report.checks.update(verdict.kinds)
    report.plain_reruns += verdict.plain_reruns
    report.problems += verdict.problems
    for res in results:
        report.problems += [f"{res.plan.key}: {p}" for p in res.problems]
    report.figures["runs ended as expected"] = f"{verdict.ended_ok}/{len(plans)}"
    if verdict.plain_calls:
        report.figures["plain-step calls (re-executions)"] = (
            f"{verdict.plain_calls} ({verdict.plain_reruns})"
        )
    return verdict
