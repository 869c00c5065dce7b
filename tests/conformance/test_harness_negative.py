"""The harness against respx-scripted servers (tests/conformance/fake_server.py): the faultless
one passes every check, and each fault — one broken rule — makes its checks fail, so no check
can pass vacuously. A test enforces that every check id has such a negative case."""

from __future__ import annotations

from collections.abc import Collection

import pytest
import respx

from tests.conformance.fake_server import URL, Fake
from tether.conformance import runner
from tether.conformance.check import Check
from tether.conformance.client import Client
from tether.conformance.context import Context, Options
from tether.conformance.requirements import REQUIREMENTS
from tether.conformance.runner import run
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios import ALL

OPTIONS = Options(
    timeout=1, strict=True, creations=20, min_poll_s=0.001, observe_s=0.05, after_end_s=0.05
)
SCENARIO_OF = {check: sc.id for sc in ALL for check in sc.checks}
#: Scenarios a fault needs besides those of its checks (hygiene judges the replies of others).
NEEDS: dict[str, tuple[str, ...]] = {"get-type-task": ("get",)}

#: fault → the checks it must make fail (their scenarios are the ones run).
FAULTS: dict[str, tuple[str, ...]] = {
    # envelope & errors
    "discover-text-plain": ("http:discover-ok",),
    "get-200": ("http:get-405",),
    "delete-200": ("http:delete-405",),
    "parse-error-200": ("http:parse-error",),
    "batch-ok": ("http:batch-rejected",),
    "null-id-ok": ("http:null-id-rejected",),
    "response-ok": ("http:response-rejected",),
    "notification-body": ("http:notification-202",),
    "error-id-string": ("http:error-keeps-id",),
    "session-id": ("http:session-id-ignored",),
    "last-event-id-error": ("http:last-event-id-ignored",),
    "unknown-method-400": ("routing:unknown-method", "errors:http-status"),
    "initialize-ok": ("routing:initialize-removed",),
    "ping-ok": ("routing:ping-removed",),
    "logging-ok": ("routing:logging-removed",),
    "subscribe-ok": ("routing:subscribe-removed",),
    "tasks-result-ok": ("routing:tasks-result-removed",),
    "tasks-list-ok": ("routing:tasks-list-removed",),
    "completion-ok": ("routing:unadvertised-capability",),
    "result-type-missing": ("envelope:result-type",),
    "sse-buffered": ("http:sse-accel-buffering",),
    "sse-request": ("http:sse-no-requests",),
    # origin & content type
    "no-origin-check": ("origin:foreign-403",),
    "local-origin-403": ("origin:absent-or-local-ok",),
    "text-plain-ok": ("origin:content-type",),
    "accept-500": ("origin:accept",),
    # versions
    "version-header-optional": ("version:header-missing",),
    "version-mismatch-ignored": ("version:header-meta-mismatch",),
    "version-data-missing": ("version:unknown", "errors:version-data"),
    "version-status-200": ("version:unknown", "errors:http-status"),
    "supported-extra": ("version:supported-subset",),
    "legacy-version-accepted": ("version:legacy-not-served",),
    "legacy-era-task": ("caps:legacy-version-no-task",),
    # stateless _meta
    "params-optional": ("meta:params-missing",),
    "meta-optional": ("meta:meta-missing",),
    "meta-version-optional": ("meta:protocol-version-missing",),
    "meta-caps-optional": ("meta:capabilities-missing",),
    "client-info-required": ("meta:client-info-optional",),
    "caps-any-type": ("meta:capabilities-not-object",),
    "caps-sticky": ("meta:capabilities-per-request",),
    # headers & Base64 names
    "method-header-optional": ("headers:method-missing",),
    "method-header-ignored": ("headers:method-mismatch",),
    "method-header-case-insensitive": ("headers:method-case",),
    "header-names-case-sensitive": ("headers:name-case-insensitive",),
    "name-optional": ("headers:name-missing",),
    "name-mismatch-ignored": ("headers:name-mismatch",),
    "no-base64-decode": ("headers:name-base64", "headers:param-match"),
    "base64-error-500": ("headers:base64-bad-padding", "headers:base64-bad-chars"),
    "base64-case-insensitive": ("headers:base64-uppercase-literal",),
    "no-trim": ("headers:name-whitespace",),
    "task-name-always-mismatch": ("headers:task-name-match",),
    "tasks/get-name-ignored": ("headers:task-get-name-mismatch",),
    "tasks/update-name-ignored": ("headers:task-update-name-mismatch",),
    "tasks/cancel-name-ignored": ("headers:task-cancel-name-mismatch",),
    "task-name-missing-breaks": ("headers:task-name-missing",),
    "method-header-wins": ("headers:task-method-mismatch",),
    "param-optional": ("headers:param-missing",),
    "param-mismatch-ignored": ("headers:param-mismatch",),
    "param-no-base64": ("headers:param-match",),
    "header-mismatch-legacy-code": ("errors:no-forbidden-codes", "headers:method-missing"),
    # discover & caching
    "discover-type-task": ("discover:complete-and-version",),
    "discover-no-version": ("discover:complete-and-version",),
    "discover-ext-settings": ("discover:tasks-extension",),
    "discover-legacy-tasks": ("discover:no-legacy-tasks",),
    "discover-no-ttl": ("discover:cache-hints",),
    "discover-no-server-info": ("discover:server-info",),
    "discover-caps-vary": ("discover:caps-independent",),
    "list-no-cache": ("tools-list:shape",),
    "list-page-scope": ("tools-list:page-scope",),
    "list-order-varies": ("tools-list:order",),
    "list-changes-after-call": ("tools-list:stable",),
    "unknown-tool-result": ("tools-call:unknown-tool",),
    "greet-has-task-id": ("tools-call:sync",),
    # capability gates
    "task-without-ext": ("caps:task-tool-without-ext",),
    "required-task-sync": ("caps:required-task-tool",),
    "tasks-get-no-gate": ("caps:tasks-get-without-ext",),
    "tasks-update-no-gate": ("caps:tasks-update-without-ext",),
    "tasks-cancel-no-gate": ("caps:tasks-cancel-without-ext",),
    "gate-after-lookup": ("caps:gate-before-lookup",),
    "legacy-caps-tasks": ("caps:legacy-capability-ignored",),
    "legacy-task-param-sync-error": ("caps:legacy-task-param-sync",),
    "legacy-task-param": ("caps:legacy-task-param-no-ext",),
    "prompt-task": ("caps:no-task-for-prompts-resources",),
    "listen-ok": ("caps:listen-without-ext",),
    "listen-ack-late": ("notify:ack-first",),
    "listen-ack-extra-ids": ("notify:ack-first",),
    "listen-view-result-type": ("notify:task-view",),
    "listen-view-differs": ("notify:task-view",),
    "listen-progress": ("notify:nothing-unrequested",),
    "listen-unrequested": ("notify:nothing-unrequested",),
    "missing-cap-data-array": ("caps:missing-capability-data", "errors:capability-data"),
    # task creation
    "create-sync": ("create:task-result",),
    "create-nested": ("create:task-id",),
    "create-status-bad": ("create:status",),
    "create-timestamps-bad": ("create:timestamps",),
    "create-no-ttl": ("create:ttl",),
    "create-poll-zero": ("create:poll-interval",),
    "create-legacy-keys": ("create:no-legacy-keys",),
    "create-has-result": ("create:no-result-fields",),
    "ids-sequential": ("create:ids-distinct",),
    "ids-spaces": ("create:id-header-safe",),
    "create-not-durable": ("durability:get-immediately",),
    "mrtr-task-first": ("mrtr:input-before-task",),
    "mrtr-state-leak": ("mrtr:input-before-task",),
    # tasks/get
    "working-wrong-status": ("get:working-shape",),
    "working-no-ttl": ("get:working-shape",),
    "working-has-result": ("get:working-no-payload",),
    "get-type-task": ("get:never-task",),
    "get-unknown-result": ("get:unknown-id",),
    "unknown-task-400": ("get:unknown-id-http-200",),
    "completed-no-content": ("get:completed-result",),
    "completed-differs": ("get:completed-result",),
    "tool-error-failed": ("get:tool-error-completed",),
    "failed-no-error": ("get:failed-error",),
    "failed-no-message": ("get:failed-status-message",),
    "input-no-requests": ("get:input-required-shape",),
    "input-unstable": ("get:input-snapshot-stable",),
    "terminal-flaps": ("get:terminal-stable",),
    "forget-ended-fast": ("get:readable-after-end",),
    "related-task-meta": ("get:no-related-task-meta",),
    "timestamps-frozen": ("get:timestamps-ordered",),
    "ttl-gone-wrong-code": ("ttl:purged-invalid-params",),
    "get-missing-id-ok": ("get:missing-task-id",),
    # tasks/update
    "update-ack-type": ("update:ack",),
    "update-ack-fields": ("update:ack-no-task-fields",),
    "answered-key-stays": ("update:key-consumed",),
    "answers-dropped": ("update:answer-reached-task",),
    "unknown-key-clears": ("update:unknown-key-ignored",),
    "resend-changes": ("update:resend-no-effect",),
    "partial-needs-all": ("update:partial-answer",),
    "key-reused": ("update:keys-unique",),
    "update-unknown-ack": ("update:unknown-task",),
    "update-working-error": ("update:not-waiting-ignored",),
    "update-requires-nothing": ("update:responses-required",),
    "empty-responses-error": ("update:empty-responses",),
    "decline-accepted": ("update:decline-refused",),
    "elicit-without-cap": ("update:no-elicitation-without-cap",),
    "url-mode": ("update:no-url-mode",),
    # tasks/cancel
    "notification-cancels-task": ("cancel:notification-ignored",),
    "cancel-ack-fields": ("cancel:ack",),
    "cancel-never-ends": ("cancel:reaches-terminal",),
    "cancel-flaps": ("cancel:stays-cancelled", "cancel:reaches-terminal"),
    "cancel-completed-error": ("cancel:completed-idempotent",),
    "cancel-unknown-ack": ("cancel:unknown-task",),
}


