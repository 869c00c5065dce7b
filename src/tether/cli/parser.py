"""The `tether` command tree (argparse). Pure: building it touches nothing.

`--json`, `--verbose` and `--log-level` are accepted anywhere on the command line (before or
after the subcommand), and `--app` anywhere after `runs`: each subparser repeats them with a
suppressed default, so a flag given late overrides the root's default and one given early is
kept.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

from tether import __version__
from tether.runtime.statuses import STATUSES

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# `tether runs DECISION RUN STEP …` → the decision an approval gate or human task is given
DECISIONS = {
    "approve": "approve",
    "reject": "reject",
    "push-back": "push_back",
    "complete": "complete",
}
DAGS_HELP = "directory of DAG files (default: TETHER_DAGS)"
PROTOCOLS_HELP = "directory of protocol workflows, Realm YAML (default: TETHER_PROTOCOLS)"
TENANT_HELP = "act as a caller bound to this tenant: see and start only its runs"
APP_HELP = "module:attr or path/to/file.py:attr (default: TETHER_APP, else the examples)"


class Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line (exit 2) and which takes no
    abbreviation of an option (`--prot` is not `--protocols`): a prefix that matches today
    could match another option tomorrow, or silently give a value to the wrong one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _global_flags(p: argparse.ArgumentParser, *, root: bool) -> None:
    default = (lambda value: value) if root else (lambda _value: argparse.SUPPRESS)
    p.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output"
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default(False),
        help="show the embedded PostgreSQL's and the libraries' log lines",
    )
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=default(None),
        help="log level (default: INFO for serve and worker, WARNING otherwise)",
    )


def _command(
    sub: argparse._SubParsersAction[Parser], name: str, help_text: str, description: str = ""
) -> Parser:
    p = sub.add_parser(
        name, help=help_text, description=description or help_text[:1].upper() + help_text[1:] + "."
    )
    _global_flags(p, root=False)
    return p


def build_parser() -> Parser:
    """The whole `tether` parser (the docs' CLI reference is generated from it)."""
    p = Parser(prog="tether", description="Durable work for AI agents.")
    _global_flags(p, root=True)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _servers(sub)
    _command(sub, "migrate", "apply database migrations")
    _tokens(sub)
    _runs(sub)
    _dags(sub)
    _keys(sub)
    _links(sub)

    # Everything after `conformance` goes to the harness's own parser (tether-conformance).
    sub.add_parser(
        "conformance", help="black-box conformance harness (--help for its options)", add_help=False
    )
    return p


def _servers(sub: argparse._SubParsersAction[Parser]) -> None:
    serve = _command(
        sub,
        "serve",
        "HTTP endpoint and workers in one process",
        "Serve the App over MCP (HTTP) and run its workflows. Without TETHER_DATABASE_URL it "
        "starts PostgreSQL under TETHER_DATA_DIR (default ./.tether). Ctrl-C stops it (exit 130).",
    )
    serve.add_argument("app", nargs="?", help=APP_HELP)
    serve.add_argument("--host", help="address to listen on (default: TETHER_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (default: TETHER_PORT)")
    serve.add_argument("--workers", type=int, help="concurrent runs in this process")
    serve.add_argument("--no-workers", action="store_true", help="serve HTTP only")
    serve.add_argument("--dags", help=DAGS_HELP + "; reloaded when its files change")
    serve.add_argument("--protocols", help=PROTOCOLS_HELP)

    worker = _command(sub, "worker", "workers only", "Run the App's workflows without HTTP.")
    worker.add_argument("app", nargs="?", help=APP_HELP)
    worker.add_argument("--workers", type=int, help="concurrent runs in this process")
    worker.add_argument("--dags", help=DAGS_HELP + "; reloaded when its files change")
    worker.add_argument("--protocols", help=PROTOCOLS_HELP)


def _tokens(sub: argparse._SubParsersAction[Parser]) -> None:
    tokens = _command(
        sub,
        "tokens",
        "API tokens",
        "API tokens: `new` makes an entry for TETHER_API_TOKENS (no database); `create`, "
        "`list`, `revoke` manage the token store in the database.",
    )
    tsub = tokens.add_subparsers(dest="action", required=True, metavar="ACTION")
    tnew = _command(
        tsub,
        "new",
        "make a token; prints it and its TETHER_API_TOKENS entry",
        "Make an API token. Prints the token (give it to the client; it is shown once) and the "
        "entry to add to TETHER_API_TOKENS on the server. Needs no database.",
    )
    tnew.add_argument("name", help="who the token is for (shown in the audit log)")
    tnew.add_argument("role", choices=["reader", "operator", "admin"], help="what it may do")
    tnew.add_argument("--tenant", help="bind the token to a tenant: it sees only its runs")
    create = _command(
        tsub,
        "create",
        "store a token in the database; prints it once",
        "Store a new API token in the database (as a hash) and print its secret once. Every "
        "server sharing the database accepts it at once; `tokens revoke` withdraws it.",
    )
    create.add_argument("--role", required=True, choices=["reader", "operator", "admin"])
    create.add_argument("--name", help="default: token-<random>")
    create.add_argument("--tenant", help="bind the token to a tenant: it sees only its runs")
    create.add_argument("--expires", help="30d, 12h, … or an ISO date; default: never")
    _command(tsub, "list", "stored tokens (never their secrets)").add_argument(
        "--all", action="store_true", help="include revoked tokens"
    )
    _command(tsub, "revoke", "revoke a stored token by name").add_argument(
        "name", help="the token's name"
    )
    audit = _command(
        sub,
        "audit",
        "the audit trail, newest first",
        "The audit trail, newest first: one row per tool call, tasks/update, tasks/cancel and "
        "token change, refused ones included.",
    )
    audit.add_argument("--since", help="1h, 7d, … or an ISO date")
    audit.add_argument("--principal", help="only this principal's rows")
    audit.add_argument("--run", help="only rows about this execution id")
    audit.add_argument("--limit", type=int, default=100, help="at most this many rows")


def _keys(sub: argparse._SubParsersAction[Parser]) -> None:
    keys = _command(sub, "keys", "payload encryption keys (encryption at rest)")
    ksub = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    _command(ksub, "new", "print a fresh key as a TETHER_ENCRYPTION_KEYS entry").add_argument(
        "kid", nargs="?", help="its key id (default: k<UTC timestamp>)"
    )
    _command(
        ksub,
        "rotate",
        "re-seal every stored payload under the current (first) key",
        "Re-seal every stored payload under the first key of TETHER_ENCRYPTION_KEYS, a batch "
        "at a time; runs may go on meanwhile. Afterwards the older keys can be dropped.",
    ).add_argument("--batch", type=int, default=500, help="rows per statement")


def _links(sub: argparse._SubParsersAction[Parser]) -> None:
    links = _command(
        sub,
        "links",
        "approval links for people to decide a wait",
        "Print signed approval links: one URL per decision (approve, reject, push back; a "
        "human task's complete, push back) for each person named, to open in a browser without "
        "signing in. Each acts once, until it expires, while the wait stays open under its key. "
        "Needs TETHER_STATE_KEY (the servers') and TETHER_PUBLIC_URL (or --base-url); the "
        "servers must serve the console.",
    )
    links.add_argument("id", help="run id (a handle follows its chain to the live run)")
    links.add_argument("wait", help="the open wait's name or key")
    links.add_argument(
        "--approver",
        action="append",
        required=True,
        help="who decides with the links (repeat for each person); shown in the history and "
        "the audit trail",
    )
    links.add_argument("--decision", action="append", help="only this decision (repeat)")
    links.add_argument(
        "--ttl", help="how long the links live: 30m, 12h, 3d (default TETHER_LINK_TTL_S)"
    )
    links.add_argument(
        "--base-url", help="where people reach the server (default TETHER_PUBLIC_URL)"
    )
    links.add_argument("--tenant", help=TENANT_HELP)


def _dags(sub: argparse._SubParsersAction[Parser]) -> None:
    dags = _command(
        sub,
        "dags",
        "DAG workflows (Dagu YAML)",
        "List, show, validate and start DAG workflows: Dagu YAML files in --dags DIR "
        "(default TETHER_DAGS). `validate` needs no database.",
    )
    dags.add_argument("--app", help=APP_HELP)
    dags.add_argument("--dags", help=DAGS_HELP)
    dsub = dags.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help_text: str) -> Parser:
        p = _command(dsub, name, help_text)
        p.add_argument("--app", default=argparse.SUPPRESS, help=APP_HELP)
        p.add_argument("--dags", default=argparse.SUPPRESS, help=DAGS_HELP)
        return p

    action("list", "the DAGs loaded from the directory")
    action("show", "one DAG: params, steps and their dependencies").add_argument(
        "name", help="DAG name"
    )
    action("validate", "check a DAG file; a refusal names its field and line").add_argument(
        "file", help="a DAG YAML file"
    )
    start = action("start", "start a run of a DAG")
    start.add_argument("name", help="DAG name")
    start.add_argument("params", nargs="*", help="positional values and NAME=value")


