"""Where a Tether worker's time goes, per run: statements by query, commits, CPU.

A diagnostic beside ``bench/engine.py`` (which gives the figures against the ceiling and
DBOS): each trial queues ``--runs`` runs of the same 3-step workflow (``start_many``, 50 a
statement), starts N worker processes and times the drain, in a fresh database. Per run it
prints the drain's runs/s, the workers' CPU (their own rusage), PostgreSQL's CPU (the
server's exited backends, read from its postmaster: the embedded server only), the database's
commits, and the statements the workers sent, by named query, with their mean time.

    python bench/engine_profile.py                       # 3,000 runs, 1 then 2 workers
    python bench/engine_profile.py --repeat 3 --variant before=/path/to/old/src
    python bench/engine_profile.py --throughput          # starts of one run a statement,
                                                         # from a process of their own, as
                                                         # engine.py's throughput measurement

``--variant NAME=SRC`` runs the workers with SRC first on PYTHONPATH (another checkout's
``src``), alternating with this checkout (``this``) trial by trial, so that a busy machine
weighs on both alike. Statements are counted by a wrapper around asyncpg's query methods in
each worker (``--as-worker``, internal), which adds the same small cost to every variant.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from dbos_side import _create_database, _drop_database, _stop_processes, _with_database
from engine_tether import _collect, _env, _wait_complete, _wait_ready, migrate_database

from tether.storage import embedded

HERE = Path(__file__).resolve().parent
THIS = str(HERE.parent / "src")


def _as_worker(out: str, argv: list[str]) -> int:
    """Run ``tether worker`` counting statements by named query; write them to `out`."""
    import asyncpg.connection

    from tether.cli import main
    from tether.storage.queries import Q

    names = {sql: name for name, sql in Q.items()}
    counts: collections.Counter[str] = collections.Counter()
    seconds: collections.Counter[str] = collections.Counter()
    cls = asyncpg.connection.Connection

    def counted(method: Any) -> Any:
        async def call(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            name = names.get(query, query.split("\n")[0][:40])
            counts[name] += 1
            began = time.perf_counter()
            try:
                return await method(self, query, *args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - began

        return call

    for attr in ("fetch", "fetchrow", "fetchval", "execute"):
        setattr(cls, attr, counted(getattr(cls, attr)))

    def dump() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        Path(out).write_text(json.dumps({"counts": counts, "seconds": seconds, "cpu": cpu}))

    atexit.register(dump)
    return main(argv)


def _postgres_cpu(pid: int | None) -> float:
    """CPU seconds of the server's exited children (backends), or 0 when unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[13:15]) / os.sysconf("SC_CLK_TCK")


async def _commits(dsn: str, name: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        sql = "SELECT xact_commit FROM pg_stat_database WHERE datname = $1"
        return int(await conn.fetchval(sql, name))
    finally:
        await conn.close()


def _spawn(src: str, db_url: str, out: Path) -> subprocess.Popen[bytes]:
    env = dict(_env(db_url), PYTHONPATH=os.pathsep.join([src, str(HERE)]))
    command = [
        sys.executable, __file__, "--as-worker", str(out), "--log-level", "WARNING", "worker",
        f"{HERE / 'engine_app.py'}:app",
    ]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def _starter(db_url: str, runs: int, batch: int) -> list[str]:
    return [
        sys.executable, str(HERE / "engine_starter.py"), "--db-url", db_url,
        "--runs", str(runs), "--lanes", "8", "--batch", str(batch),
    ]  # fmt: skip


def _start_all(command: list[str], db_url: str) -> None:
    subprocess.run(command, env=_env(db_url), check=True, stdout=subprocess.DEVNULL)


def _popen(command: list[str], db_url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, env=_env(db_url), stdout=subprocess.DEVNULL)


async def _drain(
    dsn: str, name: str, src: str, workers: int, args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, Any], list[Path]]:
    """Start the workers (and, with --throughput, the starter: its commits count), wait until
    every run ended, stop them; the timings and each worker's report file."""
    db_url = _with_database(dsn, name)
    outs = [tmp / f"worker-{i}.json" for i in range(workers)]
    procs: list[subprocess.Popen[bytes]] = []
    conn = await asyncpg.connect(db_url)
    try:
        procs += [_spawn(src, db_url, out) for out in outs]
        await _wait_ready(conn, procs, outs)
        if args.throughput:
            procs.append(_popen(_starter(db_url, args.runs, 1), db_url))
        logs = [*outs, tmp / "starter.log"][: len(procs)]  # the starter's: none to show
        await _wait_complete(conn, args.runs, procs, logs, args.timeout)
        return await _collect(conn, args.runs, workers), outs
    finally:
        await conn.close()
        await _stop_processes(procs)  # SIGTERM: each worker writes its report as it exits


