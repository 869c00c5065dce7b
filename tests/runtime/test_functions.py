"""The one registry of user functions (runtime/functions.py): what registration accepts, how a
function is called, and the one error for a name nobody registered. Our choice."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tether.runtime.functions import FunctionNotRegistered, Functions, user_function
from tether.runtime.registry import App


def test_function_action_and_handler_fill_one_registry() -> None:
    """`App.function` and its two other spellings, `action` and `handler`, register into the
    one registry, so a name taken by one is taken for all."""
    app = App()

    @app.function()
    def shared(x: int) -> int:
        return x

    app.action("by_action")(lambda: None)
    app.handler("by_handler")(lambda inputs: inputs)
    assert sorted(app.functions) == ["by_action", "by_handler", "shared"]
    with pytest.raises(ValueError, match="registered twice"):
        app.handler("shared")(lambda inputs: inputs)
    with pytest.raises(ValueError, match="registered twice"):
        app.action("by_handler")(lambda: None)


def _numbers() -> Iterator[int]:
    yield 1


async def _stream() -> AsyncIterator[int]:
    yield 1


class _Opaque:
    """A callable whose parameters cannot be read."""

    __signature__ = "unreadable"

    def __call__(self) -> None:
        return None


@pytest.mark.parametrize(
    "fn", [42, _numbers, _stream, _Opaque()], ids=["int", "gen", "agen", "opaque"]
)
def test_registration_refuses_what_is_not_a_function_returning_its_result(fn: Any) -> None:
    """Only something callable, whose parameters can be read and which returns its result
    (not a generator) is registered; anything else is a TypeError and registers nothing."""
    functions = Functions()
    with pytest.raises(TypeError):
        functions.register(fn, "f")
    assert "f" not in functions


def test_an_unknown_name_is_one_error_naming_the_registered_functions() -> None:
    """A lookup of a name nobody registered raises FunctionNotRegistered, which names the
    name asked for and every registered one."""
    functions = Functions()
    with pytest.raises(FunctionNotRegistered) as none:
        functions.lookup("fetch")
    assert (none.value.name, none.value.registered) == ("fetch", ())
    functions.register(lambda: None, "zeta")
    functions.register(lambda: None, "alpha")
    with pytest.raises(FunctionNotRegistered) as some:
        functions.lookup("fetch")
    assert some.value.registered == ("alpha", "zeta")
    assert "'alpha', 'zeta'" in str(some.value)
    assert isinstance(some.value, LookupError)


async def test_a_sync_function_runs_in_a_worker_thread_and_an_async_one_on_the_loop() -> None:
    """A sync function never holds the event loop: it runs in a worker thread; an async one
    is awaited on the loop; a sync one returning an awaitable has it awaited."""
    seen: dict[str, bool] = {}

    def plain() -> str:
        seen["plain"] = threading.current_thread() is threading.main_thread()
        return "p"

    async def coroutine() -> str:
        seen["coroutine"] = threading.current_thread() is threading.main_thread()
        return "c"

    assert await user_function(plain).call() == "p"
    assert await user_function(coroutine).call() == "c"
    assert await user_function(lambda: asyncio.sleep(0, "a"), "wrapped").call() == "a"
    assert seen == {"plain": False, "coroutine": True}


async def test_arguments_that_do_not_fit_its_parameters_fail_before_it_is_called() -> None:
    """Arguments the function does not declare are a TypeError naming the function, raised
    before it runs."""
    calls: list[int] = []

    def add(a: int, b: int) -> int:
        calls.append(1)
        return a + b

    entry = user_function(add)
    assert (entry.name, entry.is_async) == ("add", False)
    with pytest.raises(TypeError, match="'add'"):
        await entry.call(a=1, c=2)
    with pytest.raises(TypeError, match="'add'"):
        await entry.call({"params": {}})
    assert calls == []
    assert await entry.call(a=1, b=2) == 3
