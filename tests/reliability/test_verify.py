"""The reliability checker checked: real runs of the reliability workflows on a real database
pass it, and each injected fault is reported under its own kind."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
from reliability.chaos import SHORT
from reliability.cluster import Postgres
from reliability.outage import run_outage
from reliability.recorder import Recorder
from reliability.report import PhaseReport, overall, table
from reliability.runs import Plan, RunResult
from reliability.soak import Samples, _judge
from reliability.verify import verify

from reliability import app as rel_app
from tests.conftest import direct_url
from tether.runtime.operations import Operations
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings
from tether.storage.pool import init_connection
from tether.tasks.service import TaskService

FAST = WorkerSettings(concurrency=8, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)
PHASE = "chk"


@dataclass
class Phase:
    rt: Runtime
    db: asyncpg.Pool
    recorder: Recorder
    plans: list[Plan]
    results: list[RunResult]

    def id_of(self, n: int) -> str:
        task_id = self.results[n].task_id
        assert task_id is not None
        return task_id

    async def kinds(self) -> dict[str, int]:
        verdict = await verify(self.db, PHASE, self.plans, self.results, self.recorder.calls)
        return dict(verdict.kinds)


async def _view(ops: Operations, run_id: str) -> dict[str, object]:
    return TaskService(ops, served=lambda _wf: True).render(await ops.get(run_id), elicitation=True)


async def _drive(rt: Runtime, plan: Plan) -> RunResult:
    """What the MCP driver does, through the same operations: start, answer, cancel, end."""
    ops = rt.ops
    started = await ops.start(plan.workflow, plan.input, idempotency_key=plan.key)
    rid = started.execution.id
    if plan.answer or plan.cancel:
        view = await ops.wait_until(
            rid, lambda r: r.status == "waiting" and bool(r.waits), timeout=10
        )
        if plan.answer:
            response = {"decision": "approve", "ticket": plan.ticket}
            await ops.answer(rid, view.current.waits[0]["key"], response)
        else:
            await ops.cancel(rid)
    await ops.wait_for_end(rid, timeout=10)
    return RunResult(plan, rid, await _view(ops, rid))


PLANS = [
    Plan(0, PHASE, "rel_steps", {}, "completed"),
    Plan(1, PHASE, "rel_timer", {"sleep_s": 0.05}, "completed"),
    Plan(2, PHASE, "rel_approval", {}, "completed", answer=True),
    Plan(3, PHASE, "rel_cancel", {"mode": "approval"}, "cancelled", cancel=True),
]


@pytest.fixture
async def phase(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Phase]:
    """The four kinds of run driven to their end on this test's database (the baseline)."""
    db = await asyncpg.create_pool(direct_url(db_url), min_size=1, max_size=4, init=init_connection)
    assert db is not None
    await db.execute(rel_app.SCHEMA)
    recorder = Recorder(db, delay_s=(0.0, 0.0))
    await recorder.start()
    monkeypatch.setenv("REL_RECORDER_URL", recorder.url)
    try:
        async with running(
            db_url, rel_app.app, worker_settings=FAST, janitor_interval_s=None,
            run_migrations=False,
        ) as rt:  # fmt: skip
            results = [await _drive(rt, plan) for plan in PLANS]
            yield Phase(rt, db, recorder, PLANS, results)
    finally:
        await recorder.close()
        await db.close()


async def test_real_runs_pass_the_checker(phase: Phase) -> None:
    verdict = await verify(phase.db, PHASE, phase.plans, phase.results, phase.recorder.calls)
    assert dict(verdict.kinds) == {}, verdict.problems
    assert verdict.ended_ok == len(PLANS)
    assert verdict.plain_calls == 3  # c1, c2 of rel_steps and c0 of rel_timer, once each
    assert verdict.plain_reruns == 0


async def test_lost_run(phase: Phase) -> None:
    await phase.db.execute("DELETE FROM executions WHERE id = $1", phase.id_of(0))
    assert "lost run" in await phase.kinds()


async def test_extra_run_without_a_key(phase: Phase) -> None:
    extra = await phase.rt.ops.start("rel_steps", PLANS[0].input)  # the same input, no key
    await phase.rt.ops.wait_for_end(extra.execution.id, timeout=10)
    kinds = await phase.kinds()
    assert kinds["extra run"] == 1
    assert kinds["duplicated effect"] == 3  # its s1, s2, s3 are seen too


async def test_extra_run_under_a_changed_key(phase: Phase) -> None:
    plan = PLANS[1]
    extra = await phase.rt.ops.start(plan.workflow, plan.input, idempotency_key=plan.key + "-x")
    await phase.rt.ops.wait_for_end(extra.execution.id, timeout=10)
    assert (await phase.kinds())["extra run"] == 1


async def test_duplicated_effect(phase: Phase) -> None:
    await phase.db.execute(
        "INSERT INTO rel_effects (execution_id, step, value, phase, pid)"
        " SELECT execution_id, step, value, phase, pid FROM rel_effects"
        " WHERE execution_id = $1 AND step = 's2'",
        phase.id_of(0),
    )
    assert await phase.kinds() == {"duplicated effect": 1}


