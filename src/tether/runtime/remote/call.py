"""The durable remote call behind `Context.call_tool` (a tool of an MCP server) and
`Context.ask_agent` (an A2A agent): one position in the run's history whose record follows the
remote task from its create to its end. The steps below name MCP's requests; an agent's are
A2A's (`SendMessage`, `GetTask`, a reply message, `CancelTask`: a2a.py), driven the same way.

The record (kind `remote`) is written as the call goes, never ahead of the remote:

1. **create**: the request carries an idempotency key derived from the run and the call's
   position (`idempotency_key`), so a create repeated after a crash asks for the same task
   (a remote that does not honour the key makes the create at-least-once). The task id is
   recorded, and that write committed, before the first poll (without waiting for the disk
   flush, as a DAG step's result: a worker's crash keeps it; PostgreSQL's own crash may lose
   it, and the create is sent again under the same key).
2. **poll**: `tasks/get` at once; then the run parks (no worker holds it) and the poll is
   scheduled (`remote_polls`): the runtime's poller asks the remote when it is due (the
   remote's `pollIntervalMs`, inside the remote's bounds), or sooner when the remote's listen
   stream told of a change (the process's follower is told of the task as the run parks), and
   wakes the run only when the task changed. The run, woken, polls again itself and decides.
3. **questions**: each question the remote asks opens a wait of kind `remote_input` on the
   run, under a key of its own that is never reused (`{run}:remote_input:{name}:{n}`, kept
   while the question is open). An answer is taken into the record, committed, then forwarded
   with `tasks/update`: a crash repeats at most the send, and the remote ignores an answer to
   a key it no longer waits on.
4. **cancel**: cancelling the run records the cancel, sends `tasks/cancel` once and notes the
   remote's reply in the history (`remote_cancel`); the run then ends cancelled.
5. **end**: the value or the error is recorded and returned or raised again on every replay
   (a value's write is left in flight: the run's next durable call waits for its commit, and a
   crash before it replays the poll of the recorded task).

Transient failures (transport errors, HTTP 5xx) park the call for a backoff (the call's
`retry` policy) and try again; once the tries are spent the call fails `RemoteUnavailable`.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Final, NoReturn, Protocol, TypeVar

import orjson

from tether.observability import metrics
from tether.runtime import answer_rules, clock, waits
from tether.runtime.policy import RetryPolicy, seconds
from tether.runtime.remote.clients import Clients, Waiting
from tether.runtime.remote.config import AGENT_PROTOCOL, Remote
from tether.runtime.remote.errors import (
    RemoteError,
    RemoteProtocolError,
    RemoteTaskLost,
    RemoteTimeout,
    RemoteUnavailable,
    Transient,
    UnknownRemote,
    as_record,
    from_record,
)
from tether.runtime.remote.implementations import PROTOCOLS
from tether.runtime.remote.protocol import Created, RemoteProtocol, Reply, Snapshot
from tether.runtime.remote.transport import Transport
from tether.runtime.signals import CancelledRun, Park
from tether.storage import remote_polls

if TYPE_CHECKING:
    from tether.runtime import probes
    from tether.runtime.remote.config import RemoteCatalog
    from tether.runtime.run_io import RunIO
    from tether.storage.repo import Checkpoint
    from tether.storage.rows import BufferedSignal, StepRecord


class Context(Protocol):
    """What a remote call uses of the run's `tether.runtime.context.Context`: its position in
    the history, its buffered writes and its probes. Spelled out here so that this module
    needs no import of the context, which imports it (`Context.call_tool`)."""

    execution_id: str
    run_attempt: int
    _remotes: RemoteCatalog | None
    _io: RunIO
    _buf: Checkpoint
    _probe: probes.Probe | None

    @property
    def cancel_requested(self) -> bool: ...
    def _next(
        self, kind: str, name: str, *, cancel: bool = True
    ) -> tuple[int, StepRecord | None]: ...
    def _record(
        self, seq: int, kind: str, name: str, result: Any, *, done: bool = True
    ) -> None: ...
    def _mark_failure(self, seq: int) -> None: ...
    async def _flush(self, *, flush: bool = True, behind: bool = False) -> None: ...
    async def _landed(self) -> None: ...
    async def _probe_at(self, step_name: str, edge: probes.Edge) -> None: ...
    def _take_signal(self, spec: waits.WaitSpec, n: int | None) -> BufferedSignal | None: ...
    def park_event_id(self) -> int: ...


#: The kind of a remote call's record in the run's history.
RECORD_KIND: Final = "remote"
#: The kind of the waits a remote's questions open on the run.
WAIT_KIND: Final = "remote_input"
#: A parked call is replayed at least this long after its poll was due, even if no poller
#: ran meanwhile (the poller wakes it as soon as its task changes).
SAFETY_WAKE_S: Final = 300.0
#: The most rounds of questions a remote may ask before it creates its task.
MAX_ROUNDS: Final = 20
T = TypeVar("T")


@dataclass(frozen=True)
class RemoteInput(waits.WaitSpec):
    """A question a remote task asks, as a wait of the run: answered against the remote's
    form, then forwarded to the remote. Its key stays the same while the question is open
    (the run polls meanwhile), and any answer wakes the run at once to forward it."""

    kind: ClassVar[str] = WAIT_KIND
    keeps_keys: ClassVar[bool] = True
    schema: Mapping[str, Any] = field(default_factory=dict)
    remote: str = ""
    tool: str = ""

    def answer_schema(self) -> dict[str, Any]:
        return dict(self.schema)

    def extra(self) -> dict[str, Any]:
        return {answer_rules.WAKES_RUN: True, "remote": self.remote, "tool": self.tool}


def idempotency_key(execution_id: str, run_attempt: int, seq: int) -> str:
    """The create's key: the same for every create of this call (this run, this run-level
    attempt, this position), different for any other; derived, so the run's id (a bearer
    secret on this server) is not sent to the remote."""
    digest = hashlib.sha256(f"{execution_id}:{run_attempt}:{seq}".encode()).hexdigest()
    return f"tether-{digest[:40]}"


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def replayed(result: Mapping[str, Any]) -> Any:
    """A finished call's recorded value; raises its recorded error."""
    if "error" in result:
        raise from_record(result["error"])
    return result.get("value")


