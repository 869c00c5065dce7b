"""`tether keys new | rotate`: payload encryption keys (docs/operating.md, "Encryption at rest").

Its parser is in `cli/parser.py`; `cli/main.py` calls `handle(args, settings)`.

- `keys new [KID]` prints a fresh random AES-256 key as a `TETHER_ENCRYPTION_KEYS` entry.
- `keys rotate [--batch N]` re-seals every stored payload under the current (first) key of
  `TETHER_ENCRYPTION_KEYS`, N rows at a time; runs may go on meanwhile. Afterwards the older
  keys can be dropped from the setting.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from tether.cli.errors import Usage
from tether.database_url import existing_database
from tether.runtime import errors as rt_errors
from tether.runtime import payloads
from tether.runtime.service import rotate_keys
from tether.settings import Settings


def handle(args: argparse.Namespace, settings: Settings) -> int:
    """Run `tether keys …`; the exit status. Raises Usage for bad settings or arguments
    (the CLI prints it and exits 2), NoDatabase when there is no database to rotate."""
    if args.action == "new":
        kid = args.kid or time.strftime("k%Y%m%d%H%M%S", time.gmtime())
        entry = f"{kid}:{payloads.new_key()}"
        try:
            payloads.KeyRing.parse(entry)  # the kid is checked as the setting will check it
        except ValueError as exc:
            raise Usage(str(exc)) from None
        print(
            f"TETHER_ENCRYPTION_KEYS entry (put it first; keep the old keys until "
            f"`tether keys rotate` has run): {entry}"
        )
        return 0
    encryption = settings.encryption()
    if encryption is None:
        raise Usage("TETHER_ENCRYPTION_KEYS is not set: nothing to rotate to")
    if args.batch < 1:
        raise Usage("--batch must be at least 1")
    with existing_database(settings) as dsn:
        return asyncio.run(_rotate(dsn, encryption.keys, args.batch))


async def _rotate(dsn: str, keys: payloads.KeyRing, batch: int) -> int:
    def progress(table: str, done: int) -> None:
        print(f"  {table}: {done} re-sealed", file=sys.stderr)

    try:
        report = await rotate_keys(dsn, keys, batch=batch, progress=progress)
    except rt_errors.Unavailable as exc:
        print(f"tether: rotation stopped: {exc.message}", file=sys.stderr)
        return 1
    for table, count in report.resealed.items():
        changed = report.changed[table]
        note = f" ({changed} changed meanwhile: run rotate again)" if changed else ""
        print(f"{table}: {count} re-sealed under {keys.current}{note}")
    return 0
