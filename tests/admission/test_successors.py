"""What a run that continues as new hands its successor: labels, profile and tenant always; its
queue only while the workflow stays the same (a run cannot leave its queue by continuing)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tether.runtime.admission import Admission, Profile
from tether.runtime.context import Context
from tether.runtime.registry import App

from .conftest import Start

pytestmark = pytest.mark.postgres


class Leg(BaseModel):
    n: int = 0


def _app() -> App:
    app = App()

    @app.workflow(queue="reports", labels=["team=data"])
    async def looper(ctx: Context, leg: Leg) -> int:
        if leg.n == 0:
            ctx.continue_as_new(Leg(n=1))
        ctx.continue_as_new(Leg(n=2), workflow="landing")

    @app.workflow
    async def landing(ctx: Context, leg: Leg) -> int:
        return leg.n

    return app


async def test_continue_as_new_keeps_labels_and_profile_and_the_queue_only_for_its_own_workflow(
    start: Start,
) -> None:
    """looper (queue `reports`) continues once into itself, then into `landing` (no queue):
    all three runs carry the labels and the profile; the first two wait in `reports`, the
    third is admitted at once."""
    adm = Admission(queues={"reports": 1}, profiles={"prod": Profile("prod", env={"S": "p"})})
    async with start(_app(), adm, workers=1) as rt:
        first = await rt.ops.start("looper", {}, profile="prod", labels=["owner=ann"])
        view = await rt.ops.wait_until(
            first.execution.id, lambda r: r.status == "completed", timeout=10
        )
    assert [(r.workflow, r.input) for r in view.chain] == [
        ("looper", {"n": 0}),
        ("looper", {"n": 1}),
        ("landing", {"n": 2}),
    ]
    assert view.current.output == 2
    assert [r.queue for r in view.chain] == ["reports", "reports", None]
    assert all(r.labels == {"team": "data", "owner": "ann"} for r in view.chain)
    assert all((r.profile, r.profile_env) == ("prod", {"S": "p"}) for r in view.chain)
