"""Limits on caller-supplied DAG specs (`specs.limits`): each is refused before the work it
bounds, naming the setting and its value; a spec inside every limit loads as without them;
and the loader's work grows linearly with the steps."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import tether.specs
from tether.specs.dag import InvalidYaml, LimitExceeded, check_size, load_string
from tether.specs.limits import (
    MAX_ALIASES_SETTING,
    MAX_BYTES_SETTING,
    MAX_DEPTH_SETTING,
    MAX_STEPS_SETTING,
    SpecLimits,
    json_over_depth,
)
from tether.specs.realm import plan_workflow
from tether.specs.realm.errors import LimitExceeded as PlanLimitExceeded

SPECS = Path(tether.specs.__file__).parent
HEAD = "name: x\nsteps:\n  - name: s\n    run: act\n"


def steps(n: int, *, chain: bool = True, bad_last: bool = False) -> str:
    lines = ["name: big", "steps:"]
    for i in range(n):
        lines += [f"  - name: s{i}", "    run: act"]
        if not chain and i:
            lines.append(f"    depends: [s{i - 1}]")
    if bad_last:
        lines.append("    signalOnStop: INT")  # outside the subset: refused if it were read
    return "\n".join(lines) + "\n"


def refusal(text: str, limits: SpecLimits) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as caught:
        load_string(text, limits=limits)
    return caught.value


def test_a_spec_over_the_byte_limit_is_refused_before_it_is_read() -> None:
    """Our choice: the size is checked first, so text that is not even YAML is refused for
    its size, naming the setting and its value."""
    err = refusal("steps: [" * 200, SpecLimits(max_bytes=1000))
    assert (err.setting, err.maximum) == (MAX_BYTES_SETTING, 1000)
    assert f"{MAX_BYTES_SETTING}=1000" in str(err) and err.line == 1


def test_bytes_are_counted_in_utf_8() -> None:
    """Our choice: the limit is on UTF-8 bytes, so 300 two-byte characters are 600 bytes."""
    text = HEAD + "description: " + "é" * 300 + "\n"
    assert load_string(text, limits=SpecLimits(max_bytes=len(text.encode()))).name == "x"
    err = refusal(text, SpecLimits(max_bytes=len(text.encode()) - 1))
    assert err.setting == MAX_BYTES_SETTING


def test_check_size_refuses_an_oversized_text_as_loading_it_would() -> None:
    """Our choice: a caller that hands a spec elsewhere to be loaded checks its size first,
    with the refusal loading would give, and lets through what loading would let through."""
    text = HEAD + "description: " + "é" * 300 + "\n"
    limits = SpecLimits(max_bytes=len(text.encode()) - 1)
    with pytest.raises(LimitExceeded) as caught:
        check_size(text, limits)
    assert str(caught.value) == str(refusal(text, limits))
    assert caught.value.setting == MAX_BYTES_SETTING
    check_size(text, SpecLimits(max_bytes=len(text.encode())))


def test_too_many_steps_are_refused_before_any_step_is_parsed() -> None:
    """Our choice: the count is checked before the steps are read, so a step the loader
    would refuse after it is never reached; the refusal names `steps` and its line."""
    err = refusal(steps(11, bad_last=True), SpecLimits(max_steps=10))
    assert (err.setting, err.maximum, err.field, err.line) == (MAX_STEPS_SETTING, 10, "steps", 2)
    assert f"{MAX_STEPS_SETTING}=10" in str(err)
    assert load_string(steps(10), limits=SpecLimits(max_steps=10)).order[-1] == "s9"


def test_nesting_deeper_than_the_limit_is_refused_at_its_line() -> None:
    """Our choice: depth counts every mapping and list level from the document's root."""
    deep = HEAD + "env:\n  - A: " + "[" * 40 + "]" * 40 + "\n"
    err = refusal(deep, SpecLimits(max_depth=32))
    assert (err.setting, err.maximum, err.line) == (MAX_DEPTH_SETTING, 32, 6)
    assert f"{MAX_DEPTH_SETTING}=32" in str(err)


def test_deep_documents_are_refused_without_recursing() -> None:
    """Our choice: composing stops at the limit, far below Python's recursion limit (which
    500 levels reach when nothing bounds them); past 1,000 levels libyaml refuses the text
    itself."""
    for levels, refused in ((500, LimitExceeded), (100_000, InvalidYaml)):
        with pytest.raises(refused):
            load_string(HEAD + "env: " + "[" * levels + "]" * levels + "\n", limits=SpecLimits())


