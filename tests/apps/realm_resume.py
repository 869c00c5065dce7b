"""A protocol app for `tether runs resume RUN --from STEP` (tests/e2e/test_realm_resume.py):
agent step `assess`, auto step `pay` (fails while `FAILING` holds True), agent `confirm`."""

from __future__ import annotations

from typing import Any

from tether.runtime.registry import App

PROTOCOL = """
id: payout_resume
name: Payout (resume)
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

FAILING = [True]
PAID: list[int] = []

app = App("realm-resume")
app.protocol(PROTOCOL)
# The same handler without the protocol: the protocol comes from a directory
# (`--protocols DIR` / TETHER_PROTOCOLS), as `tether serve` loads it.
handlers_only = App("realm-resume-handlers")


@handlers_only.handler()
@app.handler()
def pay(inputs: dict[str, Any]) -> dict[str, Any]:
    if FAILING[0]:
        raise RuntimeError("the bank is closed")
    amount: int = inputs["steps"]["assess"]["amount"]
    PAID.append(amount)
    return {"paid": amount}
