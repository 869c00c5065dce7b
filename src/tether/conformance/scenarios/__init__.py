"""One module per area; `SCENARIOS` is the run order (hygiene always runs last, over every
reply the run received)."""

from __future__ import annotations

from tether.conformance.scenario import Scenario
from tether.conformance.scenarios import (
    cancel,
    capabilities,
    creation,
    discover,
    durability,
    envelope,
    get,
    headers,
    hygiene,
    meta,
    mrtr,
    notifications,
    origin,
    ttl,
    update,
    versions,
)

SCENARIOS: tuple[Scenario, ...] = (
    envelope.SCENARIO,
    origin.SCENARIO,
    versions.SCENARIO,
    meta.SCENARIO,
    headers.SCENARIO,
    discover.SCENARIO,
    capabilities.SCENARIO,
    creation.SCENARIO,
    durability.SCENARIO,
    get.SCENARIO,
    update.SCENARIO,
    cancel.SCENARIO,
    notifications.SCENARIO,
    ttl.SCENARIO,
    mrtr.SCENARIO,
)
HYGIENE: Scenario = hygiene.SCENARIO
ALL: tuple[Scenario, ...] = (*SCENARIOS, HYGIENE)
