"""End-of-phase checks against the database: every planned run exists once, ended as expected
with the expected output, each effect row exists exactly once, each answer was delivered once,
and each run has exactly one `ended` event."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from reliability.report import PhaseReport
from reliability.runs import Plan, RunResult

EFFECTS: dict[str, tuple[str, ...]] = {
    "rel_steps": ("s1", "s2", "s3"),
    "rel_timer": ("before", "after"),
    "rel_approval": ("asked", "answered"),
    "rel_cancel": ("began",),
    "rel_lease": ("l1", "l2"),
}
DB_STATUS = {"completed": "completed", "cancelled": "cancelled"}


@dataclass
class Verdict:
    runs: int = 0
    ended_ok: int = 0
    lost: int = 0  # missing, or not in the expected terminal state, or wrong output
    duplicated: int = 0  # extra runs, effect rows, answers or ended events
    answers: int = 0
    problems: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.problems) < 100:
            self.problems.append(text)


def expected_output(plan: Plan) -> Any:
    n = plan.n
    if plan.workflow == "rel_steps":
        return {"n": n, "total": 3 * n}
    if plan.workflow == "rel_approval":
        return {"n": n, "ticket": plan.ticket}
    return n


async def verify(db: asyncpg.Pool, plans: list[Plan], results: list[RunResult]) -> Verdict:
    v = Verdict(runs=len(plans))
    prefix = f"rel-{plans[0].phase}-" if plans else "rel-none-"
    rows = await db.fetch(
        "SELECT id, idempotency_key, workflow, status, output, error FROM executions"
        " WHERE idempotency_key LIKE $1 || '%'",
        prefix,
    )
    by_key: dict[str, list[asyncpg.Record]] = defaultdict(list)
    for row in rows:
        by_key[row["idempotency_key"]].append(row)
    ids = [r["id"] for r in rows]
    effects = await _grouped(
        db,
        "SELECT execution_id, step, count(*) AS n, array_agg(value) AS vals FROM rel_effects"
        " WHERE execution_id = ANY($1) GROUP BY 1, 2",
        ids,
    )
    signals = await _counts(
        db,
        "SELECT execution_id, count(*) AS n FROM signals WHERE execution_id = ANY($1) GROUP BY 1",
        ids,
    )
    answers = await _counts(
        db,
        "SELECT execution_id, count(*) AS n FROM history WHERE execution_id = ANY($1)"
        " AND type = 'answer' GROUP BY 1",
        ids,
    )
    ended = await _counts(
        db,
        "SELECT execution_id, count(*) AS n FROM history WHERE execution_id = ANY($1)"
        " AND type = 'ended' GROUP BY 1",
        ids,
    )
    by_plan = {r.plan.n: r for r in results}
    for plan in plans:
        found = by_key.get(plan.key, [])
        if not found:
            v.lost += 1
            v.note(f"{plan.key}: no run in the database")
            continue
        if len(found) > 1:
            v.duplicated += len(found) - 1
            v.note(f"{plan.key}: {len(found)} runs")
        row = found[0]
        rid = row["id"]
        ok = _check_end(v, plan, row, by_plan.get(plan.n))
        for step in EFFECTS[plan.workflow]:
            count = effects.get((rid, step), (0, []))[0]
            if count > 1:
                v.duplicated += count - 1
                v.note(f"{plan.key}: effect {step} x{count}")
            elif count == 0:
                ok = False
                v.lost += 1
                v.note(f"{plan.key}: effect {step} missing")
        if plan.workflow == "rel_cancel" and (rid, "not_reached") in effects:
            ok = False
            v.note(f"{plan.key}: ran past its cancellation")
        if plan.workflow == "rel_approval":
            vals = effects.get((rid, "answered"), (0, []))[1]
            if vals and vals[0] != plan.ticket:
                ok = False
                v.note(f"{plan.key}: answered with {vals[0]!r}")
            v.answers += answers.get(rid, 0)
            for label, count in (
                ("signal row", signals.get(rid, 0)),
                ("answer event", answers.get(rid, 0)),
            ):
                if count > 1:
                    v.duplicated += count - 1
                    v.note(f"{plan.key}: {count} {label}s")
                elif count == 0:
                    ok = False
                    v.note(f"{plan.key}: no {label}")
        if ended.get(rid, 0) != 1:
            v.duplicated += max(ended.get(rid, 0) - 1, 0)
            v.note(f"{plan.key}: {ended.get(rid, 0)} ended events")
        v.ended_ok += ok
    return v


async def judge(
    report: PhaseReport, db: asyncpg.Pool, plans: list[Plan], results: list[RunResult]
) -> Verdict:
    """verify(), folded into the phase's report with each run's own problems."""
    verdict = await verify(db, plans, results)
    report.lost, report.duplicated = verdict.lost, verdict.duplicated
    report.problems += verdict.problems
    for res in results:
        report.problems += [f"{res.plan.key}: {p}" for p in res.problems]
    report.figures["runs ended as expected"] = f"{verdict.ended_ok}/{len(plans)}"
    return verdict


def _check_end(v: Verdict, plan: Plan, row: asyncpg.Record, res: RunResult | None) -> bool:
    want = DB_STATUS[plan.expect]
    if row["status"] != want:
        v.lost += 1
        v.note(f"{plan.key}: status {row['status']} (want {want}) error={row['error']}")
        return False
    if want == "completed" and row["output"] != expected_output(plan):
        v.lost += 1
        v.note(f"{plan.key}: output {row['output']!r}")
        return False
    final = res.final if res is not None else None
    if final is None or final.get("status") != plan.expect:
        v.lost += 1
        v.note(f"{plan.key}: last task seen {None if final is None else final.get('status')}")
        return False
    if plan.expect == "completed" and final["result"].get("isError"):
        v.lost += 1
        v.note(f"{plan.key}: task result isError")
        return False
    return True


async def _grouped(
    db: asyncpg.Pool, sql: str, ids: list[str]
) -> dict[tuple[str, str], tuple[int, list[Any]]]:
    recs = await db.fetch(sql, ids)
    return {(r["execution_id"], r["step"]): (int(r["n"]), list(r["vals"])) for r in recs}


async def _counts(db: asyncpg.Pool, sql: str, ids: list[str]) -> dict[str, int]:
    recs = await db.fetch(sql, ids)
    return {r["execution_id"]: int(r["n"]) for r in recs}
