"""The `tether` command line: `serve | worker | migrate | tokens … | runs … | conformance …`.

| module | what |
|---|---|
| `parser` | the argparse tree (`build_parser`; the docs' CLI reference is generated from it) |
| `main` | parse, logging, settings, dispatch; expected failures as one line and an exit code |
| `quiet` | quiet-by-default logging and warnings |
| `server` | `serve`, `worker`, `migrate` |
| `database` | the short commands' database: never created by them |
| `runs` | `runs list/show/start/signal/answer/cancel/terminate/retry` |
| `watch` | `runs watch`: one run live, pushed by LISTEN/NOTIFY |
| `render` | pure: rows in, rich tables and text out (terminal or plain) |
| `output` | JSON, terminal or plain output |
"""

from __future__ import annotations

from tether.cli.main import main
from tether.cli.parser import build_parser

parser = build_parser

__all__ = ["build_parser", "main", "parser"]
