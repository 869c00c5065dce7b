"""Payloads at rest on a real PostgreSQL: real runs with encryption on leave only
envelopes in the database and complete correctly, also after a worker restart; rotation
re-seals in batches; a tampered or moved ciphertext is a clear error, never wrong data."""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from tether.runtime import errors, payloads
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.storage.errors import TamperedPayload, UnknownKey

from .conftest import Start

pytestmark = pytest.mark.postgres

K1 = payloads.new_key()
K2 = payloads.new_key()
ON_K1 = payloads.Encryption.parse(f"k1:{K1}")
SECRETS = ("SECRET-INPUT-7", "SECRET-SIGNAL-8", "SECRET-NOTE-9", "SECRET-UPDATE-10")


class Secret(BaseModel):
    code: str


class Amend(BaseModel):
    text: str


def vault_app(calls: Counter[str]) -> App:
    app = App()

    def mark(code: str) -> str:
        calls["mark"] += 1
        return f"step:{code}"

    @app.workflow
    async def vault(ctx: Context, inp: Secret) -> dict[str, Any]:
        stepped = await ctx.step(mark, inp.code)
        signalled = await ctx.wait_for_signal("code")
        gate = await ctx.approval("ok", inputs=["note"])
        assert not isinstance(gate, Exception)
        amended = await ctx.wait_for_update("amend")
        note = gate.inputs["note"] if hasattr(gate, "inputs") else None
        return {"step": stepped, "signal": signalled, "note": note, "amend": amended.output}

    @app.update("vault")
    async def amend(uctx: object, body: Amend) -> dict[str, str]:
        return {"amended": f"{body.text}+handled"}

    return app


EXPECTED = {
    "step": "step:SECRET-INPUT-7",
    "signal": "SECRET-SIGNAL-8",
    "note": "SECRET-NOTE-9",
    "amend": {"amended": "SECRET-UPDATE-10+handled"},
}


async def _drive(start: Start, app: App, encryption: payloads.Encryption | None) -> str:
    """Start a vault run, park it, restart the worker, then answer everything; its id."""
    async with start(app, encryption=encryption) as rt:
        started = await rt.ops.start("vault", {"code": SECRETS[0]})
        run_id = started.execution.id
        await rt.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
    # A new runtime: its worker replays the run from the database (the step's sealed result).
    async with start(app, encryption=encryption) as rt:
        await rt.ops.signal(run_id, "code", SECRETS[1])
        await rt.ops.wait_until(
            run_id, lambda r: any(w["kind"] == "approval" for w in r.waits), timeout=10
        )
        await rt.ops.answer_wait(run_id, "ok", {"decision": "approve", "note": SECRETS[2]})
        await rt.ops.wait_until(
            run_id, lambda r: any(w["kind"] == "update" for w in r.waits), timeout=10
        )
        out = await rt.ops.update(run_id, "amend", {"text": SECRETS[3]}, timeout=10)
        assert out == {"amended": "SECRET-UPDATE-10+handled"}
        view = await rt.ops.wait_for_end(run_id, timeout=10)
        assert view.current.status == "completed", view.current.error
        assert view.current.output == EXPECTED
        assert view.current.input == {"code": SECRETS[0]}
    return run_id


async def _dump(db: asyncpg.Pool) -> str:
    """Every payload-bearing table as raw text, as the database holds it."""
    tables = ("executions", "steps", "signals", "updates", "history")
    # fixed table names, not input: the one place a test builds SQL from a name
    query = "SELECT coalesce(string_agg(t::text, ' '), '') FROM {} t"
    parts = [await db.fetchval(query.format(table)) for table in tables]
    return " ".join(parts)


async def _kids(db: asyncpg.Pool) -> Counter[str | None]:
    """The key id of every non-null stored payload (None: plaintext)."""
    rows = await db.fetch(
        """SELECT input AS v FROM executions UNION ALL SELECT output FROM executions
           UNION ALL SELECT result FROM steps UNION ALL SELECT payload FROM signals
           UNION ALL SELECT input FROM updates UNION ALL SELECT output FROM updates"""
    )
    return Counter(
        r["v"].get("kid") if isinstance(r["v"], dict) else None for r in rows if r["v"] is not None
    )


