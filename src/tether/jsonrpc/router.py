"""Method registry and dispatch: name → async handler, per protocol era.

Handlers take a RequestContext and return a result object. They raise JsonRpcError subclasses
for protocol errors; pydantic ValidationError becomes InvalidParams; anything else is logged
and answered with a generic InternalError (the message never reaches the wire).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tether.jsonrpc import codes
from tether.jsonrpc.codec import RequestId
from tether.jsonrpc.errors import InternalError, InvalidParams, JsonRpcError, MethodNotFound
from tether.jsonrpc.headers import Era, Route
from tether.principal import Principal

logger = logging.getLogger(__name__)

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


async def _drop(_method: str, _params: dict[str, Any]) -> None:
    return None


@dataclass
class RequestContext:
    """Everything a handler may know about one request. No state survives the request."""

    method: str
    params: dict[str, Any]
    route: Route
    headers: Mapping[str, str]
    request_id: RequestId | None = None
    #: Who sends the request, as the security middleware resolved it (None without one).
    principal: Principal | None = None
    #: The client's address (the ASGI scope's `client` host), for the audit trail and limits.
    remote: str | None = None
    notify: Notify = _drop
    streaming: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def principal_name(self) -> str | None:
        """Who sends the request, by name (the `name` of the principal the security middleware
        put in the ASGI scope); None without one."""
        return None if self.principal is None else self.principal.name

    @property
    def progress_token(self) -> str | int | None:
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None


Handler = Callable[[RequestContext], Awaitable[dict[str, Any]]]
NotificationHandler = Callable[[RequestContext], Awaitable[None]]


@dataclass(frozen=True)
class _Entry:
    handler: Handler
    eras: frozenset[str]
    streams: bool
    always_streams: bool = False  # an SSE stream even without a progress token (a listen)


def problems(exc: ValidationError) -> list[dict[str, Any]]:
    """A pydantic error list reduced to JSON: where, and what (no exception objects)."""
    return [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors(include_url=False)
    ]


def parse_params(model: type[M], params: Mapping[str, Any]) -> M:
    """Validate params into `model`; InvalidParams names the failing fields."""
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        raise InvalidParams("Invalid params", {"errors": problems(exc)}) from exc


class Router:
    def __init__(self) -> None:
        self._methods: dict[str, _Entry] = {}
        self._notifications: dict[str, NotificationHandler] = {}

    def method(
        self, name: str, *, eras: tuple[Era, ...] = ("modern",), streams: bool = False
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add(name, handler, eras=eras, streams=streams)
            return handler

        return register

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        eras: tuple[Era, ...] = ("modern",),
        streams: bool = False,
        always_streams: bool = False,
    ) -> None:
        if name in self._methods:
            raise ValueError(f"method {name!r} registered twice")
        self._methods[name] = _Entry(
            handler, frozenset(eras), streams or always_streams, always_streams
        )

    def notification(self, name: str, handler: NotificationHandler) -> None:
        self._notifications[name] = handler

    def knows(self, method: str) -> bool:
        """Whether a handler is registered for `method` (in any era)."""
        return method in self._methods

    def streams(self, method: str) -> bool:
        entry = self._methods.get(method)
        return entry is not None and entry.streams

    def always_streams(self, method: str) -> bool:
        """The method answers with an SSE stream whenever the client accepts one."""
        entry = self._methods.get(method)
        return entry is not None and entry.always_streams

    def methods(self, era: Era) -> list[str]:
        return sorted(n for n, e in self._methods.items() if era in e.eras)

    def resolve(self, method: str, era: Era) -> _Entry:
        entry = self._methods.get(method)
        if era == "modern" and method in codes.REMOVED_METHODS:
            raise MethodNotFound(
                f"Method not found: {method} is not part of {codes.MODERN_VERSION} (use "
                f"server/discover); served versions: {', '.join(codes.SUPPORTED_VERSIONS)}, "
                f"the older ones through initialize"
            )
        if entry is None or era not in entry.eras:
            raise MethodNotFound(f"Method not found: {method}")
        return entry

    async def dispatch(self, ctx: RequestContext) -> dict[str, Any]:
        """Run the handler. Only JsonRpcError leaves this function."""
        entry = self.resolve(ctx.method, ctx.route.era)
        try:  # _guarded's rule, inline: one coroutine frame fewer on every call (tasks/get)
            result = await entry.handler(ctx)
        except JsonRpcError:
            raise
        except ValidationError as exc:
            raise InvalidParams("Invalid params", {"errors": problems(exc)}) from exc
        except Exception:
            logger.exception("handler for %s failed", ctx.method)
            raise InternalError("Internal error") from None
        if ctx.route.era == "modern":
            result.setdefault("resultType", "complete")
        return result

    async def deliver(self, ctx: RequestContext) -> bool:
        """Run a notification handler; False when nobody accepts this notification."""
        handler = self._notifications.get(ctx.method)
        if handler is None:
            return False
        try:
            await _guarded(ctx.method, handler(ctx))
        except JsonRpcError as exc:  # a notification has no reply: accepted all the same
            logger.info("notification %s refused: %s", ctx.method, exc.message)
        return True


async def _guarded(method: str, call: Awaitable[T]) -> T:
    """Await a handler: the one top-level handler of the server. A ValidationError becomes
    InvalidParams; anything else but a JsonRpcError is logged and becomes a generic
    InternalError (its message never reaches the wire)."""
    try:
        return await call
    except JsonRpcError:
        raise
    except ValidationError as exc:
        raise InvalidParams("Invalid params", {"errors": problems(exc)}) from exc
    except Exception:
        logger.exception("handler for %s failed", method)
        raise InternalError("Internal error") from None