def test_aliases_over_the_limit_are_refused() -> None:
    """Our choice: aliases are counted as the document is composed."""
    refs = ", ".join(["*v"] * 4)
    text = HEAD + f"labels: [&v a, {refs}]\n"
    assert load_string(text, limits=SpecLimits(max_aliases=4)).name == "x"
    err = refusal(text, SpecLimits(max_aliases=3))
    assert (err.setting, err.maximum, err.line) == (MAX_ALIASES_SETTING, 3, 5)


def billion_laughs(levels: int = 9) -> str:
    lines = [HEAD.rstrip("\n"), "x-lol0: &l0 [lol]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * 10)
        lines.append(f"x-lol{i}: &l{i} [{refs}]")
    lines.append(f"env: [{{A: *l{levels}}}]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_is_refused_without_being_expanded() -> None:
    """Our choice: 91 aliases that stand for a billion nodes are refused for what they
    expand to (more nodes than the byte limit could hold written out), even with an alias
    limit that lets them all through; nothing walks the expansion."""
    text = billion_laughs()
    assert len(text) < 1000
    err = refusal(text, SpecLimits(max_aliases=1000))
    assert (err.setting, err.maximum) == (MAX_BYTES_SETTING, SpecLimits().max_bytes)
    assert "expand" in err.reason


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    """Our choice: a recursive node cannot be a spec; it is refused, not walked forever."""
    err = refusal(HEAD + "env: &e [*e]\n", SpecLimits())
    assert err.line == 5 and "contains it" in err.reason


def test_a_spec_inside_every_limit_loads_as_without_limits() -> None:
    """The limits change nothing for a spec that keeps them (aliases included)."""
    text = HEAD + "env: [{A: &v one}, {B: *v}]\ndescription: ok\n"
    assert load_string(text, limits=SpecLimits()) == load_string(text)


def test_without_limits_a_big_file_still_loads() -> None:
    """Our choice: an operator's DAG files are not capped; only callers' documents are."""
    assert len(load_string(steps(1500)).steps) == 1500


def test_a_lone_surrogate_is_invalid_yaml() -> None:
    """JSON lets a caller send one; it is refused as YAML, not as a server error."""
    with pytest.raises(InvalidYaml) as caught:
        load_string(HEAD + "description: x\ud800y\n", limits=SpecLimits())
    assert caught.value.line == 5


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_depth"):
        SpecLimits(max_depth=0)


def test_json_depth_counts_levels_and_stops_early() -> None:
    """A scalar is one level; each object or list adds one."""
    assert not json_over_depth({"a": [1]}, SpecLimits(max_depth=3))
    assert json_over_depth({"a": [[1]]}, SpecLimits(max_depth=3))
    deep: Any = 1
    for _ in range(10_000):
        deep = [deep]
    assert json_over_depth(deep, SpecLimits(max_depth=32))


def plan(n: int, schema: object = None) -> dict[str, object]:
    step: dict[str, object] = {"description": "do it"}
    if schema is not None:
        step["input_schema"] = schema
    return {"steps": [{"id": f"s{i}", **step} for i in range(n)]}


@pytest.mark.parametrize(
    ("arguments", "limits", "setting"),
    [
        (plan(11), SpecLimits(max_steps=10), MAX_STEPS_SETTING),
        (plan(1, {"type": "object", "properties": {"a": {"type": "object"}}}),
         SpecLimits(max_depth=5), MAX_DEPTH_SETTING),
        (plan(50), SpecLimits(max_bytes=1000), MAX_BYTES_SETTING),
    ],
)  # fmt: skip
def test_a_plan_over_a_limit_is_refused_naming_it(
    arguments: dict[str, object], limits: SpecLimits, setting: str
) -> None:
    """Our choice: a `create_workflow` plan keeps the same limits as an inline spec."""
    with pytest.raises(PlanLimitExceeded) as caught:
        plan_workflow(arguments, limits)
    assert caught.value.setting == setting
    assert f"{setting}=" in str(caught.value)
    plan_workflow(arguments)  # the same plan without limits is a good plan


def line_events(fn: Any) -> int:
    """How many lines of the spec loaders' own code `fn()` runs (deterministic work)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if not frame.f_code.co_filename.startswith(str(SPECS)):
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def doubled(chain: bool) -> Iterator[float]:
    for n in (200, 400):
        yield line_events(lambda n=n: load_string(steps(n, chain=chain)))


@pytest.mark.parametrize("chain", [True, False], ids=["chain", "graph"])
def test_loading_twice_the_steps_costs_about_twice_the_work(chain: bool) -> None:
    """Our choice: the loader is linear in steps (ordering them used to be quadratic, which
    made a 20,000-step spec take minutes): counted in lines run, never timed."""
    small, large = doubled(chain)
    assert large / small < 2.5
