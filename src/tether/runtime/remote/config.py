"""Remotes: the MCP servers and A2A agents a workflow may call, by name.

An app names them in code (`App.remote`), an operator in settings (`TETHER_REMOTES`, which
reach the runtime as `Remote` values: `parse_remotes`); a name in the settings replaces the
app's definition of it, so one deployment can point a remote elsewhere. A bearer token is
never part of the configuration: `token_env` names the environment variable that holds it,
read when a request is sent, and nothing here shows a header's value (`Remote.__repr__`).

The names a workflow uses are checked when the app starts serving (`bind_remotes`): a literal
name in a call written in the workflow function itself (`ctx.call_tool("billing", …)`,
`ctx.ask_agent("research", …)`), and every `action: mcp.call` and `action: a2a.ask` step of a
DAG, each against the kind of remote it needs (an MCP server, an A2A agent). A name computed at
run time, or used in a helper, is checked when called (the call fails `UnknownRemote`).
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import math
import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.runtime import json_or_file
from tether.runtime.policy import RetryPolicy
from tether.runtime.remote.clients import Clients
from tether.specs.dag import DagSpec, DagSpecError, RemoteCall
from tether.specs.dag.model import A2A_ASK

ProtocolName = Literal["mcp-tasks", "mcp", "a2a"]
PROTOCOL_NAMES: Final = get_args(ProtocolName)
#: The protocol of A2A agents (`ask_agent`); every other one is MCP's (`call_tool`).
AGENT_PROTOCOL: Final = "a2a"
#: The workflow methods that call a remote, and whether each needs an agent.
_CALLS: Final[Mapping[str, bool]] = MappingProxyType({"call_tool": False, "ask_agent": True})
_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")
_HEADER: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z\-]{1,128}$")
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: Headers the client sets itself: a configured header may not replace them.
_OWN_HEADERS: Final = frozenset(
    {
        "a2a-version",
        "accept",
        "content-type",
        "content-length",
        "host",
        "idempotency-key",
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "traceparent",
        "tracestate",
    }
)

#: Transport failures (a transport error, HTTP 5xx or 429) are retried this way by default:
#: 10 tries over about five minutes, so a remote that restarts does not fail the call.
DEFAULT_RETRY: Final = RetryPolicy(max_attempts=10, initial_interval=1.0, max_interval=60.0)
#: The bounds on the pause between two polls of a remote task: the remote's `pollIntervalMs`
#: is honoured inside them (and 5 s is used when it says nothing).
DEFAULT_POLL_MIN_S: Final = 1.0
DEFAULT_POLL_MAX_S: Final = 60.0
DEFAULT_POLL_S: Final = 5.0
#: How long one request may take (a plain `mcp` call waits for its result up to the call's
#: own `timeout` instead, when it has one).
DEFAULT_REQUEST_TIMEOUT_S: Final = 30.0


class RemoteConfigError(ValueError):
    """A remote's configuration is invalid, or a workflow names a remote that is not
    configured."""


@dataclass(frozen=True)
class Remote:
    """One remote: where it is and how to talk to it.

    Attributes:
        name: The name workflows call it by.
        url: Its MCP endpoint, or an agent's A2A JSON-RPC endpoint (`http://` or `https://`).
        protocol: `mcp-tasks` (MCP with the Tasks extension: durable remote tasks), `mcp`
            (plain MCP: the call waits for the result) or `a2a` (an A2A agent).
        headers: Extra HTTP headers sent with every request.
        token_env: The environment variable holding a bearer token, read at each request.
        request_timeout_s: How long one request may take, in seconds.
        poll_min_s: The shortest pause between two polls, whatever the remote asks.
        poll_max_s: The longest pause between two polls, whatever the remote asks.
        retry: How transport failures are retried (default `DEFAULT_RETRY`).
        listen: Follow the remote's tasks over `subscriptions/listen` (`mcp-tasks` only) as
            well as polling them, where the remote offers it.
    """

    name: str
    url: str
    protocol: ProtocolName = "mcp-tasks"
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    token_env: str | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    poll_min_s: float = DEFAULT_POLL_MIN_S
    poll_max_s: float = DEFAULT_POLL_MAX_S
    retry: RetryPolicy = DEFAULT_RETRY
    listen: bool = True

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise RemoteConfigError(
                f"invalid remote name {self.name!r}: a letter, then letters, digits, '_', "
                "'-' or '.' (max 64)"
            )
        where = f"remote {self.name!r}"
        if not re.match(r"^https?://[^\s/]+", self.url):
            raise RemoteConfigError(f"{where}: the url must be an http:// or https:// URL")
        if self.protocol not in PROTOCOL_NAMES:
            raise RemoteConfigError(f"{where}: protocol must be one of {list(PROTOCOL_NAMES)}")
        headers: dict[str, Any] = dict(self.headers)  # from code: any value may come
        for key, text in headers.items():
            if not _HEADER.match(key) or key.lower() in _OWN_HEADERS:
                raise RemoteConfigError(f"{where}: header {key!r} cannot be configured")
            if not isinstance(text, str) or re.search(r"[\x00-\x1f\x7f]", text):
                raise RemoteConfigError(f"{where}: header {key!r} must be text on one line")
        object.__setattr__(self, "headers", MappingProxyType(headers))
        if self.token_env is not None and not _ENV_NAME.match(self.token_env):
            raise RemoteConfigError(f"{where}: token_env must be an environment variable name")
        for label, seconds_ in (
            ("request_timeout_s", self.request_timeout_s),
            ("poll_min_s", self.poll_min_s),
            ("poll_max_s", self.poll_max_s),
        ):
            if not math.isfinite(seconds_) or seconds_ <= 0:
                raise RemoteConfigError(f"{where}: {label} must be a positive number of seconds")
        if self.poll_max_s < self.poll_min_s:
            raise RemoteConfigError(f"{where}: poll_max_s must not be below poll_min_s")

    def __repr__(self) -> str:
        """Shows which headers are set, never their values (they may be credentials)."""
        return (
            f"Remote(name={self.name!r}, url={self.url!r}, protocol={self.protocol!r}, "
            f"headers={sorted(self.headers)!r}, token_env={self.token_env!r})"
        )

    def poll_delay(self, poll_ms: int | None, polls: int = 0) -> float:
        """Seconds until the next poll: the remote's `pollIntervalMs` inside the bounds. A
        remote that names no interval (every A2A agent) is polled at `poll_min_s` after the
        call's first look, then at twice the pause each time (`polls`: the looks made so
        far), up to `DEFAULT_POLL_S`: a task that ends in a moment is seen in a moment, one
        that runs for hours costs a poll every few seconds."""
        if poll_ms is None:
            asked = min(DEFAULT_POLL_S, self.poll_min_s * 2.0 ** min(polls, 16))
        else:
            asked = poll_ms / 1000.0
        return min(max(asked, self.poll_min_s), self.poll_max_s)


class _RemoteModel(BaseModel):
    """One entry of TETHER_REMOTES."""

    model_config = ConfigDict(extra="forbid")

    url: str
    protocol: ProtocolName = "mcp-tasks"
    headers: dict[str, str] = Field(default_factory=dict)
    token_env: str | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    poll_min_s: float = DEFAULT_POLL_MIN_S
    poll_max_s: float = DEFAULT_POLL_MAX_S
    listen: bool = True


def parse_remotes(value: str | bytes) -> tuple[Remote, ...]:
    """Remotes from JSON text `{name: {url, protocol, headers, token_env, request_timeout_s,
    poll_min_s, poll_max_s, listen}}`.

    Raises:
        RemoteConfigError: not that shape; the message names the remote and the field, never
            a header's value.
    """
    try:
        data = json.loads(value)
    except ValueError:
        raise RemoteConfigError("not JSON: expected {name: {url, ...}}") from None
    if not isinstance(data, dict):
        raise RemoteConfigError("expected a JSON object {name: {url, ...}}")
    remotes = []
    for name, entry in data.items():
        try:
            model = _RemoteModel.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise RemoteConfigError(f"remote {name!r}: {where}: {first['msg']}") from None
        remotes.append(Remote(name=str(name), **model.model_dump()))
    return tuple(remotes)


def read_remotes(value: str) -> tuple[Remote, ...]:
    """Remotes from JSON text (starting with `{`) or from the JSON file it names; empty text
    names none. Raises RemoteConfigError."""
    return json_or_file.read(value, parse_remotes, (), "remotes", RemoteConfigError)


# --- the names a workflow calls ----------------------------------------------------------------


def called_remotes(fn: Any) -> frozenset[str]:
    """The literal remote names of the `ctx.call_tool("name", …)` and `ctx.ask_agent("name",
    …)` calls in the workflow function `fn` itself (`ctx`: its first parameter); empty when its
    source cannot be read."""
    return frozenset(name for name, _ in remote_calls(fn))


@functools.cache
def remote_calls(fn: Any) -> frozenset[tuple[str, bool]]:
    """`called_remotes`, each name with whether it is asked as an agent (`ask_agent`)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    defined = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)),
        None,
    )
    if defined is None or not defined.args.args:
        return frozenset()
    ctx = defined.args.args[0].arg
    names = set()
    for node in ast.walk(defined):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == ctx
        ):
            continue
        first = node.args[0] if node.args else None
        first = first or next((k.value for k in node.keywords if k.arg == "remote"), None)
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add((first.value, _CALLS[node.func.attr]))
    return frozenset(names)