async def call_tool(
    ctx: Context,
    remote: str,
    tool: str,
    arguments: Mapping[str, Any] | None,
    *,
    timeout: float | timedelta | None = None,
    retry: RetryPolicy | None = None,
    name: str | None = None,
) -> Any:
    """The durable call of an MCP server's tool (module docstring); `name`: the record's name
    (default `{remote}/{tool}`). See `Context.call_tool` for what it returns and raises."""
    label = name or f"{remote}/{tool}"
    return await _call(ctx, remote, tool, arguments or {}, label, timeout, retry, agent=False)


async def ask_agent(
    ctx: Context,
    remote: str,
    message: str,
    *,
    data: Mapping[str, Any] | None = None,
    timeout: float | timedelta | None = None,
    retry: RetryPolicy | None = None,
    name: str | None = None,
) -> Any:
    """The durable task of an A2A agent (module docstring); `name`: the record's name (default
    the remote's). See `Context.ask_agent` for what it returns and raises.

    Raises:
        TypeError: `message` is not text, or `data` is not a JSON object (nothing is sent).
        ValueError: `message` is blank (nothing is sent).
    """
    if not isinstance(message, str):
        raise TypeError("ask_agent: the message must be text")
    if not message.strip():
        raise ValueError("ask_agent: the message must not be blank")
    payload: dict[str, Any] = {"text": message}
    if data is not None:
        if not isinstance(data, Mapping):
            raise TypeError("ask_agent: data must be a JSON object (a mapping)")
        try:
            payload["data"] = orjson.loads(orjson.dumps(data))
        except TypeError as exc:
            raise TypeError(f"ask_agent: data must be JSON: {exc}") from None
    return await _call(ctx, remote, "", payload, name or remote, timeout, retry, agent=True)


