"""Settings read from the environment (TETHER_*), overridable by CLI flags.

Some settings are credentials (`SECRETS`): their values never appear in a repr or str of
`Settings` (the database URL shows with its password masked), nor in an error about a bad
value, which names the variable and what is wrong with it, never the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from tether.loader import DEFAULT_APP
from tether.loopback import LOOPBACK
from tether.runtime import json_or_file
from tether.runtime.admission import Admission, Profile, parse_profiles, parse_queues
from tether.runtime.dag.environment import DEFAULT_PASSTHROUGH, parse_passthrough
from tether.runtime.links import DEFAULT_TTL_S, MAX_TTL_S, LinkMinter
from tether.runtime.notify.channels import Routed, parse_channels
from tether.runtime.notify.config import NotifySetup, SenderSettings
from tether.runtime.notify.links import ConsoleLinks, Links, NoLinks, SignedLinks
from tether.runtime.payloads import Encryption
from tether.runtime.remote.config import Remote, RemoteConfigError, read_remotes
from tether.runtime.votes import parse_roles
from tether.runtime.worker import WorkerSettings
from tether.specs.limits import (
    DEFAULT_MAX_ALIASES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_STEPS,
    SpecLimits,
)

#: Settings that hold credentials (or may: a profile's env): shown as `MASK` when set.
SECRETS: Final = frozenset(
    {
        "database_url",
        "listen_database_url",
        "state_key",
        "api_tokens",
        "encryption_keys",
        "profiles",
        "remotes",
    }
)
#: Settings that hold a PostgreSQL URL: shown with only their password masked.
_URLS: Final = frozenset({"database_url", "listen_database_url"})
MASK: Final = "***"
_URL_SCHEMES: Final = frozenset({"postgres", "postgresql"})
_PORT: Final = re.compile(r"[0-9]{1,5}")
_QUERY_SECRETS: Final = frozenset({"password", "passfile", "sslpassword", "sslkey"})


def _read_profiles(value: str) -> dict[str, Profile]:
    return json_or_file.read(value, parse_profiles, {}, "profiles")


def _read_notify(value: str) -> list[Routed]:
    return json_or_file.read(value, parse_channels, [], "notification channels")


#: Settings written in a language of their own → the parser that reads them. Each is read once
#: when the settings are, so a mistake stops the process at start, naming the variable.
_PARSERS: Final[Mapping[str, Callable[[str], object]]] = MappingProxyType(
    {
        "queues": parse_queues,
        "dag_env_passthrough": parse_passthrough,
        "approver_roles": parse_roles,
        "profiles": _read_profiles,
        "notify": _read_notify,
        "remotes": read_remotes,
    }
)


class SettingsError(ValueError):
    """A setting's value does not fit: names the variable (or flag) and what is wrong."""


