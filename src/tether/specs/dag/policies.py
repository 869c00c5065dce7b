"""Parsers for a step's run policies: preconditions, continueOn, retryPolicy, approval.

Both spellings Dagu has used are accepted for a field (`continueOn` / `continue_on`); writing
both in one mapping is an error.
"""

from __future__ import annotations

import re
from typing import Final

import yaml

from tether.specs import approvers, patterns
from tether.specs.dag.model import Approval, ContinueOn, Precondition, RetryPolicy
from tether.specs.dag.nodes import At, Fields, boolean, integer, items, nonblank, string

# A `$` that may start a reference expanded when the step runs (`${…}`, `$1`, `$NAME`), so the
# pattern is known only then; a `$` anywhere else is the regex's end anchor.
_REFERENCE: Final = re.compile(r"\$[{A-Za-z0-9_]")


def parse_preconditions(node: yaml.Node, at: At) -> tuple[Precondition, ...]:
    """A string (one command), or a list of strings / `{condition, expected?, negate?}`
    (older Dagu also spelled `condition` as `command`)."""
    if isinstance(node, yaml.ScalarNode):
        return (Precondition(string(node, at)),)
    out = []
    for item, item_at in items(node, at):
        if isinstance(item, yaml.ScalarNode):
            out.append(Precondition(string(item, item_at)))
            continue
        fields = Fields(item, item_at)
        cond = fields.take("condition", "command", "eval") or item_at.fail(
            "a precondition needs `condition` (or `eval` with `expected`)"
        )
        expected = fields.take("expected")
        if expected is None and cond[1].field == "eval":
            cond[1].fail("`eval` needs `expected`")
        negate = fields.take("negate")
        fields.finish()
        out.append(
            Precondition(
                nonblank(*cond),
                _expected(*expected) if expected else None,
                boolean(*negate) if negate else False,
            )
        )
    return tuple(out)


def _expected(node: yaml.Node, at: At) -> str:
    """`expected`: text, or `re:<regex>` (RE2 syntax; a regex without a `${…}` or `$NAME`
    reference is compiled now, one with a reference when the step runs)."""
    text = string(node, at, allow_scalars=True)
    if text.startswith("re:") and not text[3:]:
        at.fail("an empty regular expression")
    if text.startswith("re:") and not _REFERENCE.search(text):
        _check_pattern(text[3:], at)
    return text


def _check_pattern(pattern: str, at: At) -> None:
    if (why := patterns.check(pattern)) is not None:
        at.fail(f"not a valid regular expression (RE2 syntax): {why}")


def _outputs(node: yaml.Node, at: At) -> tuple[str, ...]:
    """`continueOn.output`: substrings, or `re:<regex>` (RE2 syntax, compiled now)."""
    if isinstance(node, yaml.SequenceNode):
        found = tuple((string(n, a), a) for n, a in items(node, at))
    else:
        found = ((string(node, at), at),)
    for text, place in found:
        if text.startswith("re:"):
            _check_pattern(text[3:], place)
    return tuple(text for text, _ in found)


def _exit_codes(node: yaml.Node, at: At) -> tuple[int, ...]:
    if isinstance(node, yaml.SequenceNode):
        return tuple(integer(n, a) for n, a in items(node, at))
    return (integer(node, at, digits=True),)


def parse_continue_on(node: yaml.Node, at: At) -> ContinueOn:
    """`skipped` / `failed` shorthand, or `{failure, skipped, exitCode, output, markSuccess}`."""
    if isinstance(node, yaml.ScalarNode):
        word = string(node, at)
        if word not in ("skipped", "failed"):
            at.fail("must be `skipped`, `failed` or a mapping")
        return ContinueOn(failure=word == "failed", skipped=word == "skipped")
    fields = Fields(node, at)
    failure = fields.take("failure")
    skipped = fields.take("skipped")
    codes = fields.take("exitCode", "exit_code")
    output = fields.take("output")
    mark = fields.take("markSuccess", "mark_success")
    fields.finish()
    return ContinueOn(
        failure=boolean(*failure) if failure else False,
        skipped=boolean(*skipped) if skipped else False,
        exit_codes=_exit_codes(*codes) if codes else (),
        output=_outputs(*output) if output else (),
        mark_success=boolean(*mark) if mark else False,
    )


