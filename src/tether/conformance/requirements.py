# ruff: noqa: E501 — one requirement per line reads as a table; the sentences are data
"""Every check the harness makes: id → level, CHECKLIST items, spec URL, behaviour sentence.

Levels: `MUST` and `S9` (the official suite's reading) fail when violated; `SHOULD`, `MAY`,
`REC` (the recommended choice where the spec is silent), `SEED` (a rule of the Harvest client
contract Tether keeps, where the spec is silent) and `TETHER` (Tether's own choices) warn, and
fail only with `--strict`. The level names are the CHECKLIST's tags. A check with no CHECKLIST
item is an explicit extra. `DEFERRED` records the CHECKLIST items no check covers, with why.
A test enforces the mapping both ways (tests/conformance/test_requirements.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from tether.conformance import spec

Level = Literal["MUST", "SHOULD", "MAY", "S9", "REC", "SEED", "TETHER"]
#: Levels whose violation is a failure even without --strict.
FAILING_LEVELS: Final = frozenset({"MUST", "S9"})
CHECKLIST_SIZE: Final = 139


@dataclass(frozen=True)
class Requirement:
    id: str
    level: Level
    items: tuple[int, ...]
    url: str
    sentence: str

    @property
    def extra(self) -> bool:
        """Not in the CHECKLIST: a check the harness adds."""
        return not self.items

    @property
    def ref(self) -> str:
        items = ", ".join(str(i) for i in self.items) or "extra"
        return f"[{self.level}] CHECKLIST {items}; {self.url}"


_ALL: list[Requirement] = []


def _r(rid: str, level: Level, items: tuple[int, ...], url: str, sentence: str) -> None:
    _ALL.append(Requirement(rid, level, items, url, sentence))


# fmt: off
# --- A. HTTP transport basics --------------------------------------------------------------------
_r("http:discover-ok", "MUST", (1,), spec.URL_TRANSPORT, "server/discover is HTTP 200, JSON or SSE, same id, a result")
_r("http:get-405", "SHOULD", (2,), spec.URL_TRANSPORT, "HTTP GET to the endpoint is 405")
_r("http:delete-405", "SHOULD", (3,), spec.URL_TRANSPORT, "HTTP DELETE to the endpoint is 405")
_r("origin:foreign-403", "MUST", (4,), spec.URL_SECURITY, "a disallowed Origin is refused with 403")
_r("origin:absent-or-local-ok", "REC", (5,), spec.URL_SECURITY, "no Origin, or a loopback one, is served")
_r("origin:content-type", "SHOULD", (), spec.URL_TRANSPORT, "a POST whose Content-Type is not JSON is refused with a 4xx")
_r("origin:accept", "MUST", (), spec.URL_TRANSPORT, "a POST whose Accept lacks text/event-stream gets a 4xx or a normal reply, never 5xx")
_r("http:parse-error", "REC", (6,), spec.URL_ERRORS, "a body that is not JSON is 400 with -32700 and no id")
_r("http:batch-rejected", "REC", (7,), spec.URL_MESSAGES, "a JSON array body (batch) is 400 with -32600")
_r("http:null-id-rejected", "REC", (8,), spec.URL_MESSAGES, "a request with id null is 400 with -32600")
_r("http:response-rejected", "REC", (9,), spec.URL_MESSAGES, "a posted JSON-RPC response is 400 with -32600")
_r("http:notification-202", "MUST", (10,), spec.URL_TRANSPORT, "an accepted client notification is 202 with an empty body")
_r("http:error-keeps-id", "MUST", (11,), spec.URL_MESSAGES, "an error reply keeps the request id and its JSON type")
_r("http:session-id-ignored", "SHOULD", (12,), spec.URL_TRANSPORT, "Mcp-Session-Id is ignored and never minted")
_r("http:last-event-id-ignored", "SHOULD", (13,), spec.URL_TRANSPORT, "Last-Event-ID is ignored")
_r("http:sse-accel-buffering", "SHOULD", (14,), spec.URL_TRANSPORT, "an SSE reply carries X-Accel-Buffering: no")
_r("http:sse-no-requests", "MUST", (14,), spec.URL_TRANSPORT, "an SSE stream carries only notifications and the final response")

# --- B. protocol version and required _meta ------------------------------------------------------
_r("version:header-missing", "MUST", (15,), spec.URL_VALIDATION, "no MCP-Protocol-Version header is -32020/400")
_r("version:header-meta-mismatch", "MUST", (16,), spec.URL_VALIDATION, "header version different from _meta version is -32020/400")
_r("version:unknown", "MUST", (17,), spec.URL_VERSIONING, "an unknown version is -32022/400 with data.requested and data.supported")
_r("version:supported-subset", "S9", (18,), spec.URL_VERSIONING, "-32022 data.supported lists 2026-07-28 and only versions discover lists")
_r("version:legacy-not-served", "MUST", (19,), spec.URL_VERSIONING, "2025-11-25 on a 2026-only server is -32022/400 listing 2026-07-28")
_r("meta:params-missing", "MUST", (20,), spec.URL_META, "server/discover without params is -32602/400")
_r("meta:meta-missing", "MUST", (21,), spec.URL_META, "params without _meta is -32602/400")
_r("meta:protocol-version-missing", "MUST", (22,), spec.URL_META, "_meta without protocolVersion is -32602/400")
_r("meta:capabilities-missing", "MUST", (23,), spec.URL_META, "_meta without clientCapabilities is -32602/400")
_r("meta:client-info-optional", "MUST", (24,), spec.URL_META, "_meta without clientInfo is served")
_r("meta:capabilities-not-object", "REC", (25,), spec.URL_META, "clientCapabilities that is not an object is -32602/400")
_r("meta:capabilities-per-request", "MUST", (26,), spec.URL_META, "tasks/get with M0 for a task created with M+T is -32021/400")

# --- C. routing headers ------------------------------------------------------------------------------
_r("headers:method-missing", "MUST", (27,), spec.URL_VALIDATION, "no Mcp-Method header is -32020/400")
_r("headers:method-mismatch", "MUST", (28,), spec.URL_VALIDATION, "Mcp-Method different from the body method is -32020/400")
_r("headers:method-case", "MUST", (29,), spec.URL_VALIDATION, "Mcp-Method values are case-sensitive (TOOLS/LIST is -32020/400)")
_r("headers:name-case-insensitive", "MUST", (30,), spec.URL_VALIDATION, "header names in any case are accepted")
_r("headers:name-missing", "MUST", (31,), spec.URL_VALIDATION, "tools/call without Mcp-Name is -32020/400")
_r("headers:name-mismatch", "MUST", (32,), spec.URL_VALIDATION, "tools/call with a different Mcp-Name is -32020/400")
_r("headers:name-base64", "MUST", (33,), spec.URL_ENCODING, "a Base64-sentinel Mcp-Name is decoded before comparing")
_r("headers:base64-bad-padding", "MUST", (34,), spec.URL_ENCODING, "a Base64 value with bad padding is -32020/400")
_r("headers:base64-bad-chars", "MUST", (35,), spec.URL_ENCODING, "a Base64 value with invalid characters is -32020/400")
_r("headers:base64-uppercase-literal", "S9", (36,), spec.URL_ENCODING, "an uppercase =?BASE64? marker is taken literally (mismatch, -32020/400)")
_r("headers:name-whitespace", "S9", (37,), spec.URL_VALIDATION, "surrounding whitespace in Mcp-Name is trimmed")
_r("headers:task-name-match", "MUST", (38,), spec.URL_TASKS_HEADERS, "tasks/get with Mcp-Name equal to taskId is served")
_r("headers:task-get-name-mismatch", "MUST", (39,), spec.URL_TASKS_HEADERS, "tasks/get with a different Mcp-Name is -32020/400")
_r("headers:task-update-name-mismatch", "MUST", (40,), spec.URL_TASKS_HEADERS, "tasks/update with a different Mcp-Name is -32020/400")
_r("headers:task-cancel-name-mismatch", "MUST", (41,), spec.URL_TASKS_HEADERS, "tasks/cancel with a different Mcp-Name is -32020/400")
_r("headers:task-name-missing", "TETHER", (42,), spec.URL_TASKS_HEADERS, "tasks/get without Mcp-Name is served (interop; -32020/400 warns)")
_r("headers:task-method-mismatch", "MUST", (43,), spec.URL_VALIDATION, "a tasks/get body sent as Mcp-Method tasks/cancel is -32020/400 and cancels nothing")
_r("headers:param-missing", "MUST", (44,), spec.URL_CUSTOM_HEADERS, "an x-mcp-header argument without its Mcp-Param header is -32020/400")
_r("headers:param-mismatch", "MUST", (45,), spec.URL_CUSTOM_HEADERS, "an Mcp-Param header different from the body is -32020/400")
_r("headers:param-match", "MUST", (45,), spec.URL_CUSTOM_HEADERS, "a matching plain or Base64 Mcp-Param header is served")

# --- D. method routing and resultType ------------------------------------------------------------------
_r("routing:unknown-method", "MUST", (46,), spec.URL_ERRORS, "an unknown method is -32601/404")
_r("routing:initialize-removed", "MUST", (47,), spec.URL_VERSIONING, "a 2026-style initialize is -32601/404")
_r("routing:ping-removed", "MUST", (48,), spec.URL_ERRORS, "ping is -32601/404")
_r("routing:logging-removed", "MUST", (49,), spec.URL_ERRORS, "logging/setLevel is -32601/404")
_r("routing:subscribe-removed", "MUST", (50,), spec.URL_ERRORS, "resources/subscribe and unsubscribe are -32601/404")
_r("routing:tasks-result-removed", "MUST", (51,), spec.URL_TASKS_COMPAT, "tasks/result is -32601/404")
_r("routing:tasks-list-removed", "MUST", (52, 132), spec.URL_TASKS_SECURITY, "tasks/list is -32601/404 (tasks cannot be enumerated)")
_r("routing:unadvertised-capability", "MUST", (53,), spec.URL_DISCOVER, "a method whose capability is not advertised is -32601/404")
_r("envelope:result-type", "MUST", (54,), spec.URL_MESSAGES, "every 2026-07-28 success reply has a string resultType")

# --- E. server/discover, tools/list, caching -------------------------------------------------------------
_r("discover:complete-and-version", "MUST", (55,), spec.URL_DISCOVER, "discover is resultType complete and lists 2026-07-28")
_r("discover:tasks-extension", "MUST", (56,), spec.URL_TASKS_CAPABILITY, "discover advertises extensions[io.modelcontextprotocol/tasks] = {}")
_r("discover:no-legacy-tasks", "MUST", (57,), spec.URL_TASKS_COMPAT, "discover has no top-level tasks capability")
_r("discover:cache-hints", "MUST", (58,), spec.URL_CACHING, "discover has an integer ttlMs >= 0 and a valid cacheScope")
_r("discover:server-info", "SHOULD", (59,), spec.URL_DISCOVER, "discover _meta carries serverInfo with string name and version")
_r("discover:caps-independent", "REC", (60,), spec.URL_DISCOVER, "discover capabilities do not depend on the caller's declaration")
_r("tools-list:shape", "MUST", (61,), spec.URL_CACHING, "tools/list is complete with tools, integer ttlMs >= 0 and a cacheScope")
_r("tools-list:page-scope", "MUST", (62,), spec.URL_CACHING, "every page of tools/list has the same cacheScope")
_r("tools-list:order", "SHOULD", (63,), spec.URL_CACHING, "two tools/list calls list the tools in the same order")
_r("tools-list:stable", "MUST", (64,), spec.URL_CACHING, "the tool set does not change as a side effect of other requests")
_r("tools-call:unknown-tool", "MUST", (65,), spec.URL_TOOLS, "tools/call of an unknown tool is a -32602 error")
_r("tools-call:sync", "MUST", (66,), spec.URL_TOOLS, "a sync tool with M+T is complete with content and no taskId")

# --- F. task capability negotiation ----------------------------------------------------------------------
_r("caps:task-tool-without-ext", "MUST", (67,), spec.URL_TASKS_CAPABILITY, "a task tool called with M0 never returns a task")
_r("caps:required-task-tool", "MUST", (68,), spec.URL_TASKS_CAPABILITY, "a task-only tool with M0 is -32021/400 naming the extension")
_r("caps:tasks-get-without-ext", "MUST", (70,), spec.URL_TASKS_ERRORS, "tasks/get with M0 is -32021/400 naming the extension")
_r("caps:tasks-update-without-ext", "MUST", (71,), spec.URL_TASKS_ERRORS, "tasks/update with M0 is -32021/400")
_r("caps:tasks-cancel-without-ext", "MUST", (72,), spec.URL_TASKS_ERRORS, "tasks/cancel with M0 is -32021/400 and cancels nothing")
_r("caps:gate-before-lookup", "REC", (73,), spec.URL_TASKS_ERRORS, "tasks/get with M0 for an unknown task is -32021")
_r("caps:legacy-capability-ignored", "MUST", (74,), spec.URL_TASKS_COMPAT, "a legacy tasks client capability does not enable tasks")
_r("caps:legacy-task-param-sync", "MUST", (75,), spec.URL_TASKS_COMPAT, "a sync tool with the legacy task param is served synchronously")
_r("caps:legacy-task-param-no-ext", "MUST", (76,), spec.URL_TASKS_COMPAT, "the legacy task param without the extension creates no task")
_r("caps:no-task-for-prompts-resources", "MUST", (77,), spec.URL_TASKS_CREATE, "prompts/get and resources/read never return a task")
_r("caps:listen-without-ext", "MUST", (78,), spec.URL_TASKS_ERRORS, "subscriptions/listen for taskIds with M0 is -32021/400 (or -32601/404)")
_r("caps:legacy-version-no-task", "MUST", (79,), spec.URL_TASKS_COMPAT, "under a legacy version the extension never yields a task")
_r("caps:missing-capability-data", "MUST", (), spec.URL_META, "a tool needing an undeclared capability is -32021/400 naming it")

# --- G. CreateTaskResult -----------------------------------------------------------------------------------
_r("create:task-result", "MUST", (69, 80), spec.URL_TASKS_CREATE, "a task tool with M+T returns resultType task")
_r("create:task-id", "MUST", (81,), spec.URL_TASKS_CREATE, "taskId is a non-empty top-level string and there is no nested task")
_r("create:status", "MUST", (82,), spec.URL_TASKS_CREATE, "the created task's status is a task status")
_r("create:timestamps", "MUST", (83,), spec.URL_TASKS_CREATE, "createdAt and lastUpdatedAt are ISO 8601 date-times")
_r("create:ttl", "MUST", (84,), spec.URL_TASKS_CREATE, "ttlMs is present: a positive integer or null")
_r("create:poll-interval", "MUST", (85,), spec.URL_TASKS_CREATE, "pollIntervalMs is absent or a positive integer")
_r("create:no-legacy-keys", "S9", (86,), spec.URL_TASKS_COMPAT, "a CreateTaskResult has no ttl or pollInterval")
_r("create:no-result-fields", "S9", (87,), spec.URL_TASKS_CREATE, "a CreateTaskResult has no result, error, inputRequests or requestState")
_r("durability:get-immediately", "MUST", (88,), spec.URL_TASKS_CREATE, "tasks/get right after creation (any connection) finds the task")
_r("create:ids-distinct", "MUST", (89,), spec.URL_TASKS_SECURITY, "many creations give distinct, unpredictable taskIds")
_r("create:id-header-safe", "REC", (90,), spec.URL_ENCODING, "taskIds are printable ASCII without surrounding spaces")
_r("mrtr:input-before-task", "SHOULD", (91,), spec.URL_MRTR, "MRTR round 1 is input_required with no taskId; the retry is a task without requestState")

# --- H. tasks/get ---------------------------------------------------------------------------------------------
_r("get:working-shape", "MUST", (92,), spec.URL_TASKS_GET, "a running task is complete, same taskId, working, with timestamps and ttlMs")
_r("get:working-no-payload", "MUST", (93,), spec.URL_TASKS_GET, "a working task has no result, error or inputRequests")
_r("get:never-task", "MUST", (94,), spec.URL_TASKS_GET, "no tasks/get reply has resultType task")
_r("get:unknown-id", "MUST", (95,), spec.URL_TASKS_ERRORS, "tasks/get for an unknown taskId is -32602")
_r("get:unknown-id-http-200", "REC", (96,), spec.URL_TASKS_ERRORS, "the -32602 for an unknown task is sent with HTTP 200")
_r("get:completed-result", "MUST", (97,), spec.URL_TASKS_GET, "a finished task is completed with the tool's result")
_r("get:tool-error-completed", "MUST", (98,), spec.URL_TASKS_GET, "a tool error ends completed with isError true, never failed")
_r("get:failed-error", "MUST", (99,), spec.URL_TASKS_GET, "a protocol error ends failed with an error object and no result")
_r("get:failed-status-message", "SHOULD", (100,), spec.URL_TASKS_GET, "a failed task has a statusMessage")
_r("get:input-required-shape", "MUST", (101,), spec.URL_TASKS_GET, "an input_required task lists inputRequests with method and params")
_r("get:input-snapshot-stable", "MUST", (102,), spec.URL_TASKS_GET, "two polls while input is pending list identical requests")
_r("get:terminal-stable", "MUST", (103,), spec.URL_TASKS_GET, "a terminal task polled 5 times never changes")
_r("get:readable-after-end", "S9", (104,), spec.URL_TASKS_GET, "a finished task is still readable 500 ms later")
_r("get:no-related-task-meta", "S9", (105,), spec.URL_TASKS_COMPAT, "a completed task's result has no related-task _meta")
_r("get:timestamps-ordered", "REC", (106,), spec.URL_TASKS_GET, "lastUpdatedAt >= createdAt and it changes with the status")
_r("ttl:purged-invalid-params", "MUST", (107,), spec.URL_TASKS_GET, "after its ttlMs a task is still served or gone with -32602")
_r("get:missing-task-id", "REC", (108,), spec.URL_TASKS_GET, "tasks/get without taskId is an error, never a result")

# --- I. tasks/update ----------------------------------------------------------------------------------------
_r("update:ack", "MUST", (109,), spec.URL_TASKS_UPDATE, "an accepted answer is acked with {resultType: complete}")
_r("update:ack-no-task-fields", "S9", (110,), spec.URL_TASKS_UPDATE, "the update ack has no task fields")
_r("update:key-consumed", "MUST", (111,), spec.URL_TASKS_UPDATE, "after an update the answered key never shows again")
_r("update:answer-reached-task", "MUST", (112,), spec.URL_TASKS_UPDATE, "the final result reflects the submitted answers")
_r("update:unknown-key-ignored", "SHOULD", (113,), spec.URL_TASKS_UPDATE, "an unknown key is acked and the task keeps its key")
_r("update:resend-no-effect", "SHOULD", (114,), spec.URL_TASKS_UPDATE, "resending an answered key is acked with no second effect")
_r("update:partial-answer", "MAY", (115,), spec.URL_TASKS_UPDATE, "answering one of two keys leaves only the other pending")
_r("update:keys-unique", "MUST", (116,), spec.URL_TASKS_UPDATE, "a key never names two different requests over a task's life")
_r("update:unknown-task", "SHOULD", (117,), spec.URL_TASKS_ERRORS, "tasks/update for an unknown taskId is -32602")
_r("update:not-waiting-ignored", "REC", (118,), spec.URL_TASKS_UPDATE, "an update to a working or terminal task is acked and changes nothing")
_r("update:responses-required", "MUST", (119,), spec.URL_TASKS_UPDATE, "tasks/update without inputResponses is -32602")
_r("update:empty-responses", "MUST", (120,), spec.URL_TASKS_UPDATE, "tasks/update with inputResponses {} is acked")
_r("update:decline-refused", "SEED", (121,), spec.URL_TASKS_UPDATE, "a decline or cancel answer is -32602 and the key stays open")
_r("update:no-elicitation-without-cap", "MUST", (122,), spec.URL_MRTR, "a task created without elicitation never asks for it")
_r("update:no-url-mode", "MUST", (123,), spec.URL_ELICITATION, "a form-only client is never asked a url-mode elicitation")

# --- J. tasks/cancel -------------------------------------------------------------------------------------------
_r("cancel:ack", "MUST", (124,), spec.URL_TASKS_CANCEL, "tasks/cancel on a running task is acked with {resultType: complete}")
_r("cancel:reaches-terminal", "MUST", (125,), spec.URL_TASKS_CANCEL, "after the ack the task ends terminal and never goes back")
_r("cancel:completed-idempotent", "S9", (126,), spec.URL_TASKS_CANCEL, "cancelling a completed task is acked and keeps its result")
_r("cancel:unknown-task", "SHOULD", (127,), spec.URL_TASKS_ERRORS, "tasks/cancel for an unknown taskId is -32602")
_r("cancel:stays-cancelled", "MUST", (128,), spec.URL_TASKS_CANCEL, "a cancelled task stays cancelled")
_r("cancel:notification-ignored", "MUST", (129,), spec.URL_TASKS_CANCEL, "notifications/cancelled for the creating call changes nothing")

# --- L. status notifications (subscriptions/listen) ----------------------------------------------------------------
_r("notify:ack-first", "MUST", (133,), spec.URL_TASKS_NOTIFICATIONS, "the listen stream's first message is the ack naming the subscription, listing only requested ids")
_r("notify:task-view", "MUST", (134,), spec.URL_TASKS_NOTIFICATIONS, "every notifications/tasks is the tasks/get DetailedTask without resultType, with the subscriptionId _meta")
_r("notify:nothing-unrequested", "MUST", (135,), spec.URL_TASKS_NOTIFICATIONS, "the listen stream carries no progress, log or unrequested notifications")

# --- M. error-code hygiene --------------------------------------------------------------------------------------
_r("errors:no-forbidden-codes", "MUST", (136,), spec.URL_ERRORS, "no reply uses a legacy, obsolete or undefined MCP error code")
_r("errors:capability-data", "MUST", (137,), spec.URL_ERRORS, "every -32021 has data.requiredCapabilities as an object")
_r("errors:version-data", "MUST", (138,), spec.URL_ERRORS, "every -32022 has data.supported (strings) and data.requested")
_r("errors:http-status", "MUST", (139,), spec.URL_TRANSPORT, "-32020/-32021/-32022 are HTTP 400 and -32601 is 404")

# fmt: on

REQUIREMENTS: Final[Mapping[str, Requirement]] = MappingProxyType({r.id: r for r in _ALL})

#: Checks the harness adds beyond the CHECKLIST (each has no CHECKLIST item).
EXTRA: Final = frozenset({"origin:content-type", "origin:accept", "caps:missing-capability-data"})

#: CHECKLIST items no check covers, and why.
DEFERRED: Final[Mapping[int, str]] = MappingProxyType(
    {
        130: "needs to know whether and how the server authenticates; --header sends one "
        "identity and the harness cannot tell a public server from a misconfigured one",
        131: "needs credentials for two principals with different permissions (not in the "
        "fixture contract)",
    }
)


def requirement(check_id: str) -> Requirement:
    """The requirement behind a check id.

    Raises:
        KeyError: the id is not a known check.
    """
    return REQUIREMENTS[check_id]
