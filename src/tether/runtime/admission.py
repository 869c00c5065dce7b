"""Admission rules, as data (modelled on Dagu's queues, maxActiveRuns, singleton, profiles and
labels; docs/admission.md). Pure: parsing and validation, no I/O.

- A **queue** has a concurrency limit. A run started on a queue waits in it (`queued`) until
  fewer than `limit` of the queue's runs hold a slot; it is admitted oldest first, and holds its
  slot from admission until it ends (a run parked on an approval keeps it). Named queues come
  from settings (`TETHER_QUEUES="default=4,reports=1"`); a workflow's `max_active_runs=N` is an
  implicit queue of its own (`workflow:<name>`, limit N).
- A **profile** is a named set of env vars and params (`TETHER_PROFILES`, JSON): its params are
  merged under the caller's input; its env is stored with the run (`profile_env`).
- **Labels** are `key=value` (or key-only) strings; keys are lowercased.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from types import MappingProxyType
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from cronsim import CronSim, CronSimError

from tether.runtime import errors
from tether.specs.dag.values import LABEL_KEY, LABEL_VALUE

NAME: Final = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")  # queue and profile names (Dagu)
IMPLICIT_PREFIX: Final = "workflow:"  # a workflow's max_active_runs queue: workflow:<name>


@dataclass(frozen=True)
class Profile:
    """A runtime profile: env vars for the run and params merged under its input."""

    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    """A process's admission configuration (give every process the same one)."""

    queues: Mapping[str, int] = field(default_factory=dict)
    profiles: Mapping[str, Profile] = field(default_factory=dict)
    # Missed cron ticks after downtime: "none" starts only the latest, "all" up to catchup_cap.
    catchup: str = "none"
    catchup_cap: int = 10
    scheduler: bool = True

    def __post_init__(self) -> None:
        for name, limit in self.queues.items():
            _check_queue(name, limit)
        if self.catchup not in ("none", "all"):
            raise ValueError(f"schedule catch-up must be 'none' or 'all', not {self.catchup!r}")
        if self.catchup_cap < 1:
            raise ValueError("the schedule catch-up cap must be at least 1")

    def profile(self, name: str) -> Profile:
        """Raises ProfileNotFound."""
        try:
            return self.profiles[name]
        except KeyError:
            raise errors.ProfileNotFound(f"no runtime profile named {name!r}") from None

    def limit(self, queue: str) -> int:
        """A named queue's limit. Raises QueueNotFound."""
        try:
            return self.queues[queue]
        except KeyError:
            raise errors.QueueNotFound(f"no queue named {queue!r} is configured") from None


NO_ADMISSION: Final = Admission()


@dataclass(frozen=True)
class WorkflowRules:
    """A workflow's admission options: its default queue, the limit of its implicit queue
    (max_active_runs), labels on every run (a start's win per key), cron schedules (UTC)."""

    queue: str | None = None
    max_active_runs: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    schedules: tuple[str, ...] = ()


NO_RULES: Final = WorkflowRules()


def _check_queue(name: str, limit: int) -> None:
    if not NAME.match(name):
        raise ValueError(f"invalid queue name {name!r}: [a-z0-9][a-z0-9._-]*, at most 128")
    if isinstance(limit, bool) or limit < 1:
        raise ValueError(f"queue {name!r}: the concurrency limit must be an integer >= 1")


def queue_limits(adm: Admission, max_active_runs: Mapping[str, int | None]) -> dict[str, int]:
    """Every queue a worker admits to: the named ones, and each workflow's implicit queue
    (`max_active_runs` maps workflow names to their limit, None for none)."""
    limits = dict(adm.queues)
    for workflow, limit in max_active_runs.items():
        if limit is not None:
            limits[implicit_queue(workflow)] = limit
    return limits


def implicit_queue(workflow: str) -> str:
    """The queue that enforces a workflow's max_active_runs."""
    return IMPLICIT_PREFIX + workflow


def parse_queues(text: str) -> dict[str, int]:
    """`"default=4,reports=1"` → {"default": 4, "reports": 1}. Raises ValueError."""
    queues: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or not raw.strip().isdigit():
            raise ValueError(f"queue {part!r}: write name=limit, e.g. reports=1")
        if name in queues:
            raise ValueError(f"queue {name!r} is configured twice")
        _check_queue(name, int(raw))
        queues[name] = int(raw)
    return queues


