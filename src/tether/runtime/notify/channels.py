"""Channels: where notifications to people go, configured by the app (`App.notify`,
`@app.workflow(notify=...)`) or by the operator (`TETHER_NOTIFY`, `parse_channels`).

A channel names the environment variables that hold its secrets (a webhook's URL and signing
secret, a Slack webhook URL, an SMTP password), never the secrets themselves: they are read
when a sender starts (`Channel.resolve`), kept in `Secret` (whose repr is masked), and never
written to the database or a log. Destinations come only from this configuration: nothing a
caller sends names one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal
from urllib.parse import urlsplit

import orjson

from tether.runtime import answer_rules

#: What a channel can be told of.
EVENTS: Final = ("wait.opened", "wait.answered", "wait.expired", "run.ended")
#: The kinds of wait whose opening a channel hears of by default: every kind answered from
#: outside the run.
DEFAULT_KINDS: Final = ("signal", "approval", "human_task", "agent_step", "remote_input")
#: A route's workflow that means every workflow of the app.
EVERY_WORKFLOW: Final = "*"
_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_ENV: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ADDRESS: Final = re.compile(r"^[^@\s<>,;\x00-\x1f\x7f]+@[^@\s<>,;\x00-\x1f\x7f]+$")
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
TLS_MODES: Final = ("starttls", "tls", "none")


class Secret:
    """A secret read from the environment: its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one call that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def is_loopback(host: str | None) -> bool:
    """Whether `host` names this machine (a loopback address, or `localhost`)."""
    if not host:
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _env_name(value: str | None, what: str, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise ValueError(f"{what} is required: the name of an environment variable")
        return None
    if not _ENV.match(value):
        raise ValueError(f"{what} must be the name of an environment variable, not {value!r}")
    return value


def _read(environ: Mapping[str, str], name: str, channel: str) -> Secret:
    value = environ.get(name, "")
    if not value:
        raise ValueError(f"notification channel {channel!r}: environment variable {name} is unset")
    return Secret(value)


def check_http_url(url: str, channel: str, variable: str, *, allow_http: bool) -> None:
    """Raises ValueError (never echoing the URL, which may hold a token) unless `url` is an
    https URL, or an http one to a loopback host (or any host with `allow_http`)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    where = f"notification channel {channel!r}: {variable}"
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"{where} is not an http(s) URL")
    if parts.scheme == "http" and not (allow_http or is_loopback(host)):
        raise ValueError(f"{where} must be https (http only to a loopback host, or allow_http)")


@dataclass(frozen=True, kw_only=True)
class Channel:
    """Base of the channels: a name, the events it hears of, and the kinds of wait whose
    opening it hears of. See `WebhookChannel`, `SlackChannel`, `EmailChannel`."""

    type: ClassVar[str] = ""
    name: str
    events: tuple[str, ...] = EVENTS
    kinds: tuple[str, ...] = DEFAULT_KINDS

    def __post_init__(self) -> None:
        if not _is_text(self.name) or not _NAME.match(self.name):
            raise ValueError(
                f"invalid channel name {self.name!r}: a letter, then letters, digits, "
                "'_', '.' or '-' (max 64)"
            )
        object.__setattr__(self, "events", tuple(self.events))
        object.__setattr__(self, "kinds", tuple(self.kinds))
        unknown = [e for e in self.events if e not in EVENTS]
        if unknown or not self.events:
            raise ValueError(f"channel {self.name!r}: events must be among {list(EVENTS)}")
        bad = [k for k in self.kinds if k not in answer_rules.ANSWERABLE_KINDS]
        if bad:
            raise ValueError(f"channel {self.name!r}: kinds must be among {list(DEFAULT_KINDS)}")

    def recipients(self) -> tuple[str, ...]:
        """Who gets one message each: an address per recipient, or one message ('')."""
        return ("",)

    def resolve(self, environ: Mapping[str, str]) -> Resolved:
        """The channel with its secrets read from `environ`.

        Raises:
            ValueError: A variable it names is unset, or its value does not fit.
        """
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class WebhookChannel(Channel):
    """A channel that POSTs each notification as JSON to a URL, signed with HMAC-SHA256.

    The `Tether-Signature` header is `t=<unix seconds>,v1=<hex>`, the HMAC-SHA256 of
    `<t>.<body>` under the secret; `Tether-Delivery-Id` is the same on every attempt of one
    notification, so a receiver drops repeats by it (see the notifications guide).

    Args:
        name: The channel's name (a letter, then letters, digits, `_`, `.` or `-`).
        url_env: The environment variable that holds the URL (https; http only to a
            loopback host unless `allow_http`).
        secret_env: The environment variable that holds the signing secret.
        events: What it is told of: `wait.opened`, `wait.answered`, `wait.expired`,
            `run.ended` (default: all).
        kinds: The kinds of wait whose opening it is told of (default: every kind answered
            from outside: signal, approval, human_task, agent_step, remote_input).
        allow_http: Allow a plain http URL to another host.
        timeout_s: How long one attempt may take, in seconds.

    Raises:
        ValueError: A name, variable name, event, kind or timeout does not fit.
    """

    type: ClassVar[str] = "webhook"
    url_env: str
    secret_env: str
    allow_http: bool = False
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _env_name(self.url_env, f"channel {self.name!r}: url_env", required=True)
        _env_name(self.secret_env, f"channel {self.name!r}: secret_env", required=True)
        _positive(self.timeout_s, self.name)

    def resolve(self, environ: Mapping[str, str]) -> Resolved:
        url = _read(environ, self.url_env, self.name)
        check_http_url(url.reveal(), self.name, self.url_env, allow_http=self.allow_http)
        return Resolved(self, url=url, secret=_read(environ, self.secret_env, self.name))


@dataclass(frozen=True, kw_only=True)
class SlackChannel(Channel):
    """A channel that posts each notification to a Slack incoming webhook, as a Block Kit
    message: what is asked, the inputs it asks for, and a link per decision.

    Args:
        name: The channel's name (a letter, then letters, digits, `_`, `.` or `-`).
        url_env: The environment variable that holds the incoming webhook's URL (a secret:
            whoever has it can post to the Slack channel).
        events: What it is told of (default: all; see `WebhookChannel`).
        kinds: The kinds of wait whose opening it is told of (default: every kind answered
            from outside).
        allow_http: Allow a plain http URL to another host than a loopback one.
        timeout_s: How long one attempt may take, in seconds.

    Raises:
        ValueError: A name, variable name, event, kind or timeout does not fit.
    """

    type: ClassVar[str] = "slack"
    url_env: str
    allow_http: bool = False
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _env_name(self.url_env, f"channel {self.name!r}: url_env", required=True)
        _positive(self.timeout_s, self.name)

    def resolve(self, environ: Mapping[str, str]) -> Resolved:
        url = _read(environ, self.url_env, self.name)
        check_http_url(url.reveal(), self.name, self.url_env, allow_http=self.allow_http)
        return Resolved(self, url=url)


@dataclass(frozen=True, kw_only=True)
class EmailChannel(Channel):
    """A channel that emails each notification over SMTP, one message per recipient (so each
    can carry links of their own).

    Args:
        name: The channel's name (a letter, then letters, digits, `_`, `.` or `-`).
        host: The SMTP server.
        sender: The `From` address.
        to: The recipients' addresses.
        port: The SMTP port (default 587).
        username: The SMTP user to log in as (default: no login).
        password_env: The environment variable that holds the SMTP password.
        tls: `starttls` (default), `tls` (implicit TLS, usually port 465), or `none` (only
            to a loopback host).
        events: What it is told of (default: all; see `WebhookChannel`).
        kinds: The kinds of wait whose opening it is told of (default: every kind answered
            from outside).
        timeout_s: How long one attempt may take, in seconds.

    Raises:
        ValueError: An address, name, port, TLS mode, event, kind or timeout does not fit.
    """

    type: ClassVar[str] = "email"
    host: str
    sender: str
    to: tuple[str, ...]
    port: int = 587
    username: str | None = None
    password_env: str | None = None
    tls: Literal["starttls", "tls", "none"] = "starttls"
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "to", tuple(self.to))
        where = f"channel {self.name!r}"
        if not _is_text(self.host):
            raise ValueError(f"{where}: host is required")
        for address in (self.sender, *self.to):
            if not _is_text(address) or not _ADDRESS.match(address):
                raise ValueError(f"{where}: {address!r} is not an email address")
        if not self.to:
            raise ValueError(f"{where}: `to` needs at least one address")
        if not 0 < self.port < 65536:
            raise ValueError(f"{where}: port must be 1-65535")
        if self.tls not in TLS_MODES:
            raise ValueError(f"{where}: tls must be one of {list(TLS_MODES)}")
        if self.tls == "none" and not is_loopback(self.host):
            raise ValueError(f"{where}: tls 'none' is allowed only to a loopback host")
        _env_name(self.password_env, f"{where}: password_env", required=False)
        if self.password_env is not None and self.username is None:
            raise ValueError(f"{where}: password_env needs a username")
        _positive(self.timeout_s, self.name)

    def recipients(self) -> tuple[str, ...]:
        return self.to

    def resolve(self, environ: Mapping[str, str]) -> Resolved:
        password = None
        if self.password_env is not None:
            password = _read(environ, self.password_env, self.name)
        return Resolved(self, secret=password)


def _is_text(value: object) -> bool:
    """A non-empty string (configuration read from JSON may hold anything)."""
    return isinstance(value, str) and bool(value)


def _is_channel(value: object) -> bool:
    return isinstance(value, Channel) and type(value) is not Channel


def _positive(value: float, name: str) -> None:
    if not value > 0:
        raise ValueError(f"channel {name!r}: timeout_s must be positive")


@dataclass(frozen=True)
class Resolved:
    """A channel with its secrets, as a sender holds it (`url`: a webhook's; `secret`: a
    webhook's signing secret, an SMTP password)."""

    channel: Channel
    url: Secret | None = None
    secret: Secret | None = None


# --- the operator's configuration (TETHER_NOTIFY) -----------------------------------------

_TYPES: Final[Mapping[str, type[Channel]]] = {
    c.type: c for c in (WebhookChannel, SlackChannel, EmailChannel)
}
_TUPLES: Final = frozenset({"events", "kinds", "to"})


@dataclass(frozen=True)
class Routed:
    """A channel and the workflows it hears of (`*`: every workflow)."""

    channel: Channel
    workflows: tuple[str, ...] = (EVERY_WORKFLOW,)


def parse_channels(text: str | bytes) -> list[Routed]:
    """Channels from the operator's JSON: `{"channels": [{"type": "webhook", "name": ...,
    "workflows": ["*"], ...}, ...]}`; each entry takes its type's options by name.

    Raises:
        ValueError: Not JSON, not that shape, an unknown type or option (named), or an
            option that does not fit.
    """
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if (
        not isinstance(doc, dict)
        or set(doc) != {"channels"}
        or not isinstance(doc["channels"], list)
    ):
        raise ValueError('expected {"channels": [...]}')
    return [_parse_one(i, entry) for i, entry in enumerate(doc["channels"])]


def _parse_one(index: int, entry: Any) -> Routed:
    where = f"channels[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    options = dict(entry)
    kind = options.pop("type", None)
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"{where}: type must be one of {sorted(_TYPES)}")
    workflows = options.pop("workflows", [EVERY_WORKFLOW])
    if (
        not isinstance(workflows, list)
        or not workflows
        or not all(isinstance(w, str) and w for w in workflows)
    ):
        raise ValueError(f"{where}: workflows must be a list of workflow names, or ['*']")
    known = {f.name for f in cls.__dataclass_fields__.values()}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"{where}: unknown option {unknown[0]!r} for a {kind} channel")
    for key in _TUPLES & set(options):
        if not isinstance(options[key], list):
            raise ValueError(f"{where}: {key} must be a list")
        options[key] = tuple(options[key])
    try:
        channel = cls(**options)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return Routed(channel, tuple(workflows))


# --- routes: who hears of which workflow ----------------------------------------------------


@dataclass
class Declared:
    """The channels an app declared, with the workflows each hears of."""

    routed: list[Routed] = field(default_factory=list)

    def check(self, channel: Channel) -> None:
        """Raises TypeError when `channel` is not a channel, or ValueError when another
        channel has its name."""
        if not _is_channel(channel):
            raise TypeError(f"not a notification channel: {channel!r}")
        for known in self.routed:
            if known.channel.name == channel.name and known.channel != channel:
                raise ValueError(f"two different notification channels are named {channel.name!r}")

    def add(self, channel: Channel, workflows: Sequence[str]) -> None:
        """Route `channel` for `workflows` (raises as `check` does)."""
        self.check(channel)
        self.routed.append(Routed(channel, tuple(workflows)))
