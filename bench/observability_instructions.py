"""Observability overhead in CPU instructions (valgrind's callgrind), which a busy machine
does not change: `tasks/get` per request and a three-step run per run, off / metrics /
tracing (sampled at 100 %, exported over OTLP/HTTP to a local sink).

* `tasks/get`: the whole app called as a raw ASGI application in one process (as
  bench/tasks_get_cpu.py does) under callgrind with instrumentation off; after 300 requests of
  warm-up it is switched on (`callgrind_control -i on`) for `--requests` requests and the
  flush of their spans through the exporter, then off.
* engine: one worker process (bench/engine_tether.py's throughput measurement, `--runs`
  runs) under callgrind, counting from ready to stop.

`--src DIR` puts another tree's src first on PYTHONPATH (a before/after comparison: make one
with ``git worktree add --detach /tmp/old <commit>``). Needs valgrind. About a minute a figure.

Usage: ``python bench/observability_instructions.py [--requests 200] [--runs 200] [--src DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import dbos_side  # noqa: E402 — sibling scripts, importable once BENCH is on the path
import engine_tether as et  # noqa: E402
import tasks_get as tg  # noqa: E402

import observability as ob  # noqa: E402

MODES = ("off", "metrics", "tracing")
COLLECTED = re.compile(r"Collected : (\d+)")


def _valgrind(out: Path) -> list[str]:
    valgrind = shutil.which("valgrind") or "valgrind"
    return [valgrind, "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def _instrument(pid: int, on: bool) -> None:
    control = shutil.which("callgrind_control") or "callgrind_control"
    switch = "on" if on else "off"
    subprocess.run([control, "-i", switch, str(pid)], check=True, stdout=subprocess.DEVNULL)


def _env(mode_env: dict[str, str], src: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "OTEL_"))}
    env.update(mode_env, PYTHONMALLOC="malloc")  # malloc: valgrind sees every allocation
    if src:
        env["PYTHONPATH"] = src
    return env


async def _child(dsn: str, requests: int) -> None:
    """In the measured process: warm up, then `requests` tasks/get between two handshakes."""
    import orjson
    from tasks_get_ceilings import tether_app
    from tasks_get_cpu import _call

    from tether.observability import tracing

    await tg.migrate_db(dsn)
    app = tether_app(dsn)
    async with app.router.lifespan_context(app):
        created = await _call(app, "tools/call", {"name": "parked", "arguments": {}}, "parked")
        task_id = created["taskId"]
        for _ in range(200):  # until the run has parked on its signal
            task = await _call(app, "tasks/get", {"taskId": task_id}, task_id)
            if "waiting" in orjson.dumps(task).decode():
                break
            await asyncio.sleep(0.05)
        for _ in range(300):
            await _call(app, "tasks/get", {"taskId": task_id}, task_id)
        flush = tracing._provider.force_flush if tracing.enabled() else lambda: None
        flush()
        print("READY", flush=True)
        sys.stdin.readline()
        for _ in range(requests):
            await _call(app, "tasks/get", {"taskId": task_id}, task_id)
        flush()
        print("DONE", flush=True)
        sys.stdin.readline()


def tasks_get(dsn: str, mode_env: dict[str, str], args: argparse.Namespace, out: Path) -> float:
    """Instructions per tasks/get."""
    command = [*_valgrind(out), sys.executable, __file__, "--child", dsn, str(args.requests)]
    env = _env({**mode_env, "TETHER_WORKERS": "1"}, args.src)  # as bench/tasks_get_cpu.py
    with subprocess.Popen(
        command, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None  # the PIPEs
        if not proc.stdout.readline().startswith("READY"):
            raise RuntimeError(f"tasks/get child failed: {proc.communicate()[1][-2000:]}")
        _instrument(proc.pid, True)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        proc.stdout.readline()
        _instrument(proc.pid, False)
        _, err = proc.communicate("go\n")
    return int(COLLECTED.findall(err)[-1]) / args.requests


async def engine(dsn: str, mode_env: dict[str, str], args: argparse.Namespace, out: Path) -> float:
    """Instructions per run in the worker, from ready to stop."""
    plain = et._spawn_worker, et._wait_ready, et._stop_processes
    logs: list[Path] = []
    texts: list[str] = []

    def spawn(db_url: str, log: Path) -> subprocess.Popen[bytes]:
        command = [*_valgrind(out), sys.executable, "-m", "tether", "--log-level", "WARNING"]
        env = _env({**et._env(db_url), **mode_env}, args.src)
        logs.append(log)
        with log.open("wb") as sink:
            return subprocess.Popen(
                [*command, "worker", et.APP_SPEC], stdin=subprocess.DEVNULL, stdout=sink,
                stderr=sink, env=env,
            )  # fmt: skip

    async def ready(conn: Any, procs: list[Any], files: list[Path]) -> int:
        polls = await plain[1](conn, procs, files)
        _instrument(procs[0].pid, True)
        return polls

    async def stop(procs: list[Any]) -> None:
        for proc in procs:
            if proc.poll() is None:
                _instrument(proc.pid, False)
        await plain[2](procs)
        texts.append(logs[-1].read_text("utf-8", "replace"))  # before its folder goes

    et._spawn_worker, et._wait_ready, et._stop_processes = spawn, ready, stop
    et.READY_TIMEOUT_SEC = 300.0  # start-up under valgrind
    name = await dbos_side._create_database(dsn, "tether_instr")
    try:
        await et.measure_tether(dbos_side._with_database(dsn, name), args.runs, 1, timeout_sec=900)
    finally:
        et._spawn_worker, et._wait_ready, et._stop_processes = plain
        await dbos_side._drop_database(dsn, name)
    return int(COLLECTED.findall(texts[-1])[-1]) / args.runs


async def main_async(args: argparse.Namespace) -> None:
    with (
        tg.embedded_postgres() as (dsn, _),
        ob.otlp_sink() as sink,
        tempfile.TemporaryDirectory() as tmp,
    ):
        out = Path(tmp) / "callgrind.out"
        await tg.migrate_db(dsn)
        envs = ob.modes("otlp", sink)
        figures: dict[str, dict[str, float]] = {"tasks/get": {}, "engine": {}}
        for mode in MODES:
            db = await tg.create_database(dsn, f"instr_{mode}")
            figures["tasks/get"][mode] = tasks_get(db, envs[mode], args, out)
            if not args.skip_engine:
                figures["engine"][mode] = await engine(dsn, envs[mode], args, out)
            print(mode, {k: v.get(mode) for k, v in figures.items()}, file=sys.stderr)
    print("| measure | " + " | ".join(MODES) + " |\n| --- |" + " --- |" * len(MODES))
    for measure, row in figures.items():
        if row:
            cells = [f"{row[m] / 1000:,.0f} k ({row[m] / row['off']:.2f}x)" for m in MODES]
            print(f"| {measure}, instructions an item | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--src", help="another tree's src directory, first on PYTHONPATH")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.child[0], int(args.child[1])))
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
