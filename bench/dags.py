"""DAG interpreter overhead: DAG runs against the same work written as plain workflows.

What is measured (wall time of each run, start → ended, in one process with one worker on one
PostgreSQL; ``--repeat`` repeats, each running every case once, every DAG run right before its
baseline; the times printed are medians over the repeats, and a ratio is the median over the
repeats of the DAG run's time over its own repeat's baseline run, so that a pair shares the
machine's moment: on a shared machine whose speed drifts from minute to minute, a ratio of two
medians may compare runs measured in different minutes; that figure is printed too):

* ``chain``: a ``--steps``-step chain of no-op Python actions (``run: noop``) as a DAG, against
  a plain workflow making the same number of ``ctx.step(noop)`` calls in a row;
* ``fanout``: ``--width`` independent no-op actions (one wave) as a DAG, against a plain
  workflow gathering the same ``ctx.step`` calls;
* ``shell``: a ``--shell-steps``-step chain of shell commands as a DAG, against a loop of
  ``subprocess.run`` of the same commands (no database at all).

Targets: DAG/plain ≤ 1.3 for chain and fan-out; shell DAG/loop ≤ 1.5.

The shell case also prints where a DAG shell step's time goes: the command (timed around the
shell runner: take the shell started for the step one step ahead, or spawn it; start the next
step's shell; wait at the gate for the previous step's result to commit; run the command, read
its output, reap it), the writes the run waited for (timed around the run's
`RunIO.write`: the start of a chain's step waits for the previous step's write at its gate
instead, so this is the settle and any write not left in flight), and the rest (start, claim,
wake-ups, the interpreter).

A finished step's result is in PostgreSQL before the next step runs anything (a killed
worker never runs a finished step again), so one commit per step is the floor: `durable` is
the loop of the same commands, each followed by the commit of a one-row insert that waits for
the WAL flush, and `relaxed` the same with `synchronous_commit` off for that insert, as a DAG
step's commit is by default (`TETHER_DAG_STEP_FLUSH` unset: docs/dags.md, "Step commits and
the disk"). A DAG step can beat the floor: its write is in flight while the next step's
shell starts (the shell waits at its gate), where the floor does one after the other.
``shell_flush`` is the same shell DAG with `TETHER_DAG_STEP_FLUSH=1` (every step's commit
waits for the flush), measured in the same repeats.

Usage::

    python bench/dags.py [--dsn URL] [--steps 50] [--width 50] [--shell-steps 20] [--repeat 15]
                         [--poll 1.0] [--loop uvloop|asyncio] [--default-gc]

Without ``--dsn`` an embedded PostgreSQL is started under /tmp and stopped at the end. The
worker polls, the garbage collector is tuned and the event loop is chosen as in ``tether
serve`` / ``tether worker`` (``--poll``, ``--default-gc``, ``--loop`` to change them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tether import gc_tuning
from tether.cli.server import server_loop
from tether.runtime import executor
from tether.runtime.context import Context
from tether.runtime.dag import work
from tether.runtime.dag.work import STEP_FLUSH_ENV
from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings
from tether.storage import embedded

SHELL_COMMAND = "echo step"  # --shell-command overrides
RUNNER = "run_command"  # the shell runner as the DAG step's work calls it (work.run_command)


def noop() -> None:
    return None


def build_app(steps: int, width: int, shell_steps: int, command: str) -> App:
    app = App("bench-dags")
    app.function("noop")(noop)
    chain = "\n".join(f"  - name: s{i}\n    run: noop" for i in range(steps))
    app.dag(f"name: chain\ntype: chain\nsteps:\n{chain}\n")
    fan = "\n".join(f"  - name: f{i}\n    run: noop" for i in range(width))
    app.dag(f"name: fanout\ntype: graph\nsteps:\n{fan}\n")
    # `shell: sh`: the same shell as the subprocess.run loop (a DAG's default is `$SHELL -e`)
    shell = "\n".join(
        f"  - name: c{i}\n    shell: sh\n    command: {command!r}" for i in range(shell_steps)
    )
    app.dag(f"name: shell\ntype: chain\nsteps:\n{shell}\n")

    @app.workflow(name="chain_plain")
    async def chain_plain(ctx: Context) -> None:
        for i in range(steps):
            await ctx.step(noop, name=f"s{i}")

    @app.workflow(name="fanout_plain")
    async def fanout_plain(ctx: Context) -> None:
        await asyncio.gather(*(ctx.step(noop, name=f"f{i}") for i in range(width)))

    return app


async def timed_run(rt: Runtime, workflow: str, input_: Any) -> float:
    began = time.perf_counter()
    started = await rt.ops.start(workflow, input_)
    view = await rt.ops.wait_for_end(started.execution.id, timeout=300)
    if view.current.status != "completed":
        raise RuntimeError(f"{workflow} ended {view.current.status}: {view.current.error}")
    return time.perf_counter() - began


def shell_loop(n: int, command: str) -> float:
    began = time.perf_counter()
    for _ in range(n):
        subprocess.run(["sh", "-c", command], check=True, capture_output=True)  # noqa: S607 — the sh DAG steps use
    return time.perf_counter() - began


class Probe:
    """While entered, times every shell command the DAG runner runs and every durable write a
    run makes (wrapping `work.run_command` and `RunIO.write`); `take()` returns and resets the
    sums: `{"command": s, "write": s, "writes": n}`."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {"command": 0.0, "write": 0.0, "writes": 0}
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> Probe:
        command, write = getattr(work, RUNNER), executor.RunIO.write
        self._saved = (command, write)
        sums = self.sums

        async def timed_command(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await command(*args, **kwargs)
            finally:
                sums["command"] += time.perf_counter() - began

        async def timed_write(io: executor.RunIO, cp: Any) -> Any:
            began = time.perf_counter()
            try:
                return await write(io, cp)
            finally:
                sums["write"] += time.perf_counter() - began
                sums["writes"] += 1

        setattr(work, RUNNER, timed_command)
        setattr(executor.RunIO, "write", timed_write)  # noqa: B010 — mypy: method-assign
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._saved is not None
        setattr(work, RUNNER, self._saved[0])
        setattr(executor.RunIO, "write", self._saved[1])  # noqa: B010 — mypy: method-assign

    def take(self) -> dict[str, float]:
        out = dict(self.sums)
        self.sums.update(command=0.0, write=0.0, writes=0)
        return out


@contextlib.contextmanager
def step_flush() -> Iterator[None]:
    """While entered, DAG steps' commits wait for the WAL flush (`TETHER_DAG_STEP_FLUSH=1`)."""
    os.environ[STEP_FLUSH_ENV] = "1"
    try:
        yield
    finally:
        del os.environ[STEP_FLUSH_ENV]


async def durable_loop(rt: Runtime, n: int, command: str, *, flush: bool = True) -> float:
    """The loop of `shell_loop`, each command followed by a one-row insert's commit (that
    waits for the WAL flush, or with `flush=False` does not)."""
    insert = "INSERT INTO bench_durable_loop (v) VALUES ('step')"
    if not flush:
        insert = (
            "WITH s AS (SELECT set_config('synchronous_commit', 'off', true)) "
            "INSERT INTO bench_durable_loop (v) SELECT 'step' FROM s"
        )
    async with rt.pool.acquire() as conn:
        await conn.execute("CREATE TABLE bench_durable_loop (id bigserial PRIMARY KEY, v text)")
        try:
            began = time.perf_counter()
            for _ in range(n):
                subprocess.run(["sh", "-c", command], check=True, capture_output=True)  # noqa: S607, ASYNC221 — as shell_loop
                await conn.execute(insert)
            return time.perf_counter() - began
        finally:
            await conn.execute("DROP TABLE bench_durable_loop")


async def commit_floor(rt: Runtime, n: int = 50) -> float:
    """Median time of committing a one-row insert (one WAL flush) on the run's database."""
    times = []
    async with rt.pool.acquire() as conn:
        await conn.execute("CREATE TABLE bench_commit_floor (id bigserial PRIMARY KEY, v text)")
        try:
            for _ in range(n):
                began = time.perf_counter()
                await conn.execute("INSERT INTO bench_commit_floor (v) VALUES ('step')")
                times.append(time.perf_counter() - began)
        finally:
            await conn.execute("DROP TABLE bench_commit_floor")
    return statistics.median(times)


#: Each target row: (case, the DAG's runs, the baseline's runs, target); the rest compare.
PAIRS: list[tuple[str, str, str, float | None]] = [
    ("chain", "chain", "chain_plain", 1.3),
    ("fanout", "fanout", "fanout_plain", 1.3),
    ("shell", "shell", "shell_loop", 1.5),
    # For comparison (no target): the shell DAG with TETHER_DAG_STEP_FLUSH=1, and the floors
    # of a step's commit without any DAG (flushed, and not, as a DAG step's is by default).
    ("flush", "shell_flush", "shell_loop", None),
    ("durable", "durable", "shell_loop", None),
    ("relaxed", "relaxed", "shell_loop", None),
]


async def measure(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    app = build_app(args.steps, args.width, args.shell_steps, args.shell_command)
    # The worker polls as a server's does (every second: notifications wake it); at 10 ms, as
    # first written, it sent a claim query every 10 ms of every run measured.
    settings = WorkerSettings(concurrency=4, lease_s=30.0, poll_s=args.poll, shutdown_grace_s=1.0)
    times: dict[str, list[float]] = {}
    rounds: list[dict[str, float]] = []  # the probe's sums, one per probed shell DAG run
    probed: list[float] = []
    async with running(dsn, app, worker_settings=settings, janitor_interval_s=None) as rt:
        if not args.default_gc:
            gc_tuning.tune_gc()  # as `tether serve` and `tether worker` do once started
        for _ in range(args.repeat):
            # Each DAG run right before its baseline, so a pair shares the machine's moment.
            for name, input_ in (
                ("chain", {}),
                ("chain_plain", None),
                ("fanout", {}),
                ("fanout_plain", None),
                ("shell", {}),
            ):
                times.setdefault(name, []).append(await timed_run(rt, name, input_))
            times.setdefault("shell_loop", []).append(
                await asyncio.to_thread(shell_loop, args.shell_steps, args.shell_command)
            )
            with Probe() as probe:  # a run of its own: the probe's wrappers cost a little
                probed.append(await timed_run(rt, "shell", {}))
            rounds.append(probe.take())
            with step_flush():
                times.setdefault("shell_flush", []).append(await timed_run(rt, "shell", {}))
            times.setdefault("durable", []).append(
                await durable_loop(rt, args.shell_steps, args.shell_command)
            )
            times.setdefault("relaxed", []).append(
                await durable_loop(rt, args.shell_steps, args.shell_command, flush=False)
            )
            times.setdefault("commit", []).append(await commit_floor(rt))
    out: dict[str, Any] = {name: statistics.median(values) for name, values in times.items()}
    out["runs"] = times
    # The breakdown is that of the median probed run (medians of parts would not add up).
    middle = sorted(range(len(rounds)), key=lambda i: probed[i])[len(rounds) // 2]
    out.update({f"shell_{key}": value for key, value in rounds[middle].items()})
    out["shell_median_run"] = probed[middle]
    return out


def paired(dag: list[float], base: list[float]) -> float:
    """The median of the repeats' ratios, each DAG run over the baseline run of its repeat."""
    return statistics.median(d / b for d, b in zip(dag, base, strict=True))


@contextlib.contextmanager
def server(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    folder = Path(tempfile.mkdtemp(prefix="tbd", dir="/tmp"))
    os.chmod(folder, 0o755)  # noqa: S103 — as root, pgserver runs PostgreSQL as another user
    srv = embedded.start(folder)
    try:
        yield srv.uri
    finally:
        srv.stop()
        shutil.rmtree(folder, ignore_errors=True)


def report(m: dict[str, Any], steps: int) -> None:
    runs = m["runs"]
    print(f"{'case':<8} {'dag s':>8} {'baseline s':>11} {'ratio':>7} {'target':>7}")
    for case, dag, base, target in PAIRS:
        ratio = paired(runs[dag], runs[base])
        line = f"{case:<8} {m[dag]:8.3f} {m[base]:11.3f} {ratio:7.2f}"
        if target is None:
            print(f"{line} {'-':>7} (comparison)")
            continue
        print(f"{line} {target:7.1f} {'ok' if ratio <= target else 'OVER'}")
    print(
        "(ratio: the median over the repeats of each DAG run's time over its repeat's baseline"
        " run;\n of medians instead: "
        + ", ".join(f"{case} {m[dag] / m[base]:.2f}" for case, dag, base, _ in PAIRS[:3])
        + ")"
    )
    shell_breakdown(m, steps)


def shell_breakdown(m: dict[str, Any], steps: int) -> None:
    """Where one DAG shell step's time goes, per step (ms), against the floor."""
    ms = 1000.0 / steps
    total, command = m["shell_median_run"] * ms, m["shell_command"] * ms
    write = m["shell_write"] * ms
    bare, commit = m["shell_loop"] * ms, m["commit"] * 1000.0
    durable = m["durable"] * ms
    print(
        f"\nshell, per step (ms; {steps} steps, {m['shell_writes']:.0f} writes waited for a run):"
    )
    print(f"  DAG step       {total:7.2f}   bare subprocess.run  {bare:7.2f}")
    print(f"    command      {command:7.2f}   (next shell, gate: last step's commit, run, reap)")
    print(f"    writes       {write:7.2f}   one-row commit floor {commit:7.2f}")
    print(
        f"    rest         {total - command - write:7.2f}   (start, claim, wake-ups, interpreter)"
    )
    print(f"  floor ratio (bare + one commit) / bare = {(bare + commit) / bare:.2f}")
    print(f"  measured: command + commit loop {durable:7.2f} a step, / bare = {durable / bare:.2f}")


def run_on(loop: str, main: Any) -> Any:
    factory = server_loop() if loop == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--width", type=int, default=50)
    parser.add_argument("--shell-steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--shell-command", default=SHELL_COMMAND)
    parser.add_argument("--poll", type=float, default=1.0, help="the worker's poll_s (s)")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop" if server_loop() is not None else "asyncio",
        help="the event loop (default: the one `tether serve` and `tether worker` run on, "
        "uvloop where it is installed)",
    )
    parser.add_argument(
        "--default-gc", action="store_true", help="leave the collector untuned (servers tune it)"
    )
    args = parser.parse_args(argv)
    with server(args.dsn) as dsn:
        print(f"event loop: {args.loop}")
        report(run_on(args.loop, measure(dsn, args)), args.shell_steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
