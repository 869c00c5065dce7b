"""`tether keys new | rotate` (cli/keys.py), parsed by the real CLI parser."""

from __future__ import annotations

import argparse
import asyncio

import asyncpg
import pytest

from tests.conftest import direct_url
from tether.cli import keys as keys_command
from tether.cli.parser import build_parser
from tether.runtime.context import Context
from tether.runtime.payloads import KeyRing, new_key
from tether.runtime.registry import App
from tether.runtime.service import operations
from tether.settings import Settings


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_keys_new_prints_an_entry_the_setting_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert keys_command.handle(_args("keys", "new", "k9"), Settings()) == 0
    entry = capsys.readouterr().out.strip().rsplit(" ", 1)[-1]
    assert entry.startswith("k9:")
    assert KeyRing.parse(entry).current == "k9"
    with pytest.raises(ValueError, match="kid"):
        keys_command.handle(_args("keys", "new", "bad kid"), Settings())


def test_rotate_without_keys_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="TETHER_ENCRYPTION_KEYS"):
        keys_command.handle(_args("keys", "rotate"), Settings(database_url="postgresql://x/y"))


@pytest.mark.postgres
async def test_rotate_seals_what_is_stored_and_reports_it(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run stored in plaintext is sealed under the current key by `keys rotate --batch 1`."""
    app = App()

    @app.workflow
    async def hello(ctx: Context, name: str) -> str:
        return name

    async with operations(db_url, app) as ops:
        run_id = (await ops.start("hello", "PLAIN-INPUT")).execution.id
    settings = Settings(database_url=db_url, encryption_keys=f"k1:{new_key()}")
    code = await asyncio.to_thread(
        keys_command.handle, _args("keys", "rotate", "--batch", "1"), settings
    )
    assert code == 0
    assert "executions: 1 re-sealed under k1" in capsys.readouterr().out
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        stored = await conn.fetchval("SELECT input::text FROM executions WHERE id = $1", run_id)
    finally:
        await conn.close()
    assert "PLAIN-INPUT" not in stored and '"kid": "k1"' in stored
    async with operations(db_url, app, encryption=settings.encryption()) as ops:
        assert (await ops.get(run_id)).current.input == "PLAIN-INPUT"