async def _call(
    ctx: Context,
    remote: str,
    tool: str,
    arguments: Mapping[str, Any],
    label: str,
    timeout: float | timedelta | None,
    retry: RetryPolicy | None,
    *,
    agent: bool,
) -> Any:
    seq, rec = ctx._next(RECORD_KIND, label, cancel=False)
    if rec is not None and rec.done:
        if "error" in rec.result:
            ctx._mark_failure(seq)
        return replayed(rec.result)
    if rec is None and ctx.cancel_requested:
        raise CancelledRun()  # nothing was sent: nothing to cancel
    state: dict[str, Any]
    if rec is None:
        limit = seconds(timeout)
        now = clock.now()
        state = {
            "remote": remote,
            "tool": tool,
            "key": idempotency_key(ctx.execution_id, ctx.run_attempt, seq),
            "deadline": (now + timedelta(seconds=limit)).isoformat() if limit else None,
            "task": None,
            "failures": 0,
            "asks": [],
        }
    else:
        state = {**rec.result, "asks": [dict(a) for a in rec.result.get("asks", [])]}
    call = _Call(ctx, seq, label, state)
    catalog = ctx._remotes
    config = catalog.remotes.get(remote) if catalog is not None else None
    if config is None:
        unknown = UnknownRemote(
            f"no remote named {remote!r} is configured", remote=remote, tool=tool
        )
        return await call.fail(unknown)
    if (config.protocol == AGENT_PROTOCOL) != agent:
        return await call.fail(_wrong_kind(config, tool))
    assert catalog is not None  # noqa: S101 — a configured remote comes from a catalog
    call.bind(config, catalog.remote_clients, arguments, retry)
    return await call.run()


def _wrong_kind(config: Remote, tool: str) -> UnknownRemote:
    if config.protocol == AGENT_PROTOCOL:
        why = "is an A2A agent: ctx.ask_agent asks it, ctx.call_tool cannot"
    else:
        why = "is an MCP server, not an A2A agent: ctx.call_tool calls its tools"
    return UnknownRemote(f"remote {config.name!r} {why}", remote=config.name, tool=tool)


