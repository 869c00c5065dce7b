"""`dagu_execute`'s run actions, the parts that need no database: an inline spec's trip to
the document worker."""

from __future__ import annotations

import pytest

from tests.tools.worker_calls import must_not_run
from tether.specs.limits import MAX_BYTES_SETTING, SpecLimits
from tether.tools.dagu import actions
from tether.tools.dagu.inputs import parse
from tether.tools.dagu.results import INVALID_TOOL_INPUT, DaguError


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