async def test_a_run_with_encryption_on_stores_envelopes_only_and_replays_after_a_restart(
    db: asyncpg.Pool, start: Start
) -> None:
    """Input, step result, signal, approval answer, update input and result, output: the raw
    tables hold none of the secrets; the run completes with the right output after a worker
    restart, and the step did not run twice."""
    calls: Counter[str] = Counter()
    run_id = await _drive(start, vault_app(calls), ON_K1)
    raw = await _dump(db)
    assert run_id in raw  # the dump is real
    for secret in SECRETS:
        assert secret not in raw
    assert calls["mark"] == 1
    kids = await _kids(db)
    assert set(kids) == {"k1"} and kids["k1"] >= 7


async def test_rotation_reseals_in_batches_and_the_old_key_can_go(
    db: asyncpg.Pool, start: Start
) -> None:
    """Runs written under k1 and one written before encryption was on; rotate to k2 in
    batches of 2; afterwards k2 alone reads everything, and a second rotation has nothing to
    do. A process holding only the old key is refused by name."""
    plain_id = await _drive(start, vault_app(Counter()), None)
    sealed_id = await _drive(start, vault_app(Counter()), ON_K1)
    assert None in await _kids(db)
    rotated = payloads.KeyRing.parse(f"k2:{K2},k1:{K1}")
    progress: list[tuple[str, int]] = []
    report = await payloads.rotate(
        db, rotated, batch=2, progress=lambda t, n: progress.append((t, n))
    )
    assert sum(report.changed.values()) == 0
    kids = await _kids(db)
    assert set(kids) == {"k2"} and report.total == kids["k2"]
    assert len([p for p in progress if p[0] == "steps"]) >= 2  # more than one batch
    again = await payloads.rotate(db, rotated, batch=2)
    assert again.total == 0
    only_k2 = payloads.Encryption.parse(f"k2:{K2}")
    async with start(vault_app(Counter()), encryption=only_k2, workers=0) as rt:
        for run_id in (plain_id, sealed_id):
            view = await rt.ops.get(run_id)
            assert view.current.output == EXPECTED
            steps = await rt.ops.steps(run_id)
            assert steps[0].result == {"value": "step:SECRET-INPUT-7"}
    async with start(vault_app(Counter()), encryption=ON_K1, workers=0) as rt:
        with pytest.raises(errors.Unavailable) as info:
            await rt.ops.get(sealed_id)
        assert isinstance(info.value.__cause__, UnknownKey)
    for secret in SECRETS:
        assert secret not in await _dump(db)


async def test_a_ciphertext_moved_to_another_row_is_an_error_not_that_rows_data(
    db: asyncpg.Pool, start: Start
) -> None:
    """Copying run A's sealed output (and input) onto run B: reading B fails authentication."""
    a = await _drive(start, vault_app(Counter()), ON_K1)
    app = App()

    @app.workflow
    async def vault(ctx: Context, inp: Secret) -> str:
        return "B's own output"

    async with start(app, encryption=ON_K1) as rt:
        b = (await rt.ops.start("vault", {"code": "b"})).execution.id
        await rt.ops.wait_for_end(b, timeout=10)
        await db.execute(
            "UPDATE executions SET output = (SELECT output FROM executions WHERE id = $1) "
            "WHERE id = $2",
            a,
            b,
        )
        with pytest.raises(errors.Unavailable) as info:
            await rt.ops.get(b)
        assert isinstance(info.value.__cause__, TamperedPayload)
        assert (await rt.ops.get(a)).current.output == EXPECTED  # A itself still reads


async def test_a_tampered_step_result_fails_the_run_on_replay(
    db: asyncpg.Pool, start: Start
) -> None:
    """A step result altered while the run is parked: the replay refuses it and the run ends
    failed with a `payload` error, instead of running on with wrong data."""
    calls: Counter[str] = Counter()
    app = vault_app(calls)
    async with start(app, encryption=ON_K1) as rt:
        run_id = (await rt.ops.start("vault", {"code": SECRETS[0]})).execution.id
        await rt.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
        stored = await db.fetchval("SELECT result FROM steps WHERE execution_id = $1", run_id)
        raw = bytearray(base64.b64decode(stored["c"]))
        raw[-1] ^= 0x80
        stored["c"] = base64.b64encode(bytes(raw)).decode()
        await db.execute("UPDATE steps SET result = $2 WHERE execution_id = $1", run_id, stored)
        await rt.ops.signal(run_id, "code", SECRETS[1])
        view = await rt.ops.wait_for_end(run_id, timeout=10)
    assert view.current.status == "failed"
    assert view.current.error["kind"] == "payload"
    assert view.current.error["type"] == "TamperedPayload"
    assert calls["mark"] == 1
