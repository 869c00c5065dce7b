"""The runnable examples of docs/remote-tasks.md run as written: remote_orchestration.py (two
remote Tether servers, research and finance, the orchestrator pointed at them by
TETHER_REMOTES, and the program that starts a run, answers the finance remote's question
through the orchestrator and prints the outcome), and remote_agent.py (an A2A agent)."""

from __future__ import annotations

import json

import pytest

from tests import repo_scripts
from tests.e2e.conftest import free_port, on_loopback, serve
from tests.e2e.remotes import peer
from tether.testing.databases import Databases

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

EXAMPLE = "docs/examples/remote_orchestration.py"


async def test_the_remote_orchestration_example_answers_a_remote_question_and_prints_the_outcome(
    tether_databases: Databases, db_url: str
) -> None:
    example = repo_scripts.load(EXAMPLE, "remote_orchestration")
    async with (
        peer(example.research, tether_databases) as research,
        peer(example.finance, tether_databases) as finance,
    ):
        remotes = {
            "research": {"url": research.url, "poll_min_s": 0.1},
            "finance": {"url": finance.url, "poll_min_s": 0.1},
        }
        async with serve(example.app, db_url, remotes=json.dumps(remotes)) as url:
            text = await repo_scripts.run(EXAMPLE, {"TETHER_URL": url})
        assert len(await finance.runs("approve_budget")) == 1
    lines = text.splitlines()
    assert lines[0].startswith("started ex_")
    assert lines[1:] == [
        "waiting: remote_input: Approve 4000 EUR for team offsite?",
        "outcome: team offsite: three venues fit, the lake house is cheapest; approved=True",
    ]


AGENT_EXAMPLE = "docs/examples/remote_agent.py"


async def test_the_agent_example_relays_the_agents_question_and_prints_the_greeting(
    db_url: str,
) -> None:
    """docs/examples/remote_agent.py as written: its SDK-built agent on loopback, Tether
    pointed at it by TETHER_REMOTES, and the program that answers the agent's question."""
    example = repo_scripts.load(AGENT_EXAMPLE, "remote_agent")
    port = free_port()
    agent_url = f"http://127.0.0.1:{port}/"
    remotes = {"translator": {"url": agent_url, "protocol": "a2a", "poll_min_s": 0.1}}
    async with (
        on_loopback(example.agent_app(agent_url), port=port),
        serve(example.app, db_url, remotes=json.dumps(remotes)) as url,
    ):
        text = await repo_scripts.run(AGENT_EXAMPLE, {"TETHER_URL": url})
    lines = text.splitlines()
    assert lines[0].startswith("started ex_")
    assert lines[1:] == ["waiting: remote_input: Formal or informal?", "outcome: Salut Ada !"]
