"""A protocol app for the kill -9 test of Realm's tools (tests/e2e/test_realm_kill.py).

`tether serve tests/apps/killable_realm.py:app` serves protocol `payout`: agent step `assess`,
then auto step `pay` (handler `pay`), then agent step `confirm`; `payout_gate` is the same
with a gate on `assess` (the chain follows the person's answer). The handler appends
`<run> pay` to `$SIDE_EFFECT_DIR/pay.log`, so the test counts how often the chain ran. With
`KILL_IN_PAY=1` the first call (no `$SIDE_EFFECT_DIR/killed` marker yet) SIGKILLs its own
server process before it writes, as a power cut would right after the answer committed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tether.runtime.registry import App

PROTOCOL = """
id: payout
name: Payout
version: 1
steps:
  assess:
    description: Assess the payout
    execution: agent
    output_schema:
      type: object
      properties: {amount: {type: integer}}
      required: [amount]
  pay:
    description: Pay it
    execution: auto
    handler: pay
    depends_on: [assess]
  confirm:
    description: Confirm the payout
    execution: agent
    depends_on: [pay]
"""

GATED = PROTOCOL.replace("id: payout", "id: payout_gate").replace(
    "    execution: agent\n    output_schema:",
    "    execution: agent\n    trust: human_confirmed\n    gate: {choices: [pay, hold]}\n"
    "    output_schema:",
    1,
)

app = App("killable-realm")
app.protocol(PROTOCOL)
app.protocol(GATED)


@app.handler()
def pay(inputs: dict[str, Any]) -> dict[str, Any]:
    here = Path(os.environ["SIDE_EFFECT_DIR"])
    marker = here / "killed"
    if os.environ.get("KILL_IN_PAY") == "1" and not marker.exists():
        marker.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)
    amount = inputs["steps"]["assess"]["amount"]
    with (here / "pay.log").open("a") as log:
        log.write(f"{amount} pay\n")
    return {"paid": amount}
