"""User functions: the Python functions that declarative steps call by name.

An App keeps one registry of them (`Functions`, filled by `App.function`). Both declarative
formats look names up in it: a DAG step's `run: NAME` and a protocol `auto` step's
`handler: NAME`. Each format calls a function in its own convention, because its file format
fixes what the step hands over: a DAG step passes its `with:` values as keyword arguments, a
protocol step one dict, `{"params", "steps", "config"}`. Everything else is decided here, once:

- what may be registered (`user_function`): something callable whose parameters can be read,
  that returns its result (a plain or an `async` function; a generator is refused), under a
  name not taken yet;
- how it is called (`UserFunction.call`): the arguments are first checked against the
  parameters it declares; an `async` function is awaited, a sync one runs in a worker thread
  (as `Context.step` runs one), so it never holds the event loop;
- what a name nobody registered gives (`FunctionNotRegistered`, from `Functions.lookup`): an
  error naming the function asked for and every function that is registered.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any


class FunctionNotRegistered(LookupError):
    """A step names a function this process has not registered."""

    def __init__(self, name: str, registered: Iterable[str]) -> None:
        self.name = name
        self.registered = tuple(sorted(registered))
        listed = ", ".join(repr(n) for n in self.registered) or "none"
        super().__init__(f"no function {name!r} is registered (registered: {listed})")


@dataclass(frozen=True)
class UserFunction:
    """A registered function, with what registration read from it."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    signature: inspect.Signature

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function with these arguments and return its result: awaited when it is
        `async`, in a worker thread when it is not (a returned awaitable is awaited too).

        Raises:
            TypeError: The arguments do not fit the parameters the function declares (it is
                not called).
            Exception: Whatever the function raises.
        """
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"function {self.name!r}{self.signature} cannot be called so: {exc}"
            ) from None
        if self.is_async:
            value = await self.fn(*args, **kwargs)
        else:
            value = await asyncio.to_thread(self.fn, *args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value


def user_function(fn: object, name: str | None = None) -> UserFunction:
    """`fn` checked against the one rule for user functions, under `name` (default: its
    `__name__`).

    Raises:
        TypeError: `fn` is not callable, is a generator (sync or `async`), or its parameters
            cannot be read.
    """
    key = name or getattr(fn, "__name__", None)
    if not callable(fn):
        raise TypeError(f"function {key!r} must be callable, not {type(fn).__name__}")
    if not key:
        raise TypeError(f"{fn!r} has no __name__: register it with a name")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"function {key!r} must return its result, not yield it")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"the parameters of function {key!r} cannot be read ({exc}): wrap it in a def"
        ) from None
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 — an object whose __call__ is async
    )
    return UserFunction(key, fn, is_async, signature)


class Functions:
    """The registry of an App's user functions, by name. It is live: a function registered
    while the app is served is found by the next step that names it."""

    def __init__(self) -> None:
        self._by_name: dict[str, UserFunction] = {}

    def register(self, fn: object, name: str | None = None) -> UserFunction:
        """Register `fn` under `name` (default: its `__name__`).

        Raises:
            TypeError: `fn` breaks the rule for user functions (`user_function`).
            ValueError: A function of that name is already registered.
        """
        entry = user_function(fn, name)
        if entry.name in self._by_name:
            raise ValueError(f"function {entry.name!r} is registered twice")
        self._by_name[entry.name] = entry
        return entry

    def lookup(self, name: str) -> UserFunction:
        """The function registered under `name`.

        Raises:
            FunctionNotRegistered: None is; the error names the registered ones.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise FunctionNotRegistered(name, self._by_name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._by_name))

    def __len__(self) -> int:
        return len(self._by_name)
