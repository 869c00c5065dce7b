"""Remotes by name: their validation, the settings' JSON, and the checks when the app starts
serving (a workflow or DAG that calls a remote nobody configured is refused, naming it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote.call import idempotency_key
from tether.runtime.remote.config import (
    Remote,
    RemoteConfigError,
    called_remotes,
    parse_remotes,
    read_remotes,
)
from tether.runtime.remote.errors import (
    RemoteCancelled,
    RemoteError,
    RemoteProtocolError,
    RemoteRejected,
    RemoteTaskLost,
    RemoteTimeout,
    RemoteToolError,
    RemoteUnavailable,
    UnknownRemote,
    as_record,
    from_record,
)
from tether.runtime.remote.implementations import INSTALL_A2A, PROTOCOLS
from tether.settings import Settings, SettingsError
from tether.specs.dag import DagSpecError, RemoteCall

URL = "http://127.0.0.1:9/mcp"
BEARER_ENV = "BILLING_TOKEN"  # the name of the variable holding a token


class Job(BaseModel):
    n: int


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "9lives"},
        {"name": "has space"},
        {"url": "ftp://host/mcp"},
        {"url": "127.0.0.1/mcp"},
        {"headers": {"Mcp-Method": "x"}},  # the client's own header
        {"headers": {"bad header": "x"}},
        {"headers": {"X-Team": "a\r\nInjected: 1"}},
        {"token_env": "NOT-A-NAME"},
        {"poll_min_s": 0.0},
        {"poll_min_s": 5.0, "poll_max_s": 1.0},
        {"request_timeout_s": float("nan")},
        {"protocol": "grpc"},
    ],
)
def test_an_invalid_remote_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(RemoteConfigError):
        Remote(**{"name": "billing", "url": URL, **kwargs})


def test_a_remotes_repr_names_its_headers_never_their_values() -> None:
    """Our choice: headers may hold credentials, so no repr or log shows their values."""
    remote = Remote("billing", URL, headers={"X-Api-Key": "s3cret"}, token_env=BEARER_ENV)
    assert "s3cret" not in repr(remote)
    assert "X-Api-Key" in repr(remote)


def test_the_poll_delay_honours_the_remotes_interval_inside_the_bounds() -> None:
    """Our choice: pollIntervalMs inside [poll_min_s, poll_max_s]; 5 s when it says nothing."""
    remote = Remote("r", URL, poll_min_s=1.0, poll_max_s=60.0)
    assert remote.poll_delay(2500) == 2.5
    assert remote.poll_delay(10) == 1.0
    assert remote.poll_delay(3_600_000) == 60.0
    assert remote.poll_delay(None, polls=10) == 5.0


def test_a_remote_that_names_no_interval_is_polled_soon_then_less_often() -> None:
    """Our choice: poll_min_s after the first look, doubling per look up to 5 s."""
    remote = Remote("r", URL, poll_min_s=0.5, poll_max_s=60.0)
    assert [remote.poll_delay(None, n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert remote.poll_delay(None, 10_000) == 5.0
    assert Remote("r", URL, poll_min_s=1.0, poll_max_s=2.0).poll_delay(None, 5) == 2.0


def test_the_settings_json_names_each_remote() -> None:
    remotes = parse_remotes(
        json.dumps(
            {
                "billing": {"url": URL, "token_env": "BILLING_TOKEN", "poll_max_s": 10},
                "search": {"url": URL, "protocol": "mcp", "headers": {"X-Team": "a"}},
                "quiet": {"url": URL, "listen": False},
            }
        )
    )
    assert [(r.name, r.protocol, r.token_env, r.poll_max_s, r.listen) for r in remotes] == [
        ("billing", "mcp-tasks", "BILLING_TOKEN", 10.0, True),
        ("search", "mcp", None, 60.0, True),
        ("quiet", "mcp-tasks", None, 60.0, False),
    ]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("not json", "not JSON"),
        ("[1]", "JSON object"),
        ('{"billing": {"url": 3}}', "remote 'billing': url"),
        ('{"billing": {"url": "http://h/mcp", "token": "s3cret"}}', "remote 'billing': token"),
    ],
)
def test_a_bad_remotes_setting_names_the_remote_and_field_never_a_value(
    text: str, named: str
) -> None:
    with pytest.raises(RemoteConfigError) as caught:
        parse_remotes(text)
    assert named in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_tether_remotes_reads_json_or_a_file_and_is_masked(tmp_path: Path) -> None:
    """TETHER_REMOTES takes the JSON or a file holding it; its value is a secret (headers)."""
    text = json.dumps({"billing": {"url": URL, "headers": {"X-Api-Key": "s3cret"}}})
    path = tmp_path / "remotes.json"
    path.write_text(text, encoding="utf-8")
    for value in (text, str(path)):
        settings = Settings.from_env({"TETHER_REMOTES": value})
        assert [r.name for r in settings.remote_configs()] == ["billing"]
        assert "s3cret" not in repr(settings)
    assert read_remotes("") == ()
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"TETHER_REMOTES": '{"billing": {"url": "ftp://x"}}'})
    assert "TETHER_REMOTES" in str(caught.value)


def test_app_remote_refuses_a_name_twice() -> None:
    app = App()
    app.remote("billing", url=URL)
    with pytest.raises(RemoteConfigError):
        app.remote("billing", url=URL)


async def _calls_billing(ctx: Context, job: Job) -> Any:
    helper = ctx
    await helper.call_tool("not_checked_here", "x")  # not the workflow's ctx parameter
    return await ctx.call_tool("billing", "charge", {"n": job.n})


async def _calls_by_keyword(ctx: Context) -> Any:
    return await ctx.call_tool(remote="search", tool="find")


async def _asks_research(ctx: Context) -> Any:
    return await ctx.ask_agent("research", "Summarize the offsite options")


def test_the_literal_remote_names_a_workflow_calls_are_found_in_its_source() -> None:
    assert called_remotes(_calls_billing) == {"billing"}
    assert called_remotes(_calls_by_keyword) == {"search"}
    assert called_remotes(_asks_research) == {"research"}


@pytest.mark.parametrize(
    ("workflow", "remote", "protocol", "said"),
    [
        (_asks_research, "research", "mcp-tasks", "is an MCP server (mcp-tasks), not an A2A agent"),
        (_calls_by_keyword, "search", "a2a", "is an A2A agent, not an MCP server"),
    ],
)
def test_a_workflow_calling_a_remote_of_the_wrong_kind_is_refused_when_the_app_starts(
    workflow: Any, remote: str, protocol: Any, said: str
) -> None:
    """`ask_agent` needs an A2A agent, `call_tool` an MCP server: refused before anything
    runs, naming the workflow."""
    app = App()
    app.workflow(name="plan")(workflow)
    app.remote(remote, url=URL, protocol=protocol)
    with pytest.raises(RemoteConfigError) as caught:
        app.bind_remotes((), implemented=PROTOCOLS)
    assert str(caught.value) == f"workflow 'plan': remote {remote!r} {said}"


def test_starting_an_app_whose_workflow_calls_an_unknown_remote_is_refused() -> None:
    """Unknown remote names are refused when the app starts serving, naming the workflow."""
    app = App()
    app.workflow(name="charge")(_calls_billing)
    with pytest.raises(RemoteConfigError) as caught:
        app.bind_remotes((), implemented=PROTOCOLS)
    assert "workflow 'charge' calls remote 'billing'" in str(caught.value)
    app.bind_remotes([Remote("billing", URL)], implemented=PROTOCOLS)  # the settings name it
    assert set(app.remotes) == {"billing"}


def test_a_setting_replaces_the_apps_remote_of_that_name() -> None:
    app = App()
    app.remote("billing", url=URL)
    app.bind_remotes([Remote("billing", "https://billing.example/mcp")], implemented=PROTOCOLS)
    assert app.remotes["billing"].url == "https://billing.example/mcp"


def test_an_a2a_remote_without_the_a2a_extra_is_refused_saying_how_to_get_it() -> None:
    """Without the A2A SDK installed, `a2a` is among the missing protocols: a remote that
    names it stops the server at start, naming the extra to install."""
    app = App()
    app.remote("agent", url=URL, protocol="a2a")
    speaks = [p for p in PROTOCOLS if p != "a2a"]
    with pytest.raises(RemoteConfigError) as caught:
        app.bind_remotes((), implemented=speaks, missing={"a2a": INSTALL_A2A})
    assert str(caught.value) == (f"remote 'agent': protocol 'a2a' is not available: {INSTALL_A2A}")
    assert "pip install 'tether[a2a]'" in INSTALL_A2A


def test_a_remote_of_a_protocol_not_implemented_is_refused_when_the_app_starts() -> None:
    app = App()
    app.remote("agent", url=URL, protocol="a2a")
    with pytest.raises(RemoteConfigError) as caught:
        app.bind_remotes((), implemented=["mcp"])
    assert "'a2a' is not implemented" in str(caught.value)


def test_the_a2a_extra_is_installed_where_the_tests_run() -> None:
    """The dev extra holds the A2A SDK: A2A is one of the protocols spoken here."""
    assert "a2a" in PROTOCOLS


DAG = """\
name: pay
steps:
  - name: one
    command: "true"
  - name: charge
    action: mcp.call
    with:
      tool: charge
      remote: billing