def parse_profiles(raw: str | bytes) -> dict[str, Profile]:
    """Profiles from JSON: `{"name": {"env": {"K": "v"}, "params": {...}}}`. Raises ValueError."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"profiles are not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("profiles must be a JSON object of name → {env, params}")
    profiles: dict[str, Profile] = {}
    for name, body in data.items():
        if not NAME.match(name):
            raise ValueError(f"invalid profile name {name!r}: [a-z0-9][a-z0-9._-]*, at most 128")
        if not isinstance(body, dict) or set(body) - {"env", "params"}:
            raise ValueError(f"profile {name!r}: an object with only 'env' and 'params'")
        env, params = body.get("env", {}), body.get("params", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"profile {name!r}: env must map names to strings")
        if not isinstance(params, dict):
            raise ValueError(f"profile {name!r}: params must be an object")
        profiles[name] = Profile(name, MappingProxyType(env), MappingProxyType(params))
    return profiles


def parse_labels(labels: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """`["team=data", "nightly"]` (or a mapping) → {"team": "data", "nightly": ""}; keys
    lowercased. Raises InvalidInput naming the first bad label."""
    if labels is None:
        return {}
    pairs = (
        list(labels.items())
        if isinstance(labels, Mapping)
        else [(k, v) for k, _, v in (str(s).partition("=") for s in labels)]
    )
    out: dict[str, str] = {}
    for key, value in pairs:
        text = f"{key}={value}" if value else key
        if not LABEL_KEY.match(key):
            raise _bad_label(text, "key: a letter or digit, then letters, digits, _ . - (<= 63)")
        if value and not LABEL_VALUE.match(value):
            raise _bad_label(text, "value: a letter or digit, then letters, digits, _ . / -")
        out[key.lower()] = value
    return out


def _bad_label(text: str, rule: str) -> errors.InvalidInput:
    msg = f"invalid label {text!r}: {rule}"
    return errors.InvalidInput(msg, [{"loc": ["labels"], "msg": msg, "type": "value_error"}])


def label_filter(labels: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """A list filter: `key=value` must match exactly, a bare `key` matches any value.
    Returns (pairs, keys). Raises InvalidInput."""
    pairs: dict[str, str] = {}
    keys: list[str] = []
    for text in labels:
        for key, value in parse_labels([text]).items():
            if "=" in text:
                pairs[key] = value
            else:
                keys.append(key)
    return pairs, keys


def workflow_options(
    workflow: str,
    queue: str | None,
    max_active_runs: int | None,
    labels: Sequence[str] | Mapping[str, str] | None,
    schedule: str | Sequence[str] | None,
) -> WorkflowRules:
    """Validate a workflow's admission options. Raises ValueError naming the bad one."""
    if queue is not None and not NAME.match(queue):
        raise ValueError(f"workflow {workflow!r}: invalid queue name {queue!r}")
    if max_active_runs is not None:
        if isinstance(max_active_runs, bool) or max_active_runs < 1:
            raise ValueError(f"workflow {workflow!r}: max_active_runs must be >= 1")
        if queue is not None:
            raise ValueError(
                f"workflow {workflow!r}: max_active_runs is an implicit queue of its own; "
                "give either queue or max_active_runs"
            )
    try:
        parsed = parse_labels(labels)
    except errors.InvalidInput as exc:
        raise ValueError(f"workflow {workflow!r}: {exc.message}") from None
    crons = (schedule,) if isinstance(schedule, str) else tuple(schedule or ())
    for expr in crons:
        try:
            next(cron_sim(expr, datetime.now(UTC)))
        except (CronSimError, ValueError) as exc:
            raise ValueError(f"workflow {workflow!r}: invalid schedule {expr!r}: {exc}") from None
    return WorkflowRules(queue, max_active_runs, MappingProxyType(parsed), crons)


def cron_sim(expr: str, start: datetime, *, reverse: bool = False) -> Iterator[datetime]:
    """The ticks of cron `expr` after (or, `reverse`, before) `start`, as UTC datetimes. A
    `CRON_TZ=<zone> ` (or `TZ=<zone> `) prefix, as Dagu's cron library reads it, takes the
    five fields in that IANA zone; without one they are UTC.

    Raises:
        ValueError: an unknown zone (CronSimError, a ValueError, for a bad expression).
    """
    zone: tzinfo = UTC
    head, _, rest = expr.strip().partition(" ")
    if head.startswith(("CRON_TZ=", "TZ=")):
        try:
            zone = ZoneInfo(head.partition("=")[2])
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone in {head!r}") from exc
        expr = rest
    for tick in CronSim(expr, start.astimezone(zone), reverse=reverse):
        yield tick.astimezone(UTC)


def merge_params(profile: Profile, value: Any) -> Any:
    """The profile's params under the caller's input (the caller wins key by key).
    Raises InvalidInput when the profile has params and the input is not an object."""
    if not profile.params:
        return value
    if value is None:
        return dict(profile.params)
    if not isinstance(value, dict):
        msg = f"profile {profile.name!r} has params, so the input must be an object"
        raise errors.InvalidInput(msg, [{"loc": [], "msg": msg, "type": "value_error"}])
    return {**profile.params, **value}
