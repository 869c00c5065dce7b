"""Over MCP, a DAG's prompts read no server secret (our choice): an inline spec sent through
`dagu_execute` reads no variable of the server's, a stored DAG only those passed through
(`TETHER_DAG_ENV_PASSTHROUGH`), and neither a TETHER_* one."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import execute, ok, read
from tests.mcp_client import McpClient
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
Client = Callable[[str], McpClient]

READS = "${TETHER_TEST_SECRET}|${CLOUD_TOKEN}|${DAG_OK}"
INLINE = f"""
steps:
  - id: asked
    action: human.task
    with:
      prompt: "{READS}"
"""
STORED = f"""
name: stored
steps:
  - name: gated
    command: "true"
    approval: {{prompt: "{READS}"}}
"""


async def test_a_dags_prompt_reads_only_what_the_operator_passed_through(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inline spec whose human task prompt names the server's secrets gets the prompt back
    as written; a stored DAG reads DAG_OK (passed through), and neither secret."""
    monkeypatch.setenv("TETHER_TEST_SECRET", "tether-secret-value")
    monkeypatch.setenv("CLOUD_TOKEN", "cloud-secret-value")
    monkeypatch.setenv("DAG_OK", "passed-through")
    app = App()
    app.dag(STORED)
    async with mcp_server(app, dag_env_passthrough="PATH,HOME,DAG_OK") as url:
        c = client(url)
        inline = ok(
            await execute(
                c, action="start", targetType="inline_spec", name="adhoc", spec=INLINE,
                dagRunId="i-1", wait=True,
            )
        )  # fmt: skip
        stored = ok(await execute(c, action="start", name="stored", dagRunId="s-1", wait=True))
        read_back = [
            await read(c, "dagu://runs/adhoc/i-1"),
            await read(c, "dagu://runs/stored/s-1"),
        ]
    assert inline["statusLabel"] == "waiting", inline
    (task,) = inline["run"]["steps"]
    assert task["humanTask"]["prompt"] == READS
    (gate,) = stored["run"]["steps"]
    assert gate["approval"] == {"prompt": "${TETHER_TEST_SECRET}|${CLOUD_TOKEN}|passed-through"}
    shown = json.dumps([inline, stored, read_back])
    assert "secret-value" not in shown
