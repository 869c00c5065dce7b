"""What a command loaded, and from where: the App, its DAG and protocol directories, and the
database. A "not found" error says it, so a user pointed at the wrong App, directory or
database sees which one it was and how to point elsewhere; `tether serve` says it at start.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tether.cli.errors import Usage
from tether.database_url import describe
from tether.loader import load_app
from tether.runtime.registry import App
from tether.settings import Settings

NAMES_SHOWN: Final = 8  # names listed in a message; the rest are counted
SERVERS: Final = frozenset({"serve", "worker"})  # they take the App as an argument


def _source(flag: str | None, variable: str, environ: Mapping[str, str]) -> str:
    if flag is not None:
        return flag
    return variable if environ.get(variable) else "the default"


def plural(count: int, word: str) -> str:
    """`no DAGs`, `1 DAG`, `3 DAGs`."""
    if count == 0:
        return f"no {word}s"
    return f"{count} {word}" + ("" if count == 1 else "s")


def names(items: Iterable[str]) -> str:
    """Up to NAMES_SHOWN names, then how many more."""
    listed = sorted(items)
    shown = ", ".join(listed[:NAMES_SHOWN])
    more = len(listed) - NAMES_SHOWN
    return f"{shown}, … ({more} more)" if more > 0 else shown


def kinds(app: App) -> tuple[list[str], list[str], list[str]]:
    """The App's workflows written in code, its DAGs and its protocols, by name (a DAG or a
    protocol is also registered as a workflow; it is counted once, as what it is)."""
    dags = sorted(app.dags)
    protocols = sorted(app.protocols)
    declared = set(dags) | set(protocols)
    return [n for n in sorted(app.workflows) if n not in declared], dags, protocols


def served(app: App) -> str:
    """`3 workflows, 2 DAGs, no protocols`."""
    workflows, dags, protocols = kinds(app)
    return ", ".join(
        (
            plural(len(workflows), "workflow"),
            plural(len(dags), "DAG"),
            plural(len(protocols), "protocol"),
        )
    )


def check_directories(settings: Settings, loaded: Loaded) -> None:
    """`--dags` / `--protocols` (or TETHER_DAGS / TETHER_PROTOCOLS) must name directories.

    Raises:
        Usage: one of them is missing or not a directory; the message names where it was set.
    """
    for path, source in (
        (settings.dags, loaded.dags_from),
        (settings.protocols, loaded.protocols_from),
    ):
        if path is None or path.is_dir():
            continue
        problem = "not a directory" if path.exists() else "no such directory"
        shown = f"{source} {path}" if source.startswith("--") else f"{source}={path}"
        raise Usage(f"{shown}: {problem}")


@dataclass
class Loaded:
    """What one command loaded and where each thing came from (`--app`, `TETHER_APP`, …)."""

    command: str
    settings: Settings | None = None
    app_from: str = "the default"
    dags_from: str = "TETHER_DAGS"
    protocols_from: str = "TETHER_PROTOCOLS"
    app: App | None = None
    run_id: str | None = None
    tenant: str | None = None

    @classmethod
    def of(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Loaded:
        """Where this command's App and directories come from, before any is loaded."""
        env = os.environ if environ is None else environ
        app_flag = "the APP argument" if args.command in SERVERS else "--app"
        dags = "--dags" if getattr(args, "dags", None) is not None else None
        protocols = "--protocols" if getattr(args, "protocols", None) is not None else None
        return cls(
            command=args.command,
            app_from=_source(app_flag if getattr(args, "app", None) else None, "TETHER_APP", env),
            dags_from=_source(dags, "TETHER_DAGS", env),
            protocols_from=_source(protocols, "TETHER_PROTOCOLS", env),
            run_id=getattr(args, "id", None),
            tenant=getattr(args, "tenant", None),
        )

    def load(self, settings: Settings, *, dags: bool = True, protocols: bool = True) -> App:
        """Load the App, then (`dags`) its DAG directory and (`protocols`) its protocol
        directory, as `tether serve` does, so a command run beside a server knows the same
        workflows (a server's runtime loads them itself). Each refused file is one line on
        stderr. Raises AppLoadError."""
        self.settings = settings
        app = load_app(settings.app)
        self.app = app
        refused = app.load_dags(settings.dags) if dags and settings.dags is not None else {}
        if protocols and settings.protocols is not None:
            refused |= app.load_protocols(settings.protocols)
        for file, problem in refused.items():
            print(f"tether: {file}: {problem}", file=sys.stderr)
        return app

    def summary(self) -> str:
        """`tether.examples:app (the default): 3 workflows (a, b, c), no DAGs (no DAG
        directory), no protocols (no protocol directory)`."""
        settings = self.settings
        if settings is None or self.app is None:
            return "no App"
        workflows, dags, protocols = kinds(self.app)
        parts = [
            _listed(workflows, "workflow"),
            _listed(dags, "DAG") + _directory(settings.dags, self.dags_from, "DAG"),
        ]
        if self.command != "dags":  # `tether dags` loads no protocols
            parts.append(
                _listed(protocols, "protocol")
                + _directory(settings.protocols, self.protocols_from, "protocol")
            )
        return f"{settings.app} ({self.app_from}): " + ", ".join(parts)

    def hint(self) -> str:
        """How to load something else: the flags this command takes."""
        if self.command == "dags":
            return "pass --app MODULE:APP or --dags DIR (or set TETHER_APP, TETHER_DAGS)"
        return (
            "pass --app MODULE:APP, --dags DIR or --protocols DIR "
            "(or set TETHER_APP, TETHER_DAGS, TETHER_PROTOCOLS)"
        )

    def not_found(self, message: str) -> str:
        """A workflow or DAG that is not there: what was loaded instead, and how to change it."""
        return f"{message}; this command loaded {self.summary()} — {self.hint()}"

    def run_not_found(self) -> str:
        """A run id that is not there: which database was asked (and for which tenant)."""
        run = f"no run {self.run_id!r}" if self.run_id else "no run with that id"
        where = describe(self.settings) if self.settings is not None else "the database"
        tenant = f" visible to tenant {self.tenant!r}" if self.tenant else ""
        return (
            f"{run}{tenant} in {where} — `tether runs list` lists its runs; set "
            "TETHER_DATA_DIR or TETHER_DATABASE_URL to use another database"
        )


def _listed(items: list[str], word: str) -> str:
    return plural(len(items), word) + (f" ({names(items)})" if items else "")


def _directory(path: Path | None, source: str, word: str) -> str:
    if path is None:
        return f" (no {word} directory)"
    return f" from {path.resolve()} ({source})"