async def harness(
    faults: Collection[str], scenarios: Collection[str] | None = None
) -> dict[str, Check]:
    """Run the harness (selected scenarios) against a fake server with `faults`."""
    fake = Fake(faults)
    with respx.mock(assert_all_called=False) as mock:
        mock.route(url__startswith=URL).mock(side_effect=fake)
        client = Client(URL, timeout=OPTIONS.timeout)
        try:
            chosen = sorted(scenarios) if scenarios else None
            checks = await run(client, OPTIONS, chosen, hygiene=not scenarios)
        finally:
            await client.aclose()
    return {c.id: c for c in checks}


async def test_the_faultless_scripted_server_passes_every_check() -> None:
    """Our choice: the scripted server is a correct reference; every check passes on it."""
    checks = await harness(())
    assert {i: c.message for i, c in checks.items() if c.status != "pass"} == {}
    assert set(checks) == set(REQUIREMENTS)


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_each_scripted_violation_fails_its_checks(fault: str) -> None:
    """A server that breaks one rule makes the checks for that rule fail."""
    expected = FAULTS[fault]
    checks = await harness([fault], {SCENARIO_OF[c] for c in expected} | set(NEEDS.get(fault, ())))
    got = {c: (checks[c].status, checks[c].message) if c in checks else None for c in expected}
    assert {c: v for c, v in got.items() if v is None or v[0] != "fail"} == {}


