"""`dagu_execute`'s run actions, the parts that need no database: an inline spec's trip to
the document worker."""

from __future__ import annotations

import io
import pickle
from typing import Any

import pytest

from tests.tools.worker_calls import must_not_run
from tether.specs.limits import MAX_BYTES_SETTING, SpecLimits
from tether.tools import offload
from tether.tools.dagu import actions
from tether.tools.dagu.inputs import parse
from tether.tools.dagu.results import INVALID_TOOL_INPUT, DaguError

LIMITS = SpecLimits()


async def test_an_inline_spec_over_the_byte_limit_is_refused_before_it_goes_to_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our choice: its size is checked where the text is (in constant time once it holds more
    characters than the limit allows bytes), so an oversized spec never crosses to the
    worker; the refusal names the limit as the loader's does."""
    monkeypatch.setattr(actions, "load_string", must_not_run)
    inp = parse({"action": "start", "name": "big", "spec": "name: big\n" + "x" * 100})
    with pytest.raises(DaguError) as caught:
        await actions.load_inline(inp, SpecLimits(max_bytes=64))
    assert caught.value.code == INVALID_TOOL_INPUT
    assert caught.value.details == {"limit": MAX_BYTES_SETTING, "maximum": 64}


async def test_an_inline_spec_crosses_from_the_worker_a_step_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our choice: its steps and handlers are unpickled one by one ahead of the spec, so the
    event loop runs other work between slices of a large spec."""
    ahead: list[int] = []
    loads = offload._loads

    async def counted(packed: bytes) -> Any:
        ahead.append(pickle.Unpickler(io.BytesIO(packed)).load())  # noqa: S301 — the worker's
        return await loads(packed)

    monkeypatch.setattr(offload, "_loads", counted)
    steps = "".join(f"  - {{name: s{i}, run: act}}\n" for i in range(5))
    text = "handlerOn:\n  exit: {run: act}\nsteps:\n" + steps
    with offload.in_use():  # the worker, stopped at the end
        spec = await actions.load_inline(
            parse({"action": "start", "name": "n", "spec": text}), LIMITS
        )
    assert ahead == [6]
    assert [s.name for s in spec.steps] == [f"s{i}" for i in range(5)]