def kind_problem(remote: Remote, agent: bool) -> str | None:
    """Why `remote` cannot serve a call that needs an agent (`agent`) or an MCP server; None
    when it can."""
    if (remote.protocol == AGENT_PROTOCOL) == agent:
        return None
    if agent:
        return f"remote {remote.name!r} is an MCP server ({remote.protocol}), not an A2A agent"
    return f"remote {remote.name!r} is an A2A agent, not an MCP server"


def check_remote_steps(spec: DagSpec, known: Mapping[str, Remote] | None, inline: bool) -> None:
    """Refuse an `mcp.call` or `a2a.ask` step of an inline spec, or one naming a remote not in
    `known` or not of the kind it needs (None: not known yet, nothing is checked).

    Raises:
        DagSpecError: naming `with.remote` (or `action`) and its line.
    """
    if not spec.remote_names:
        return  # the usual case, told without walking every step
    for step in (*spec.steps, *spec.handlers.values()):
        work = step.work
        if not isinstance(work, RemoteCall):
            continue
        if inline:
            raise DagSpecError(
                f"`action: {work.action}` is not allowed in an inline spec: it would call a "
                "remote with this server's credentials; store the DAG on the server instead",
                field="action",
                path=f"steps[{step.name}]",
                file=spec.file,
                line=step.line,
            )
        if known is None:
            continue
        config = known.get(work.remote)
        problem = kind_problem(config, work.action == A2A_ASK) if config is not None else None
        if config is None:
            names = ", ".join(sorted(known)) or "none"
            problem = (
                f"remote {work.remote!r} is not configured (App.remote or TETHER_REMOTES; "
                f"configured: {names})"
            )
        if problem is not None:
            raise DagSpecError(
                f"{problem} (`action: {work.action}`)" if config is not None else problem,
                field="remote",
                path=f"steps[{step.name}].with",
                file=spec.file,
                line=work.remote_line or step.line,
            )


