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
        """Wait for the next signal `name` and return its payload.

        A signal that arrives before the wait opens is kept, and the next wait for it
        takes it.

        Args:
            name: The signal's name (1-200 characters, no control characters).
            schema: A pydantic model the payload must fit (checked before it is accepted).
            prompt: What the wait asks for, shown to whoever answers it.
            timeout: Seconds or a `timedelta` from when the wait opened.

        Returns:
            The payload: a `schema` instance when `schema` is given, else the JSON value.

        Raises:
            ValueError: The name is invalid.
            WaitTimeout: `timeout` passed before the signal arrived.
            NonDeterminism: Replay found a different call recorded at this position.
        """
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
        approvers: list[str] | tuple[str, ...] | str | None = None,
        quorum: int = 1,
        allow_self_approval: bool | None = None,
    ) -> waits.Approved | waits.PushedBack:
        """Wait for a person to approve, reject or push back — or for several people to
        vote.

        The answer is `{"decision": "approve" | "reject" | "push_back", "reason": ...}` plus
        the named string `inputs`. With `approvers`, a `quorum` above 1 or
        `allow_self_approval=False`, each answer is a vote by the person who gives it
        (docs: answering waits, approvals several people decide): the gate is approved once
        `quorum` different approvers approved, and rejected or pushed back by the first
        approver who does so.

        Args:
            name: The gate's name (1-200 characters, no control characters).
            prompt: What the person is asked.
            inputs: Names of string inputs the answer may carry.
            required: Those of `inputs` an approval must fill in.
            timeout: Seconds or a `timedelta` from when the wait opened.
            approvers: Who may vote: a list of names (as the surfaces name people: a token's
                name, the name a link was made for), or a role (a string naming a role of
                `TETHER_APPROVER_ROLES`). Unset: anyone who may answer the run.
            quorum: How many different people must approve (at most the number of
                `approvers` named).
            allow_self_approval: Whether the person who started the run may approve it.
                Unset: refused when `approvers` or a `quorum` is given, else not checked.

        Returns:
            [`Approved`][tether.Approved] with the inputs (and, decided by votes, its
            `approvers`), or [`PushedBack`][tether.PushedBack] with the answer's fields as
            feedback.

        Raises:
            Rejected: The gate was rejected; uncaught, the run fails with the reason.
            ValueError: The name is invalid, an input is named `decision` or `reason`, a
                required input is not among `inputs`, `quorum` is not a whole number from 1
                or exceeds the approvers named, or an approver's or role's name is invalid.
            WaitTimeout: `timeout` passed before an answer.
            NonDeterminism: Replay found a different call recorded at this position.
        """
        spec = waits.Approval(
            name,
            prompt,
            tuple(inputs),
            tuple(required),
            approvers=approvers,
            quorum=quorum,
            allow_self_approval=allow_self_approval,
        )
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
        """Wait for a person to fill in a typed form, or push it back with feedback.

        The answer is the form's fields, with `"decision": "complete"` (the default) or
        `"push_back"`.

        Args:
            name: The task's name (1-200 characters, no control characters).
            form: The pydantic model of the form; it may not have a field named `decision`.
            prompt: What the person is asked.
            feedback: The pydantic model a push-back's fields must fit (default: any).
            timeout: Seconds or a `timedelta` from when the wait opened.

        Returns:
            [`Completed`][tether.Completed] with a `form` instance, or
            [`PushedBack`][tether.PushedBack] with the feedback's fields.

        Raises:
            ValueError: The name is invalid, or `form` has a field named `decision`; or
                an answer recorded earlier no longer fits the model (the code changed).
            WaitTimeout: `timeout` passed before an answer.
            NonDeterminism: Replay found a different call recorded at this position.
        """
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
        """Wait for the agent (the MCP client) to do a step itself and answer with its result.

        Args:
            name: The step's name (1-200 characters, no control characters).
            schema: The pydantic model the answer must fit.
            prompt: What the agent is asked to do.
            instructions: Further instructions shown with the wait, as JSON.
            timeout: Seconds or a `timedelta` from when the wait opened.

        Returns:
            The answer, as a `schema` instance.

        Raises:
            ValueError: The name is invalid; or an answer recorded earlier no longer fits
                the model (the code changed).
            WaitTimeout: `timeout` passed before an answer.
            NonDeterminism: Replay found a different call recorded at this position.
        """
        spec: waits.AgentStep[M] = waits.AgentStep(name, prompt, schema, instructions or {})
        (value,) = await self.wait_all(spec, timeout=timeout)
        return value  # type: ignore[no-any-return]  # AgentStep.parse returns the model

    async def wait_for_update(
        self, name: str, *, timeout: float | timedelta | None = None
    ) -> waits.UpdateReceived:
        """Wait for the next completed update `name` (see [`App.update`][tether.App.update]).

        Args:
            name: The update's name.
            timeout: Seconds or a `timedelta` from when the wait opened.

        Returns:
            The update's id and input, and its handler's output or error.

        Raises:
            ValueError: The name is invalid.
            WaitTimeout: `timeout` passed before an update completed.
            NonDeterminism: Replay found a different call recorded at this position.
        """
        (value,) = await self.wait_all(waits.Update(name), timeout=timeout)
        return value  # type: ignore[no-any-return]  # Update.parse returns UpdateReceived