def _runs(sub: argparse._SubParsersAction[Parser]) -> None:
    runs = _command(
        sub,
        "runs",
        "inspect and steer runs",
        "Inspect and steer runs in the database `tether serve` uses (TETHER_DATABASE_URL, or "
        "the embedded one under TETHER_DATA_DIR; it is never created here).",
    )
    runs.add_argument("--app", help=APP_HELP)
    runs.add_argument("--dags", help=DAGS_HELP)
    runs.add_argument("--protocols", help=PROTOCOLS_HELP)
    runs.add_argument("--tenant", help=TENANT_HELP)
    rsub = runs.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help_text: str, description: str = "") -> Parser:
        p = _command(rsub, name, help_text, description)
        p.add_argument("--app", default=argparse.SUPPRESS, help=APP_HELP)
        p.add_argument("--dags", default=argparse.SUPPRESS, help=DAGS_HELP)
        p.add_argument("--protocols", default=argparse.SUPPRESS, help=PROTOCOLS_HELP)
        p.add_argument("--tenant", default=argparse.SUPPRESS, help=TENANT_HELP)
        return p

    ls = action("list", "runs, newest first", "List runs, newest first, a page at a time.")
    ls.add_argument("--workflow", help="only runs of this workflow")
    ls.add_argument(
        "--status", action="append", choices=STATUSES, help="only runs with this status"
    )
    ls.add_argument(
        "--label",
        action="append",
        help="only runs with this label: key=value, or key for any value (repeat: all must hold)",
    )
    ls.add_argument("--limit", type=int, default=20, help="runs per page")
    ls.add_argument("--cursor", help="the next page (printed under a full page)")
    show = action(
        "show",
        "one run: status, details, open waits, chain",
        "Show one run: its status, details, open waits and how to answer them, when a sleeping "
        "run wakes, its output or error, and its chain (retries, continue-as-new).",
    )
    show.add_argument("id", help="run id (a handle follows its chain to the live run)")
    show.add_argument("--history", action="store_true", help="also list the run's events")
    _runs_starting(action)
    _runs_steering(action)