def parse_retry_policy(node: yaml.Node, at: At) -> RetryPolicy:
    """`{limit, intervalSec, exitCode, backoff, maxIntervalSec}`; `limit` is required."""
    fields = Fields(node, at)
    limit = fields.take("limit") or at.fail("a retryPolicy needs `limit`")
    interval = fields.take("intervalSec", "interval_sec")
    codes = fields.take("exitCode", "exit_code")
    backoff = fields.take("backoff")
    cap = fields.take("maxIntervalSec", "max_interval_sec")
    fields.finish()
    return RetryPolicy(
        limit=integer(*limit, minimum=0, digits=True),
        interval_sec=integer(*interval, minimum=0, digits=True) if interval else 0,
        exit_codes=_exit_codes(*codes) if codes else (),
        backoff=_backoff(*backoff) if backoff else None,
        max_interval_sec=integer(*cap, minimum=1) if cap else None,
    )


def _backoff(node: yaml.Node, at: At) -> float | None:
    """`true` means 2.0, `false` none, a number (> 1) is the multiplier."""
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":bool"):
        return 2.0 if boolean(node, at) else None
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith((":int", ":float")):
        factor = float(node.value)
        if factor > 1:
            return factor
    return at.fail("must be true, false or a number greater than 1")


def retry_delay(policy: RetryPolicy, retry: int) -> float:
    """Seconds to wait before retry number `retry` (1-based), backoff and cap applied."""
    delay = float(policy.interval_sec)
    if policy.backoff is not None:
        delay *= policy.backoff ** (retry - 1)
    if policy.max_interval_sec is not None:
        delay = min(delay, float(policy.max_interval_sec))
    return delay


def parse_approval(node: yaml.Node, at: At) -> tuple[Approval, At | None]:
    """`{prompt, input, required, rewind_to}`, and Tether's own `approvers`, `quorum` and
    `allowSelfApproval`; `{}` is valid. Returns the place of `rewind_to` so the graph check
    can point at it; the name is resolved by the caller."""
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
        return Approval(), None
    fields = Fields(node, at)
    prompt = fields.take("prompt")
    inputs = fields.take("input")
    required = fields.take("required")
    rewind = fields.take("rewind_to", "rewindTo")
    voters = fields.take("approvers")
    quorum_f = fields.take("quorum")
    own = fields.take("allowSelfApproval", "allow_self_approval")
    fields.finish()
    quorum = _quorum(*quorum_f) if quorum_f else None
    names, role = _approvers(*voters, quorum or 1) if voters else (None, None)
    return Approval(
        prompt=string(*prompt) if prompt else None,
        input=_names(*inputs) if inputs else (),
        required=_names(*required) if required else (),
        rewind_to=string(*rewind) if rewind else None,
        approvers=names,
        approver_role=role,
        quorum=quorum,
        allow_self_approval=boolean(*own) if own else None,
    ), rewind[1] if rewind else None


def _quorum(node: yaml.Node, at: At) -> int:
    value = integer(node, at)
    try:
        return approvers.check_quorum(value)
    except ValueError as exc:
        return at.fail(str(exc))


def _approvers(node: yaml.Node, at: At, quorum: int) -> tuple[tuple[str, ...] | None, str | None]:
    """`approvers`: a list of names, or `{role: NAME}` (the members of a role of
    TETHER_APPROVER_ROLES)."""
    if isinstance(node, yaml.MappingNode):
        fields = Fields(node, at)
        role = fields.take("role")
        fields.finish()
        if role is None:
            return at.fail("approvers as a mapping needs `role`")
        try:
            return None, approvers.check_role(string(*role))
        except ValueError as exc:
            return role[1].fail(str(exc))
    names = [string(n, a) for n, a in items(node, at)]
    try:
        return approvers.check_approvers(names, quorum), None
    except ValueError as exc:
        return at.fail(str(exc))


def _names(node: yaml.Node, at: At) -> tuple[str, ...]:
    names = tuple(string(n, a) for n, a in items(node, at))
    if len(set(names)) != len(names):
        at.fail("names must be unique")
    return names