async def _trial(
    dsn: str, postmaster: int | None, src: str, workers: int, args: argparse.Namespace
) -> dict[str, Any]:
    name = await _create_database(dsn, "tether_profile")
    tmp = Path(tempfile.mkdtemp(prefix="tether_profile_"))
    try:
        await migrate_database(_with_database(dsn, name))
        if not args.throughput:  # queued before the workers start; not counted
            starter = _starter(_with_database(dsn, name), args.runs, 50)
            await asyncio.to_thread(_start_all, starter, _with_database(dsn, name))
        before, cpu_before = await _commits(dsn, name), _postgres_cpu(postmaster)
        result, outs = await _drain(dsn, name, src, workers, args, tmp)
        await asyncio.sleep(1.0)  # the exited backends' counts land
        result["commits"] = await _commits(dsn, name) - before
        result["postgres_cpu"] = _postgres_cpu(postmaster) - cpu_before
        reports = [json.loads(out.read_text()) for out in outs]
        result["cpu"] = sum(r["cpu"] for r in reports)
        result["counts"] = collections.Counter()
        result["seconds"] = collections.Counter()
        for report in reports:
            result["counts"].update(report["counts"])
            result["seconds"].update(report["seconds"])
        return result
    finally:
        await _drop_database(dsn, name)


def _line(label: str, workers: int, r: dict[str, Any], runs: int, throughput: bool) -> str:
    rate = r["throughput"] if throughput else (runs - 1) / r["drain_seconds"]
    statements = sum(r["counts"].values())
    top = ", ".join(
        f"{q} {n / runs:.3f} ({1000 * r['seconds'][q] / n:.1f} ms)"
        for q, n in r["counts"].most_common(4)
    )
    return (
        f"{label:>10} {workers:>7} {rate:8.1f} {1000 * r['cpu'] / runs:9.2f} "
        f"{1000 * r['postgres_cpu'] / runs:9.2f} {r['commits'] / runs:11.2f} "
        f"{statements / runs:10.2f}\n{'':>10} statements per run: {top}"
    )


async def _main(args: argparse.Namespace) -> None:
    variants = [("this", THIS)] + [(v.split("=", 1)[0], v.split("=", 1)[1]) for v in args.variant]
    server, dsn, postmaster = None, args.dsn, None
    if not dsn:
        folder = Path(tempfile.mkdtemp(prefix="tp", dir="/tmp"))  # short: the socket is in it
        os.chmod(folder, 0o755)  # noqa: S103 — as root, pgserver runs PostgreSQL as another user
        server = embedded.start(folder)
        dsn = server.uri
        postmaster = int((embedded.pgdata_dir(folder) / "postmaster.pid").read_text().split()[0])
    mode = "throughput (single starts)" if args.throughput else "drain (queued by start_many)"
    print(f"{mode}, {args.runs} runs, load average {os.getloadavg()[0]:.1f}")
    print("   variant workers   runs/s worker ms    pg ms commits/run stmts/run")
    try:
        for _ in range(args.repeat):
            for workers in args.workers:
                for label, src in variants:
                    r = await _trial(dsn, postmaster, src, workers, args)
                    print(_line(label, workers, r, args.runs, args.throughput), flush=True)
    finally:
        if server is not None:
            server.stop()
    print(f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--as-worker":
        sys.exit(_as_worker(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--throughput", action="store_true", help="start while workers run")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=SRC")
    parser.add_argument("--dsn", help="PostgreSQL URL with CREATEDB rights (no server CPU)")
    parser.add_argument("--timeout", type=float, default=600.0)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