class Settings(BaseModel):
    """Process settings. Every field has an environment variable TETHER_<FIELD>."""

    # A validation error of a secret setting must not carry its value.
    model_config = ConfigDict(hide_input_in_errors=True)

    app: str = Field(
        DEFAULT_APP,
        description="the App to serve and to steer runs of: module:attr or path/to/file.py:attr",
    )
    database_url: str | None = Field(None, description="PostgreSQL URL; unset: embedded server")
    listen_database_url: str | None = Field(
        None,
        description="PostgreSQL URL of a direct connection to the same database, for LISTEN "
        "(unset: TETHER_DATABASE_URL); needed behind a transaction pooler",
    )
    database_pooler: Literal["none", "session", "transaction"] = Field(
        "none",
        description="the pool mode of a connection pooler (PgBouncer) in front of "
        "TETHER_DATABASE_URL: transaction turns the prepared-statement cache off and needs "
        "TETHER_LISTEN_DATABASE_URL",
    )
    statement_cache_size: int | None = Field(
        None,
        ge=0,
        description="prepared statements cached per database connection (unset: 100, or 0 "
        "with TETHER_DATABASE_POOLER=transaction)",
    )
    data_dir: Path = Field(Path(".tether"), description="embedded PostgreSQL lives here")
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = Field(16, description="runs executed concurrently per worker process")
    lease_s: float = Field(30.0, description="worker lease; an expired lease is reclaimed")
    poll_s: float = Field(1.0, description="claim polling fallback when no notification comes")
    shutdown_grace_s: float = 10.0
    max_recovery_attempts: int = Field(
        10, ge=1, description="a run whose worker is lost this often in a row ends failed"
    )
    janitor_interval_s: float = 60.0
    pool_size: int = 20
    max_payload_bytes: int = 256 * 1024
    mcp_path: str = Field("/mcp", description="where the MCP endpoint is served")
    poll_interval_ms: int = Field(5000, ge=1, description="pollIntervalMs advertised on tasks")
    sync_limit_s: float = Field(60.0, description="a workflow tool called without tasks waits")
    start_wait_s: float = Field(0.0, description="start_<wf> without tasks waits this long")
    state_key: str | None = Field(
        None, description="HMAC key for MRTR requestState, console sign-ins and approval links"
    )
    link_ttl_s: float = Field(
        DEFAULT_TTL_S, gt=0, le=MAX_TTL_S, description="how long an approval link lives"
    )
    approver_roles: str = Field(
        "", description="approver roles and their members: role=name,name;role=name"
    )
    max_subscriptions: int = Field(
        32, ge=1, description="open subscriptions/listen streams per principal per server"
    )
    max_subscription_ids: int = Field(
        256, ge=1, description="task ids plus resource URIs one subscriptions/listen may cover"
    )
    subscription_send_timeout_s: float = Field(
        10.0, gt=0, description="a listen stream that takes no frame for this long is dropped"
    )
    allowed_hosts: str = Field("", description="comma-separated Host/Origin names besides loopback")
    allowed_origins: str = Field("", description="comma-separated exact Origins allowed")
    max_body_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="largest HTTP request body, in bytes, on every route (4 times the largest "
        "payload or document accepted, so JSON escaping fits)",
    )
    keep_alive_s: int = Field(75, description="idle HTTP keep-alive, longer than clients'")
    access_log: bool = Field(False, description="uvicorn's per-request access log")
    api_tokens: str = Field("", description="name:role:sha256hex,… (tether tokens new)")
    allow_unauthenticated: bool = Field(
        False, description="serve mutations without tokens on a non-loopback address"
    )
    dags: Path | None = Field(
        None, description="directory of DAG files (Dagu YAML) to serve, reloaded on change"
    )
    dags_reload_s: float = Field(
        2.0, gt=0, description="how often the DAG directory is checked for changed files"
    )
    protocols: Path | None = Field(
        None, description="directory of protocol workflows (Realm YAML) loaded at start"
    )
    dagu_tool_name: str = Field(
        "dagu_execute", min_length=1, description="the name of the Dagu execute tool"
    )
    dagu_read_tool_name: str = Field(
        "dagu_read", min_length=1, description="the name of the Dagu read tool"
    )
    inline_shell: bool = Field(
        False, description="let inline DAG specs (over MCP) run command/script steps"
    )
    spec_max_bytes: int = Field(
        DEFAULT_MAX_BYTES,
        ge=1,
        description="largest caller-supplied document (inline DAG spec, create_workflow plan), "
        "in UTF-8 bytes; a YAML document's aliases may not expand it past as many nodes",
    )
    spec_max_steps: int = Field(
        DEFAULT_MAX_STEPS, ge=1, description="most steps in an inline DAG spec or created workflow"
    )
    spec_max_depth: int = Field(
        DEFAULT_MAX_DEPTH,
        ge=1,
        description="deepest nesting of a caller-supplied document (YAML or JSON), in levels",
    )
    spec_max_aliases: int = Field(
        DEFAULT_MAX_ALIASES, ge=1, description="most YAML aliases (*name) in an inline DAG spec"
    )
    dag_env_passthrough: str = Field(
        ",".join(DEFAULT_PASSTHROUGH),
        description="comma-separated process variables a stored DAG's `${NAME}` and steps see "
        "(no TETHER_* name; an inline spec sees none of them)",
    )
    step_output_bytes: int = Field(
        1024 * 1024, ge=0, description="stdout and stderr kept of each DAG shell step, each"
    )
    dag_step_flush: bool = Field(
        False,
        description="a DAG step's result waits for the disk flush (off: only a crash of "
        "PostgreSQL itself can lose it, and the step runs again)",
    )
    queues: str = Field("", description="admission queues and their limits: default=4,reports=1")
    profiles: str = Field(
        "", description="runtime profiles: JSON {name: {env, params}}, or a path to such a file"
    )
    schedule_catchup: Literal["none", "all"] = Field(
        "none", description="missed cron ticks after downtime: none (only the latest) or all"
    )
    schedule_catchup_cap: int = Field(10, ge=1, description="at most this many with 'all'")
    scheduler: bool = Field(True, description="run the cron scheduler loop in this process")
    encryption_keys: str = Field(
        "",
        description="kid:base64key,… seal payloads at rest; the first seals new writes "
        "(tether keys new)",
    )
    decrypt_for: str = Field(
        "", description="comma-separated roles besides admin that read decoded outputs"
    )
    rate_limit: str = Field(
        "", description="per-caller request rate, e.g. '20/s burst 40'; empty: unlimited"
    )
    max_streams_per_token: int = Field(
        32, ge=1, description="open SSE streams per caller (token, else remote address)"
    )
    audit_retention_days: float = Field(
        90.0, gt=0, description="audit rows older than this are deleted by the janitor"
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text, or json: one JSON object per log line (docs/observability.md)"
    )
    audit_log: Path | None = Field(
        None, description="write the audit stream (tether.audit) to this file, not stderr"
    )
    metrics: bool = Field(True, description="record Prometheus metrics (served at /metrics)")
    console: bool | None = Field(
        None,
        description="serve the web console at /console; unset: on only in dev (embedded "
        "database, loopback address), off otherwise",
    )
    remotes: str = Field(
        "",
        description="remote MCP servers and A2A agents workflows call (ctx.call_tool, "
        "ctx.ask_agent, mcp.call and a2a.ask steps): JSON "
        "{name: {url, protocol, headers, token_env, request_timeout_s, poll_min_s, "
        "poll_max_s, listen}}, or a path to such a file; a name replaces the app's remote "
        "of that name",
    )
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="also serve /metrics on this port (tether worker)"
    )
    notify: str = Field(
        "",
        description='notification channels besides the app\'s: JSON {"channels": [...]}, or a '
        "path to such a file (docs/notify-people.md)",
    )
    public_url: str | None = Field(
        None,
        description="how people reach this server (https://tether.example.com): links in "
        "notifications point to its console; unset: no links",
    )
    notify_send: bool = Field(
        True, description="deliver notifications from this process (off: other processes do)"
    )
    notify_poll_s: float = Field(
        2.0, gt=0, description="notification outbox polling fallback when no wake-up comes"
    )
    notify_lease_s: float = Field(
        60.0,
        gt=0,
        description="a claimed notification not marked sent by then is delivered again; longer "
        "than every channel's timeout",
    )
    notify_max_attempts: int = Field(
        10, ge=1, description="attempts at one notification before it is given up"
    )
    notify_retry_base_s: float = Field(
        2.0, gt=0, description="the wait before a notification's second attempt, doubled after"
    )
    notify_retry_max_s: float = Field(
        600.0, gt=0, description="the longest wait between a notification's attempts"
    )
    notify_retention_days: float = Field(
        7.0, gt=0, description="delivered and given-up notifications are deleted after this"
    )

    @field_validator("database_url", "listen_database_url")
    @classmethod
    def _valid_database_url(cls, value: str | None) -> str | None:
        if value is not None and value != "":
            _check_url(value)
        return value

    @field_validator("listen_database_url")
    @classmethod
    def _listen_beside_a_database(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and not info.data.get("database_url"):
            raise ValueError("needs TETHER_DATABASE_URL (the embedded server is reached directly)")
        return value

    @field_validator("database_pooler")
    @classmethod
    def _transaction_pooler_listens_directly(cls, value: str, info: ValidationInfo) -> str:
        if value == "none":
            return value
        if not info.data.get("database_url"):
            raise ValueError("needs TETHER_DATABASE_URL (the embedded server is reached directly)")
        if value == "transaction" and not info.data.get("listen_database_url"):
            raise ValueError(
                "a transaction pooler delivers no notifications: set TETHER_LISTEN_DATABASE_URL "
                "to a direct connection to the same database"
            )
        return value

    @field_validator(*_PARSERS)
    @classmethod
    def _parses(cls, value: str, info: ValidationInfo) -> str:
        _PARSERS[str(info.field_name)](value)
        return value

    @field_validator("public_url")
    @classmethod
    def _valid_public_url(cls, value: str | None) -> str | None:
        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
                raise ValueError("expected the server's address, e.g. https://tether.example.com")
        return value or None

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """What repr and str show: secret settings masked (the database URL keeps all but its
        password, so the server it names is still seen)."""
        for name, value in super().__repr_args__():
            if name in _URLS and value:
                yield name, redacted_url(value)
            elif name in SECRETS and value:
                yield name, MASK
            else:
                yield name, value

    def admission(self) -> Admission:
        """Queues, profiles and schedule settings, for the runtime and its operations."""
        return Admission(
            queues=parse_queues(self.queues),
            profiles=_read_profiles(self.profiles),
            catchup=self.schedule_catchup,
            catchup_cap=self.schedule_catchup_cap,
            scheduler=self.scheduler,
        )

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: object) -> Settings:
        """Read TETHER_* from `env` (default: the process environment), then apply overrides.

        Raises:
            SettingsError: a value does not fit; the message names the variable or the flag.
        """
        env = dict(os.environ if env is None else env)
        values: dict[str, object] = {}
        source: dict[str, str] = {}
        for name in cls.model_fields:
            raw = env.get(f"TETHER_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
                shown = "" if name in SECRETS else f"={raw}"
                source[name] = f"TETHER_{name.upper()}{shown}"
        for key, value in overrides.items():
            if value is not None:
                values[key] = value
                shown = "" if key in SECRETS else f" {value}"
                source[key] = f"--{key.replace('_', '-')}{shown}"
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            where = source.get(field, f"TETHER_{field.upper()}")
            error = SettingsError(f"{where}: {first['msg']}")
        # Raised outside the handler, so no traceback chains the pydantic error (which lists
        # every field that failed, secret ones too) to it.
        raise error

    def encryption(self) -> Encryption | None:
        """The payload keys and read gate, or None when TETHER_ENCRYPTION_KEYS is unset.

        Raises:
            SettingsError: a bad key entry, named with the variable (never echoing key
                material).
        """
        if not self.encryption_keys.strip():
            return None
        try:
            return Encryption.parse(self.encryption_keys, self.decrypt_for.split(","))
        except ValueError as exc:
            error = SettingsError(f"TETHER_ENCRYPTION_KEYS: {exc}")
        raise error

    def remote_configs(self) -> tuple[Remote, ...]:
        """The remotes TETHER_REMOTES names (checked when the settings were read).

        Raises:
            SettingsError: a remote's entry is invalid, named with the variable.
        """
        try:
            return read_remotes(self.remotes)
        except RemoteConfigError as exc:
            error = SettingsError(f"TETHER_REMOTES: {exc}")
        raise error

    def roles(self) -> dict[str, frozenset[str]]:
        """Each approver role's members (TETHER_APPROVER_ROLES)."""
        return parse_roles(self.approver_roles)

    def link_minter(self, base_url: str | None = None) -> LinkMinter:
        """What makes approval links for this server: signed with TETHER_STATE_KEY, rooted at
        `base_url` (default TETHER_PUBLIC_URL), living TETHER_LINK_TTL_S.

        Raises:
            SettingsError: TETHER_STATE_KEY or the base URL is not set, or the URL is not
                http(s).
        """
        if not self.state_key:
            raise SettingsError(
                "TETHER_STATE_KEY is not set: approval links are signed with it (set the same "
                "secret on every server that serves them)"
            )
        url = base_url or self.public_url
        if not url:
            raise SettingsError(
                "TETHER_PUBLIC_URL is not set: approval links need the address people reach "
                "the server at (or pass --base-url)"
            )
        try:
            return LinkMinter(self.state_key, url, self.link_ttl_s, self.roles())
        except ValueError as exc:
            error = SettingsError(f"approval links: {exc}")
        raise error

    def statement_cache(self) -> int | None:
        """Prepared statements to cache per database connection: TETHER_STATEMENT_CACHE_SIZE
        if set, else none behind a transaction pooler; None: the driver's default."""
        if self.statement_cache_size is not None:
            return self.statement_cache_size
        return 0 if self.database_pooler == "transaction" else None

    def dag_environment(self) -> frozenset[str]:
        """The process variables stored DAGs see (TETHER_DAG_ENV_PASSTHROUGH)."""
        return parse_passthrough(self.dag_env_passthrough)

    def development(self) -> bool:
        """A development server: the embedded database (no TETHER_DATABASE_URL) on a loopback
        address. Anything else (a database URL, or another address) is taken as production."""
        return self.database_url is None and self.host in LOOPBACK

    def console_enabled(self) -> bool:
        """TETHER_CONSOLE if set; unset, on only for a development server (`development`). A
        production server serves it only when TETHER_CONSOLE=true says so."""
        if self.console is not None:
            return self.console
        return self.development()

    def spec_limits(self) -> SpecLimits:
        """The limits on caller-supplied documents, for the tools that accept them."""
        return SpecLimits(
            max_bytes=self.spec_max_bytes,
            max_steps=self.spec_max_steps,
            max_depth=self.spec_max_depth,
            max_aliases=self.spec_max_aliases,
        )

    def notify_setup(self, console_prefix: str) -> NotifySetup:
        """The operator's notification channels, the sender's settings, and the links
        messages carry, when TETHER_PUBLIC_URL is set: to the console's run page under
        `console_prefix`, and with TETHER_STATE_KEY set too, each recipient's own signed
        approval link per decision where one can be made (`SignedLinks`).

        Raises:
            SettingsError: a sender setting does not fit, named with its variable.
        """
        try:
            sender = SenderSettings(
                poll_s=self.notify_poll_s,
                lease_s=self.notify_lease_s,
                max_attempts=self.notify_max_attempts,
                retry_base_s=self.notify_retry_base_s,
                retry_max_s=self.notify_retry_max_s,
                retention_s=self.notify_retention_days * 86400.0,
            )
        except ValueError as exc:
            error = SettingsError(f"TETHER_NOTIFY_*: {exc}")
            raise error from None
        links: Links = NoLinks()
        if self.public_url:
            links = ConsoleLinks(self.public_url, f"{console_prefix}/runs/")
            if self.state_key:
                links = SignedLinks(links, self.link_minter())
        return NotifySetup(
            channels=tuple(_read_notify(self.notify)),
            sender=sender if self.notify_send else None,
            links=links,
        )

    def worker_settings(self) -> WorkerSettings:
        return WorkerSettings(
            concurrency=self.workers,
            lease_s=self.lease_s,
            poll_s=self.poll_s,
            shutdown_grace_s=self.shutdown_grace_s,
            max_recovery_attempts=self.max_recovery_attempts,
            admission=self.admission(),
        )


def redacted_url(url: str) -> str:
    """`url` with its password (and password-like query parameters) masked, for display; a
    value that is not a URL at all is masked whole."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    if not parts.scheme or "@" in parts.path + parts.query + parts.fragment:
        return MASK  # not a URL, or an unescaped '/', '?' or '#' split its password off
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{hosts}"
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k.lower() in _QUERY_SECRETS for k, _ in pairs):
        masked = [(k, MASK if k.lower() in _QUERY_SECRETS else v) for k, v in pairs]
        query = urlencode(masked, safe="/*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _check_url(url: str) -> None:
    """Raises ValueError (never echoing `url`) unless it is a PostgreSQL URL whose hosts'
    ports are numbers: postgresql://user:password@host:port/database."""
    expected = "expected postgresql://user:password@host:port/database"
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError(f"not a URL; {expected}") from None
    if parts.scheme.lower() not in _URL_SCHEMES:
        raise ValueError(f"the scheme must be postgresql or postgres; {expected}")
    hosts = parts.netloc.rpartition("@")[2]
    for host in hosts.split(","):
        port = host.rpartition("]")[2] if host.startswith("[") else host
        _, colon, number = port.rpartition(":")
        if colon and number and not _PORT.fullmatch(number):
            raise ValueError(f"a port is not a number; {expected}")