class RemoteCatalog:
    """Mixed into `App`: the remotes its workflows call, by name, and the HTTP client they
    share while the app is served."""

    _workflows: dict[str, Any]

    def __init__(self) -> None:
        self._remotes: dict[str, Remote] = {}
        self._remotes_bound = False
        self.remote_clients = Clients()

    @property
    def remotes(self) -> Mapping[str, Remote]:
        return MappingProxyType(self._remotes)

    def remote(
        self,
        name: str,
        *,
        url: str,
        headers: Mapping[str, str] | None = None,
        token_env: str | None = None,
        protocol: ProtocolName = "mcp-tasks",
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        poll_min: float = DEFAULT_POLL_MIN_S,
        poll_max: float = DEFAULT_POLL_MAX_S,
        retry: RetryPolicy | None = None,
        listen: bool = True,
    ) -> Remote:
        """Name a remote MCP server that workflows call with
        [`Context.call_tool`][tether.Context.call_tool], or an A2A agent (`protocol="a2a"`)
        that they ask with [`Context.ask_agent`][tether.Context.ask_agent].

        `TETHER_REMOTES` may name the same remote: the setting then replaces this definition
        (a deployment points it elsewhere). The token is never stored: `token_env` names the
        environment variable that holds it, read each time a request is sent.

        Args:
            name: The name workflows use (a letter, then letters, digits, `_`, `-` or `.`).
            url: The remote's MCP endpoint, or the agent's A2A JSON-RPC endpoint (`http://` or
                `https://`).
            headers: Extra HTTP headers for every request (not the ones the protocol sets).
            token_env: The environment variable holding a bearer token for the remote.
            protocol: `"mcp-tasks"` (MCP with the Tasks extension: the call is a durable
                remote task; the default), `"mcp"` (plain MCP: the call waits for the
                result within its timeout) or `"a2a"` (an A2A agent; needs the `a2a` extra).
            request_timeout: Seconds one request may take.
            poll_min: The shortest pause between two polls of a task, in seconds, whatever
                the remote's `pollIntervalMs` asks.
            poll_max: The longest pause between two polls, in seconds.
            retry: How transport failures (a connection error, HTTP 5xx or 429) are retried
                (default: 10 tries over about five minutes).
            listen: Follow the remote's tasks over its `subscriptions/listen` stream as well
                as polling them (`mcp-tasks` remotes that offer it): a change is seen when it
                happens, not at the next poll.

        Returns:
            The remote's configuration.

        Raises:
            RemoteConfigError: The name or a value is invalid, or the name is taken.
        """
        if name in self._remotes:
            raise RemoteConfigError(f"remote {name!r} is configured twice")
        remote = Remote(
            name=name,
            url=url,
            protocol=protocol,
            headers=dict(headers or {}),
            token_env=token_env,
            request_timeout_s=request_timeout,
            poll_min_s=poll_min,
            poll_max_s=poll_max,
            retry=retry or DEFAULT_RETRY,
            listen=listen,
        )
        self._remotes[name] = remote
        return remote

    def use_remotes(self, configured: Iterable[Remote]) -> None:
        """Take the settings' remotes: each replaces the app's remote of that name."""
        for remote in configured:
            self._remotes[remote.name] = remote

    def bind_remotes(
        self,
        configured: Iterable[Remote] = (),
        *,
        implemented: Iterable[str],
        missing: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        """Take the settings' remotes (each replaces the app's of that name) and check every
        name the app's workflows and DAGs call: from now on a DAG registered later is checked
        when it loads. `implemented`: the protocols this version speaks; `missing`: why a
        protocol is not available in this installation (an extra not installed), by name.

        Raises:
            RemoteConfigError: a remote uses a protocol not available here, or a workflow
                calls a remote that is not configured or not of the kind it needs (an agent
                for `ask_agent`, an MCP server for `call_tool`).
            DagSpecError: a DAG's `mcp.call` or `a2a.ask` step names such a remote.
        """
        self.use_remotes(configured)
        speaks = set(implemented)
        for remote in self._remotes.values():
            if remote.protocol in missing:
                raise RemoteConfigError(
                    f"remote {remote.name!r}: protocol {remote.protocol!r} is not available: "
                    f"{missing[remote.protocol]}"
                )
            if remote.protocol not in speaks:
                raise RemoteConfigError(
                    f"remote {remote.name!r}: protocol {remote.protocol!r} is not "
                    f"implemented in this version (available: {sorted(speaks)})"
                )
        unknown, wrong = [], []
        for name, wf in self._workflows.items():
            if getattr(wf.fn, "dag_name", None) is not None:
                continue  # a DAG: its steps are checked below
            for called, agent in sorted(remote_calls(wf.fn)):
                config = self._remotes.get(called)
                if config is None:
                    unknown.append((name, called))
                elif (problem := kind_problem(config, agent)) is not None:
                    wrong.append(f"workflow {name!r}: {problem}")
        if unknown:
            listed = ", ".join(f"workflow {w!r} calls remote {r!r}" for w, r in unknown)
            raise RemoteConfigError(
                f"{listed}, which is not configured (App.remote or TETHER_REMOTES)"
            )
        if wrong:
            raise RemoteConfigError("; ".join(wrong))
        self._remotes_bound = True
        for entry in getattr(self, "dags", {}).values():
            self.check_dag_remotes(entry.spec, inline=entry.inline)

    def check_dag_remotes(self, spec: DagSpec, *, inline: bool) -> None:
        """Refuse a DAG whose `mcp.call` or `a2a.ask` step names a remote that is not configured,
        or not of the kind the action needs (once the app is served; before, `bind_remotes`
        checks it), or an inline DAG with any such step (it would call remotes with this
        server's credentials).

        Raises:
            DagSpecError: naming the step's `with.remote` field and its line.
        """
        check_remote_steps(spec, self._remotes if self._remotes_bound else None, inline)