def test_every_check_has_a_scripted_violation() -> None:
    """No check can pass vacuously — each one fails against some scripted server."""
    covered = {c for checks in FAULTS.values() for c in checks}
    assert sorted(set(REQUIREMENTS) - covered) == []
    assert sorted(covered - set(REQUIREMENTS)) == []


async def test_a_scenario_that_breaks_fails_its_unrecorded_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our choice: a scenario that raises (an unexpected reply shape, a harness bug) fails the
    checks it had not recorded yet — never a silent pass — and the run goes on."""

    async def boom(ctx: Context) -> None:
        ctx.passed("http:get-405", "recorded before the crash")
        raise RuntimeError("boom")

    broken = FunctionScenario("broken", "broken", ("http:get-405", "http:delete-405"), boom)
    monkeypatch.setattr(runner, "SCENARIOS", (broken,))
    with respx.mock(assert_all_called=False) as mock:
        mock.route(url__startswith=URL).mock(side_effect=Fake())
        client = Client(URL, timeout=OPTIONS.timeout)
        try:
            checks = {c.id: c for c in await run(client, OPTIONS, ["broken"], hygiene=False)}
        finally:
            await client.aclose()
    assert {k: c.status for k, c in checks.items()} == {
        "http:get-405": "pass",
        "http:delete-405": "fail",
    }
    assert checks["http:delete-405"].message == "scenario aborted: RuntimeError: boom"