"""


def test_a_dag_step_naming_an_unknown_remote_is_refused_naming_the_field_and_line() -> None:
    """Checked when the app starts (a DAG registered before), then as each DAG loads."""
    app = App()
    app.dag(DAG)
    with pytest.raises(DagSpecError) as caught:
        app.bind_remotes((), implemented=PROTOCOLS)
    assert (caught.value.field, caught.value.line) == ("remote", 9)  # `remote:`'s line
    assert caught.value.path == "steps[charge].with"
    later = App()
    later.bind_remotes((), implemented=PROTOCOLS)
    with pytest.raises(DagSpecError):
        later.dag(DAG)
    later.remote("billing", url=URL)
    later.dag(DAG)  # configured now


AGENT_DAG = """\
name: brief
steps:
  - name: ask
    action: a2a.ask
    with:
      remote: research
      message: "Summarize ${TOPIC}"
      data: {depth: 2}
    output: SUMMARY
"""


def test_an_a2a_ask_step_needs_an_agent() -> None:
    """`a2a.ask` names an A2A agent: an MCP server of that name is refused, naming the field."""
    app = App()
    app.remote("research", url=URL)
    app.dag(AGENT_DAG)
    with pytest.raises(DagSpecError) as caught:
        app.bind_remotes((), implemented=PROTOCOLS)
    assert (caught.value.field, caught.value.line) == ("remote", 6)
    assert "not an A2A agent" in str(caught.value)
    agent = App()
    agent.remote("research", url=URL, protocol="a2a")
    agent.dag(AGENT_DAG)
    agent.bind_remotes((), implemented=PROTOCOLS)
    (step,) = agent.dags["brief"].spec.steps
    assert isinstance(step.work, RemoteCall)
    assert (step.work.action, step.work.message) == ("a2a.ask", "Summarize ${TOPIC}")
    assert dict(step.work.arguments) == {"depth": 2}


def test_an_inline_dag_may_not_call_remotes() -> None:
    """Our choice: a spec arriving over MCP would call a remote with this server's
    credentials."""
    app = App()
    app.remote("billing", url=URL)
    app.bind_remotes((), implemented=PROTOCOLS)
    with pytest.raises(DagSpecError) as caught:
        app.inline_dag(DAG.replace('  - name: one\n    command: "true"\n', ""))
    assert caught.value.field == "action"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("steps:\n  - {name: a, action: mcp.call}\n", "action"),
        ("steps:\n  - {name: a, action: mcp.call, with: {tool: t}}\n", "with"),
        ("steps:\n  - {name: a, action: mcp.call, with: {remote: r}}\n", "with"),
        ("steps:\n  - {name: a, action: mcp.call, with: {remote: r, tool: t, args: {}}}\n", "args"),
        (
            "steps:\n  - {name: a, action: mcp.call, with: {remote: r, tool: t, arguments: [1]}}\n",
            "arguments",
        ),
        (
            "steps:\n  - name: a\n    action: mcp.call\n    with: {remote: r, tool: t}\n"
            "    preconditions: [{condition: x, expected: x}]\n",
            "preconditions",
        ),
    ],
)
def test_a_malformed_mcp_call_step_is_refused_by_name(spec: str, field: str) -> None:
    with pytest.raises(DagSpecError) as caught:
        App().dag("name: d\n" + spec)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("steps:\n  - {name: a, action: a2a.ask}\n", "action"),
        ("steps:\n  - {name: a, action: a2a.ask, with: {message: m}}\n", "with"),
        ("steps:\n  - {name: a, action: a2a.ask, with: {remote: r}}\n", "with"),
        ("steps:\n  - {name: a, action: a2a.ask, with: {remote: r, message: ' '}}\n", "message"),
        (
            "steps:\n  - {name: a, action: a2a.ask, with: {remote: r, message: m, tool: t}}\n",
            "tool",
        ),
        (
            "steps:\n  - {name: a, action: a2a.ask, with: {remote: r, message: m, data: [1]}}\n",
            "data",
        ),
    ],
)
def test_a_malformed_a2a_ask_step_is_refused_by_name(spec: str, field: str) -> None:
    with pytest.raises(DagSpecError) as caught:
        App().dag("name: d\n" + spec)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "error",
    [
        RemoteError("plain", remote="r", tool="t"),
        RemoteToolError("tool", remote="r", tool="t", result={"isError": True}),
        RemoteProtocolError("rpc", remote="r", tool="t", code=-32602, data={"x": 1}),
        RemoteRejected("no", remote="r", tool="t", data={"message": {"parts": []}}),
        RemoteTaskLost("lost", remote="r", tool="t"),
        RemoteCancelled("cancelled", remote="r", tool="t"),
        RemoteTimeout("late", remote="r", tool="t"),
        RemoteUnavailable("down", remote="r", tool="t"),
        UnknownRemote("who", remote="r", tool="t"),
    ],
)
def test_a_recorded_error_is_raised_again_the_same(error: RemoteError) -> None:
    """Replay raises what the first run raised: same class, message and fields."""
    again = from_record(json.loads(json.dumps(as_record(error))))
    assert type(again) is type(error)
    assert (str(again), again.remote, again.tool) == (str(error), "r", "t")
    assert again.extra() == error.extra()


def test_the_idempotency_key_is_one_per_call_and_does_not_carry_the_run_id() -> None:
    """Same run, attempt and position: same key; anything else: another key."""
    run = "ex_" + "a" * 32
    key = idempotency_key(run, 1, 3)
    assert key == idempotency_key(run, 1, 3)
    assert len({key, idempotency_key(run, 2, 3), idempotency_key(run, 1, 4)}) == 3
    assert run not in key and "a" * 32 not in key


def test_retry_policy_defaults_let_a_remote_restart() -> None:
    """Our choice: 10 tries over about five minutes."""
    policy = Remote("r", URL).retry
    assert isinstance(policy, RetryPolicy)
    assert policy.max_attempts == 10
    assert 240 < sum(policy.delay(n) for n in range(1, 10)) < 360
