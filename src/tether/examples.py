"""Example workflows served by default (`tether serve` with no APP): something real to try."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from tether.runtime.context import Context
from tether.runtime.errors import Rejected
from tether.runtime.exposure import Exposure
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.waits import Approved

app = App("examples")


class ReviewRequest(BaseModel):
    title: str = Field(description="Document title")
    body: str = Field(description="Document text to review")


class ReviewOutcome(BaseModel):
    title: str
    decision: str
    ticket: str | None = None
    rounds: int


def _summarise(title: str, body: str) -> str:
    words = len(body.split())
    return f"{title}: {words} words"


@app.workflow(expose=Exposure(tool_set=True), retention=timedelta(days=7))
async def document_review(ctx: Context, request: ReviewRequest) -> ReviewOutcome:
    """Review a document with a human approval gate (approve, reject, or push back)."""
    rounds = 0
    while True:
        rounds += 1
        summary = await ctx.step(_summarise, request.title, request.body)
        await ctx.set_details(f"round {rounds}: waiting for approval of {summary}")
        try:
            decision = await ctx.approval(
                "publish",
                prompt=f"Publish '{request.title}'? ({summary})",
                inputs=["ticket", "comment"],
                required=["ticket"],
            )
        except Rejected as exc:
            return ReviewOutcome(
                title=request.title, decision=f"rejected: {exc.reason}", rounds=rounds
            )
        if isinstance(decision, Approved):
            return ReviewOutcome(
                title=request.title,
                decision="approved",
                ticket=decision.inputs.get("ticket"),
                rounds=rounds,
            )
        await ctx.set_details(f"round {rounds}: pushed back: {decision.feedback}")


class LongJobInput(BaseModel):
    steps: int = Field(5, ge=1, le=1000, description="How many steps to run")
    pause_seconds: float = Field(1.0, ge=0, le=3600, description="Durable sleep between steps")


class LongJobResult(BaseModel):
    steps: int
    total: int


def _work(i: int) -> int:
    return i * i


@app.workflow(expose=Exposure(tool_set=True), retention=timedelta(days=1))
async def long_job(ctx: Context, job: LongJobInput) -> LongJobResult:
    """A long job that reports progress and sleeps durably between steps."""
    total = 0
    for i in range(1, job.steps + 1):
        await ctx.set_details(f"step {i}/{job.steps}")
        total += await ctx.step(_work, i, name="work")
        if i < job.steps and job.pause_seconds:
            await ctx.sleep(job.pause_seconds)
    return LongJobResult(steps=job.steps, total=total)


class FlakyInput(BaseModel):
    reason: str = "the upstream service is down"


def _call_upstream(reason: str) -> str:
    raise ConnectionError(reason)


@app.workflow(expose=Exposure(tool_set=True), retention=timedelta(days=1))
async def failing_job(ctx: Context, job: FlakyInput) -> str:
    """A job whose step always fails: retried with backoff, then the run fails."""
    return str(
        await ctx.step(
            _call_upstream,
            job.reason,
            retry=RetryPolicy(max_attempts=3, initial_interval=0.5, backoff=2.0),
        )
    )
