"""The typed waits of a run's context, each one `wait_all` of a single wait spec."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from tether.runtime import waits

M = TypeVar("M", bound=BaseModel)


class TypedWaits:
    """Mixed into `Context`, which supplies `wait_all`."""

    async def wait_all(
        self, *specs: waits.WaitSpec, timeout: float | timedelta | None = None
    ) -> list[Any]:
        raise NotImplementedError

    async def wait_for_signal(
        self,
        name: str,
        *,
        schema: type[BaseModel] | None = None,
        prompt: str | None = None,
        timeout: float | timedelta | None = None,
    ) -> Any:
        """The next signal `name` (a `schema` instance when given). Early signals are kept."""
        (value,) = await self.wait_all(waits.Signal(name, prompt, schema), timeout=timeout)
        return value

    async def approval(
        self,
        name: str,
        *,
        prompt: str | None = None,
        inputs: list[str] | tuple[str, ...] = (),
        required: list[str] | tuple[str, ...] = (),
        timeout: float | timedelta | None = None,
    ) -> waits.Approved | waits.PushedBack:
        """A gate: Approved(inputs) or PushedBack(feedback); a rejection raises Rejected."""
        spec = waits.Approval(name, prompt, tuple(inputs), tuple(required))
        (value,) = await self.wait_all(spec, timeout=timeout)
        return value  # type: ignore[no-any-return]  # Approval.parse returns exactly these

    async def human_task(
        self,
        name: str,
        *,
        form: type[M],
        prompt: str | None = None,
        feedback: type[BaseModel] | None = None,
        timeout: float | timedelta | None = None,
    ) -> waits.Completed[M] | waits.PushedBack:
        """A typed form a person fills in: Completed(values) or PushedBack(feedback)."""
        spec: waits.HumanTask[M] = waits.HumanTask(name, prompt, form, feedback)
        (value,) = await self.wait_all(spec, timeout=timeout)
        return value  # type: ignore[no-any-return]  # HumanTask.parse returns exactly these

    async def agent_step(
        self,
        name: str,
        *,
        schema: type[M],
        prompt: str | None = None,
        instructions: dict[str, Any] | None = None,
        timeout: float | timedelta | None = None,
    ) -> M:
        """A step the assistant does itself and answers; the answer must fit `schema`."""
        spec: waits.AgentStep[M] = waits.AgentStep(name, prompt, schema, instructions or {})
        (value,) = await self.wait_all(spec, timeout=timeout)
        return value  # type: ignore[no-any-return]  # AgentStep.parse returns the model

    async def wait_for_update(
        self, name: str, *, timeout: float | timedelta | None = None
    ) -> waits.UpdateReceived:
        """The next completed update `name` (its input, and the handler's output or error)."""
        (value,) = await self.wait_all(waits.Update(name), timeout=timeout)
        return value  # type: ignore[no-any-return]  # Update.parse returns UpdateReceived