async def test_wrong_output(phase: Phase) -> None:
    await phase.db.execute(
        """UPDATE executions SET output = '{"n": 0, "total": 1}' WHERE id = $1""", phase.id_of(0)
    )
    assert await phase.kinds() == {"wrong output": 1}


async def test_missing_ended_event(phase: Phase) -> None:
    await phase.db.execute(
        "DELETE FROM history WHERE execution_id = $1 AND type = 'ended'", phase.id_of(1)
    )
    assert await phase.kinds() == {"missing ended event": 1}


async def test_answer_recorded_twice(phase: Phase) -> None:
    await phase.db.execute(
        "INSERT INTO history (execution_id, event_id, type, data)"
        " SELECT execution_id, max(event_id) + 1, 'answer', '{}' FROM history"
        " WHERE execution_id = $1 GROUP BY execution_id",
        phase.id_of(2),
    )
    assert await phase.kinds() == {"answer recorded twice": 1}


async def test_wrong_task_id(phase: Phase) -> None:
    """The driver's poll for plan 0 followed plan 1's run."""
    other = phase.id_of(1)
    phase.results[0] = RunResult(PLANS[0], other, await _view(phase.rt.ops, other))
    assert "wrong task id" in await phase.kinds()


async def test_a_recorded_plain_step_called_again(phase: Phase) -> None:
    """A call for a step whose record exists (what a replay that re-ran it would send)."""
    body = {"run": phase.id_of(0), "step": "c1", "phase": PHASE, "pid": 1}
    async with httpx.AsyncClient() as http:
        (await http.post(phase.recorder.url, json=body)).raise_for_status()
    assert await phase.kinds() == {"recorded step ran again": 1}


def test_a_skipped_phase_is_not_a_pass() -> None:
    ran = PhaseReport("chaos", runs=3)
    skipped = PhaseReport("outage", skipped="no way to stop the server")
    assert ran.result == "PASS"
    assert skipped.result == "SKIPPED"
    assert not skipped.ok
    assert overall([ran, skipped], 2).startswith("INCOMPLETE")
    assert overall([ran], 2).startswith("FAIL")
    assert overall([ran], 1).startswith("PASS")
    assert "SKIPPED" in table([ran, skipped]).splitlines()[-1]


async def test_outage_on_an_external_server_without_commands_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TETHER_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.delenv("TETHER_PG_STOP_CMD", raising=False)
    monkeypatch.delenv("TETHER_PG_START_CMD", raising=False)
    pg = Postgres()
    report = await run_outage(
        None,  # type: ignore[arg-type]  # never reached: the phase cannot run
        pg,
        None,  # type: ignore[arg-type]
        random.Random(1),
        runs=1,
        outage_s=1.0,
        concurrency=1,
        recorder=None,  # type: ignore[arg-type]
    )
    assert report.result == "SKIPPED"
    assert "TETHER_PG_STOP_CMD" in (report.skipped or "")
    monkeypatch.setenv("TETHER_PG_STOP_CMD", "true")
    monkeypatch.setenv("TETHER_PG_START_CMD", "true")
    assert Postgres().controllable


def test_a_soak_window_without_samples_fails() -> None:
    samples = Samples(t=[1.0, 2.0], conns=[1, 1])
    samples.rss["serve1"] = [100, 100]
    samples.fds["serve1"] = [10, 10]
    report = PhaseReport("soak")
    _judge(report, samples, warmup_s=20.0, duration_s=90.0)
    assert any("no samples" in p for p in report.problems)


def _soak_samples(rss_mib: Callable[[float], float], duration_s: float) -> Samples:
    samples = Samples()
    for i in range(int(duration_s / 2) + 1):  # a sample every 2 s, as the sampler takes them
        t = 2.0 * i
        samples.t.append(t)
        samples.rss["serve1"].append(int(rss_mib(t) * 2**20))
        samples.fds["serve1"].append(20)
        samples.conns.append(5)
    return samples


def _soak_problems(rss_mib: Callable[[float], float]) -> list[str]:
    report = PhaseReport("soak")
    _judge(report, _soak_samples(rss_mib, SHORT.soak_s), SHORT.soak_warmup_s, SHORT.soak_s)
    return report.problems


def test_a_leak_of_one_mb_per_minute_fails_the_short_soak() -> None:
    one_mb_per_min = 1e6 / 2**20 / 60  # MiB per second
    problems = _soak_problems(lambda t: 80 + one_mb_per_min * t)
    assert any("MiB/min" in p for p in problems), problems
    assert _soak_problems(lambda t: 80.0) == []


def test_a_warm_up_step_is_not_a_leak_but_a_step_on_a_leak_is() -> None:
    # CI once failed on serve1 growing ~0.9 MiB once between the windows and staying there.
    def step(t: float) -> float:
        return 80 + (1.5 if t > 60 else 0.0)

    assert _soak_problems(step) == []
    one_mb_per_min = 1e6 / 2**20 / 60
    problems = _soak_problems(lambda t: step(t) + one_mb_per_min * t)
    assert any("MiB/min" in p for p in problems), problems