def _runs_starting(action: Callable[..., Parser]) -> None:
    watch = action(
        "watch",
        "follow one run live until it ends",
        "Follow one run as it changes (pushed by the database, not polled) until it ends. "
        "Exit 0 when it completes, 1 when it fails, is cancelled, terminated or times out. "
        "A wait that needs a person is printed with the command that answers it, and watching "
        "goes on; with --until-wait it returns then instead (exit 3).",
    )
    watch.add_argument("id", help="run id")
    watch.add_argument(
        "--until-wait", action="store_true", help="return (exit 3) when the run waits for input"
    )
    start = action(
        "start",
        "start a run",
        "Start a run of WORKFLOW with INPUT (JSON), or many with --batch: one JSON object a "
        "line ({workflow, input, idempotency_key, queue, profile, labels, singleton, ...}), "
        "one JSON result a line.",
    )
    start.add_argument("workflow", nargs="?", help="workflow name")
    start.add_argument(
        "input", nargs="?", default=None, help="JSON (default: {}, the input's defaults)"
    )
    start.add_argument("--idempotency-key", help="a second start with it returns the same run")
    start.add_argument("--label", action="append", help="key=value label on the run (repeat)")
    start.add_argument("--queue", help="the queue to wait in (one of TETHER_QUEUES)")
    start.add_argument("--profile", help="a runtime profile (TETHER_PROFILES) under the input")
    start.add_argument("--batch", metavar="FILE", help="start many: JSON lines from FILE (- stdin)")


def _runs_steering(action: Callable[..., Parser]) -> None:
    sig = action("signal", "send a signal", "Send signal NAME with PAYLOAD (JSON) to a run.")
    sig.add_argument("id", help="run id")
    sig.add_argument("name", help="signal name")
    sig.add_argument("payload", nargs="?", default="null", help="JSON")
    ans = action(
        "answer",
        "answer an open wait",
        "Answer an open wait of a run, named by its key or its name (`runs show` prints each "
        "open wait with the command that answers it).",
    )
    ans.add_argument("id", help="run id")
    ans.add_argument("key", metavar="WAIT", help="the wait's key, or its name")
    ans.add_argument(
        "response", help="JSON (text that is not JSON: a string, where the wait takes one)"
    )
    for name, text in (
        ("cancel", "ask a run to cancel (cooperative: it ends at its next durable call)"),
        ("terminate", "end a run now"),
        ("retry", "start a new run after one ended without success"),
    ):
        action(name, text).add_argument("id", help="run id")
    resume = action(
        "resume",
        "go on from a step of an ended run",
        "Start a new run of an ended (failed, cancelled or terminated) run that keeps its "
        "recorded calls and answers before STEP, so the run goes on from STEP (a protocol "
        "run's failed step runs again; from a protocol's cleanup step left pending, a completed "
        "run too, and only the pending cleanup steps run). Handles follow, as after retry.",
    )
    resume.add_argument("id", help="run id")
    resume.add_argument("--from", dest="from_step", required=True, metavar="STEP", help="step")
    for name in DECISIONS:
        cmd = action(
            name,
            f"{name} a waiting DAG step",
            f"{name.capitalize()} the approval gate or human task waiting at STEP of a DAG run.",
        )
        cmd.add_argument("id", help="execution id of the DAG run")
        cmd.add_argument("step", help="step name (a human task: its id)")
        cmd.add_argument("inputs", nargs="*", help="KEY=VALUE (VALUE read as the field's type)")
        cmd.add_argument("--reason", help="why (reject)")
        cmd.add_argument("--json-inputs", help="a JSON object (typed human-task fields)")