class _Call:
    """One remote call's decisions for one claim of its run (module docstring)."""

    def __init__(self, ctx: Context, seq: int, label: str, state: dict[str, Any]) -> None:
        self.ctx = ctx
        self.seq = seq
        self.label = label
        self.state = state
        self.remote = str(state["remote"])
        self.tool = str(state["tool"])
        self.deadline = _time(state.get("deadline"))
        self.policy: RetryPolicy = RetryPolicy()
        self.config: Remote | None = None
        self.clients: Clients | None = None
        self.proto: RemoteProtocol | None = None

    def bind(
        self,
        config: Remote,
        clients: Clients,
        arguments: Mapping[str, Any],
        retry: RetryPolicy | None,
    ) -> None:
        self.config = config
        self.clients = clients
        self.policy = retry or config.retry
        left = None
        if self.deadline is not None:
            left = max((self.deadline - clock.now()).total_seconds(), 0.001)
        transport = Transport(config, clients.get(), self.tool, clients.tool_lists)
        self.proto = PROTOCOLS[config.protocol](config, transport, self.tool, arguments, left)

    # --- the decision cycle ----------------------------------------------------------------------

    async def run(self) -> Any:
        proto = self.proto
        assert proto is not None  # noqa: S101 — bound before run
        if self.ctx.cancel_requested:
            await self._cancel(proto)
        if self._take_answers():
            self._save()
            await self.ctx._flush()  # an answer is recorded before it is sent
        now = clock.now()
        if self.deadline is not None and now >= self.deadline:
            await self._time_out(proto)
        retry_at = _time(self.state.get("retry_at"))
        if retry_at is not None and now < retry_at:
            raise self._park(retry_at)
        while self.state.get("task") is None:
            if self._unanswered():
                raise self._park(None)  # an answer wakes the run
            reply = self._reply()
            created = await self._attempt(functools.partial(self._create, proto, reply))
            self._replied(reply)
            if created.task is None and created.snapshot.status == "input_required":
                await self._asked_first(created)
                continue
            if created.task is None:
                return await self._end(proto, created.snapshot)
            self.state["task"] = created.task
            self.state["poll_ms"] = created.snapshot.poll_ms
            self._save()
            await self.ctx._flush(flush=False)  # the task id is committed before the first poll
        task = str(self.state["task"])
        await self._forward(proto, task)
        # Woken (the poller saw a change, an answer came, the safety timer): look now.
        snapshot = await self._attempt(lambda: self._poll(proto, task))
        if snapshot.ended:
            return await self._end(proto, snapshot)
        self._update_asks(snapshot)
        assert self.config is not None  # noqa: S101 — bound before run
        polls = int(self.state.get("polls", 0))
        due = clock.now() + timedelta(seconds=self.config.poll_delay(snapshot.poll_ms, polls))
        self.state["polls"] = polls + 1
        self.state["poll_ms"] = snapshot.poll_ms
        self.state["seen"] = snapshot.digest()
        await self._schedule_poll(due)
        if self.clients is not None:  # the process's follower may hear of a change first
            waiting = Waiting(self.remote, task, self.ctx.execution_id, self.seq, snapshot.digest())
            self.clients.parked(waiting)
        raise self._park(due + timedelta(seconds=SAFETY_WAKE_S))

    async def _create(self, proto: RemoteProtocol, reply: Reply | None) -> Created:
        await self.ctx._landed()  # the create happens once every earlier write has committed
        point = f"{RECORD_KIND}:{self.label}"
        await self._probe(point, "before")
        created = await proto.create(self._round_key(), reply)
        await self._probe(point, "after")
        return created

    # --- questions asked before the task ---------------------------------------------------------

    def _round_key(self) -> str:
        """The create's idempotency key: the call's own for the first create, one of its own
        for each create sent again with answers (the same for every try of that round)."""
        key = str(self.state["key"])
        asked = self.state.get("asked")
        return key if asked is None else f"{key}.{int(asked['round'])}"

    def _round(self) -> list[dict[str, Any]]:
        """The questions of the round asked before the task (none before any round)."""
        asked = self.state.get("asked")
        if asked is None:
            return []
        return [a for a in self.state["asks"] if a.get("round") == asked["round"]]

    def _unanswered(self) -> bool:
        """Whether a question asked before the task waits for its answer."""
        return any(a.get("answer") is None for a in self._round())

    def _reply(self) -> Reply | None:
        """What the next create carries: nothing for the first; the answers to the round's
        questions and its state after one."""
        asked = self.state.get("asked")
        if asked is None:
            return None
        answers = {str(a["key"]): a["answer"]["payload"] for a in self._round()}
        return Reply(answers, asked.get("state"))

    def _replied(self, reply: Reply | None) -> None:
        """The create carrying `reply` was answered: its answers were delivered."""
        if reply is None or not reply.answers:
            return
        sent = [a for a in self.state["asks"] if a.get("answer") and not a.get("sent")]
        sent = [a for a in sent if str(a["key"]) in reply.answers]
        if not sent:
            return
        for ask in sent:
            ask["sent"] = True
        keys = [self._key(a) for a in sent]
        self.ctx._buf.events.append(
            {"type": "remote_answered", "data": {**self._about(), "keys": keys}}
        )

    async def _asked_first(self, created: Created) -> None:
        """The remote asks before it creates anything: a new round, whose questions open
        waits of the run (the create goes again once each is answered: at once when it asked
        none, only for its `state` back).

        Raises:
            RemoteProtocolError: more than MAX_ROUNDS rounds (the call fails).
        """
        asked = self.state.get("asked")
        number = 1 if asked is None else int(asked["round"]) + 1
        if number > MAX_ROUNDS:
            await self.fail(
                RemoteProtocolError(
                    f"remote {self.remote!r} asked for input {MAX_ROUNDS} times without "
                    "creating a task",
                    remote=self.remote,
                    tool=self.tool,
                )
            )
        self.state["asked"] = {"round": number, "state": created.state}
        self._update_asks(created.snapshot, number)
        self._save()
        await self.ctx._flush()  # the questions are recorded before anyone can answer them

    async def _poll(self, proto: RemoteProtocol, task: str) -> Snapshot:
        point = f"{RECORD_KIND}:{self.label}:poll"
        await self._probe(point, "before")
        snapshot = await proto.poll(task)
        await self._probe(point, "after")
        return snapshot

    async def _answer(self, proto: RemoteProtocol, task: str, answers: Mapping[str, Any]) -> None:
        point = f"{RECORD_KIND}:{self.label}:answer"
        await self._probe(point, "before")
        await proto.answer(task, answers)
        await self._probe(point, "after")

    async def _schedule_poll(self, due: datetime) -> None:
        """Have the poller look at the task at `due` (a write of its own: the park follows;
        should the poller look before the park commits, its wake-up still reaches the run)."""
        async with self.ctx._io.acquire() as conn:
            await remote_polls.schedule(conn, self.ctx.execution_id, self.seq, due)

    async def _probe(self, point: str, edge: Any) -> None:
        if self.ctx._probe is not None:
            await self.ctx._probe_at(point, edge)

    async def _attempt(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run one request of the protocol: a transient failure parks the call for its backoff
        (or ends it `RemoteUnavailable` once the tries are spent); a refusal ends it."""
        try:
            value = await op()
        except Transient as exc:
            raise await self._backoff(exc) from exc
        except RemoteError as exc:
            await self.fail(exc)
        self.state["failures"] = 0
        self.state.pop("retry_at", None)
        return value

    async def _backoff(self, exc: Exception) -> BaseException:
        """The Park of the call's next try after a transient failure; or, once the tries are
        spent (or the next would pass the deadline), the call ends RemoteUnavailable."""
        failures = int(self.state.get("failures", 0)) + 1
        wake = clock.now() + timedelta(seconds=self.policy.delay(failures))
        passes = self.deadline is not None and wake >= self.deadline
        if self.policy.allows_another(failures) and not passes:
            self.state["failures"] = failures
            self.state["retry_at"] = wake.isoformat()
            return self._park(wake)
        unavailable = RemoteUnavailable(
            f"remote {self.remote!r} stayed unreachable after {failures} tries: {exc}",
            remote=self.remote,
            tool=self.tool,
        )
        return await self.fail(unavailable)

    # --- questions and answers -------------------------------------------------------------------

    def _spec(self, ask: Mapping[str, Any]) -> RemoteInput:
        return RemoteInput(
            str(ask["name"]),
            ask.get("message") or None,
            schema=ask.get("schema") or {},
            remote=self.remote,
            tool=self.tool,
        )

    def _take_answers(self) -> bool:
        """Move the answers delivered to this call's open questions into its record."""
        taken = False
        for ask in self.state["asks"]:
            if not ask.get("open") or ask.get("answer") is not None:
                continue
            sig = self.ctx._take_signal(self._spec(ask), int(ask["n"]))
            if sig is not None:
                ask["answer"] = {"payload": sig.payload, "by": sig.by}
                self.ctx._buf.consumed.append({"id": sig.id, "seq": self.seq})
                taken = True
        return taken

    async def _forward(self, proto: RemoteProtocol, task: str) -> bool:
        """Send the recorded answers to the task's questions not sent yet (one tasks/update);
        whether it sent any."""
        unsent = [
            a
            for a in self.state["asks"]
            if a.get("answer") and not a.get("sent") and a.get("round") is None
        ]
        if not unsent:
            return False
        await self.ctx._landed()
        answers = {str(a["key"]): a["answer"]["payload"] for a in unsent}
        await self._attempt(lambda: self._answer(proto, task, answers))
        for ask in unsent:
            ask["sent"] = True
        keys = [self._key(a) for a in unsent]
        self.ctx._buf.events.append(
            {"type": "remote_answered", "data": {**self._about(), "keys": keys}}
        )
        self._save()
        return True

    def _update_asks(self, snapshot: Snapshot, round_: int | None = None) -> None:
        """Open a wait for each question the remote asks now that it did not ask before; a
        question it no longer asks is closed. `round_`: the round of questions asked before
        the task (their keys are a scope of their own); None: the task's."""
        asking = {a.key: a for a in snapshot.asks} if snapshot.status == "input_required" else {}
        known = {str(a["key"]) for a in self.state["asks"] if a.get("round") == round_}
        for ask in self.state["asks"]:
            ask["open"] = ask.get("round") == round_ and ask["key"] in asking
        opened = clock.now().isoformat()
        for key, ask in asking.items():
            if key in known:
                continue
            number = len(self.state["asks"]) + 1
            entry = {
                "key": key,
                "name": f"{self.label[:150]}#{self.seq}.{number}",  # a wait name's limit
                "n": self.ctx.park_event_id(),
                "opened": opened,
                "message": ask.message,
                "schema": dict(ask.schema),
                "open": True,
                "answer": None,
                "sent": False,
            }
            if round_ is not None:
                entry["round"] = round_
            self.state["asks"].append(entry)

    def _key(self, ask: Mapping[str, Any]) -> str:
        return waits.make_key(self.ctx.execution_id, WAIT_KIND, str(ask["name"]), int(ask["n"]))

    def _descriptors(self) -> list[dict[str, Any]]:
        deadline = self.deadline.isoformat() if self.deadline is not None else None
        return [
            self._spec(ask).descriptor(self._key(ask), str(ask["opened"]), deadline)
            for ask in self.state["asks"]
            if ask.get("open") and ask.get("answer") is None
        ]

    # --- endings ---------------------------------------------------------------------------------

    def _save(self) -> None:
        self.ctx._record(self.seq, RECORD_KIND, self.label, self.state, done=False)

    def _park(self, wake: datetime | None) -> Park:
        if self.deadline is not None:
            wake = self.deadline if wake is None else min(wake, self.deadline)
        self._save()
        return Park(self._descriptors(), wake, status="waiting")

    def _about(self) -> dict[str, Any]:
        return {"seq": self.seq, "remote": self.remote, "tool": self.tool}

    async def _end(self, proto: RemoteProtocol, snapshot: Snapshot) -> Any:
        try:
            value = proto.outcome(snapshot)
        except RemoteError as exc:
            await self.fail(exc)
        self.ctx._record(self.seq, RECORD_KIND, self.label, {"value": value})
        metrics.remote_call_ended(self.remote, "completed")
        # Its commit is waited for by the run's next durable call: a crash before it leaves
        # the task id recorded, and the replay reads the same ending from the remote again.
        await self.ctx._flush(behind=True)
        return value

    async def fail(self, exc: RemoteError) -> NoReturn:
        """Record `exc` as the call's ending and raise it."""
        self.ctx._record(self.seq, RECORD_KIND, self.label, {"error": as_record(exc)})
        self.ctx._mark_failure(self.seq)
        metrics.remote_call_ended(self.remote, type(exc).__name__)
        await self.ctx._flush()
        raise exc

    async def _time_out(self, proto: RemoteProtocol) -> NoReturn:
        """The call's timeout passed: the task is cancelled (one try, noted), the call fails."""
        task = self.state.get("task")
        if task is not None:
            await self._send_cancel(proto, str(task), "timeout")
        what = repr(self.tool) if self.tool else "its task"
        await self.fail(
            RemoteTimeout(
                f"remote {self.remote!r} did not finish {what} in time",
                remote=self.remote,
                tool=self.tool,
            )
        )

    async def _cancel(self, proto: RemoteProtocol) -> NoReturn:
        """The run is cancelled: the remote task is cancelled once (the request recorded first,
        the remote's reply noted in the history), then the run ends cancelled."""
        task = self.state.get("task")
        if task is not None and self.state.get("cancel") != "done":
            if self.state.get("cancel") is None:
                self.state["cancel"] = "requested"
                self._save()
                await self.ctx._flush()
            try:
                await self._send_cancel(proto, str(task), "cancelled", transient=True)
            except Transient as exc:
                raise await self._backoff_cancel(proto, str(task), exc) from exc
        raise CancelledRun()

    async def _backoff_cancel(
        self, proto: RemoteProtocol, task: str, exc: Transient
    ) -> BaseException:
        failures = int(self.state.get("failures", 0)) + 1
        if self.policy.allows_another(failures):
            wake = clock.now() + timedelta(seconds=self.policy.delay(failures))
            self.state["failures"] = failures
            self.state["retry_at"] = wake.isoformat()
            self._save()
            return Park([], wake, status="waiting")
        self._noted_cancel("cancelled", {"outcome": "unreachable", "error": str(exc)})
        return CancelledRun()

    async def _send_cancel(
        self, proto: RemoteProtocol, task: str, reason: str, *, transient: bool = False
    ) -> None:
        """Send tasks/cancel once and note the reply; `transient`: a transport failure is
        raised (to be retried) instead of noted."""
        await self.ctx._landed()
        try:
            await proto.cancel(task)
            reply: dict[str, Any] = {"outcome": "acknowledged"}
        except Transient as exc:
            if transient:
                raise
            reply = {"outcome": "unreachable", "error": str(exc)}
        except RemoteTaskLost as exc:
            reply = {"outcome": "unknown_task", "error": str(exc)}
        except RemoteError as exc:
            reply = {"outcome": "refused", "error": str(exc)}
            code = getattr(exc, "code", None)
            if code is not None:
                reply["code"] = code
        self._noted_cancel(reason, reply)

    def _noted_cancel(self, reason: str, reply: dict[str, Any]) -> None:
        self.state["cancel"] = "done"
        self._save()
        event = {**self._about(), "reason": reason, **reply}
        self.ctx._buf.events.append({"type": "remote_cancel", "data": event})
        metrics.remote_call_ended(self.remote, f"cancel_{reply['outcome']}")
