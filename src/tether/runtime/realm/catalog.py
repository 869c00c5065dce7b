"""The App's protocol side (mixed into `App`): `app.protocol(source)`, `app.load_protocols(dir)`.
Each protocol is registered as an ordinary workflow named after its id whose input is
`ProtocolInput`, so every protocol run is an ordinary execution. Its `auto` steps
(`handler: NAME`) call the App's user functions (runtime/functions.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tether.runtime.context import Context
from tether.runtime.functions import Functions
from tether.runtime.realm.interpreter import ProtocolHost, ProtocolInput, run_protocol
from tether.runtime.realm.plan import Plan, PlanError, plan_from_text
from tether.specs.yaml_nodes import yaml_files


@dataclass(frozen=True)
class ProtocolEntry:
    """A registered protocol: its plan and the text it came from (recorded by each run)."""

    plan: Plan
    text: str
    file: str | None = None


class ProtocolCatalog:
    """Mixed into `App`; keeps protocols beside the workflows they become.
    `create_workflow` (the tool) is served when `allow_create_workflow` is set."""

    _workflows: dict[str, Any]
    _functions: Functions  # the App's, set before this __init__ runs

    def __init__(self) -> None:
        self._protocols: dict[str, ProtocolEntry] = {}
        self.allow_create_workflow = False
        #: How many workflows `create_workflow` may register in this process (each stays).
        self.max_created_workflows = 1000
        self._created: set[str] = set()
        #: Protocol files `load_protocols` refused: file → why (list_workflows' `unreadable`).
        self.unreadable_protocols: dict[str, str] = {}
        self._protocol_host = ProtocolHost(self._functions, self._plan_text)

    @property
    def protocols(self) -> Mapping[str, ProtocolEntry]:
        return MappingProxyType(self._protocols)

    def protocol(self, source: str | Path) -> Plan:
        """Register (or replace) a protocol, in Realm's workflow YAML, as a workflow of its id.

        Args:
            source: A `Path` to a YAML file, or the YAML text itself.

        Returns:
            The planned protocol (its `id` is the workflow's name).

        Raises:
            PlanError: The protocol cannot be loaded or planned; the error names the step
                and field.
            OSError: The file cannot be read.
            ValueError: The id is taken by a workflow that is not a protocol.
        """
        if isinstance(source, Path):
            text = source.read_text(encoding="utf-8")
            entry = ProtocolEntry(plan_from_text(text), text, str(source))
        else:
            entry = ProtocolEntry(plan_from_text(source), source)
        self._register_protocol(entry)
        return entry.plan

    def create_protocol(self, text: str, *, plan: Plan | None = None) -> Plan:
        """Register a workflow `create_workflow` made (its text; `plan`: the text already
        planned, off the event loop). Raises PlanError, ValueError (the id is taken by
        another workflow, or the limit is reached)."""
        if plan is None:
            plan = plan_from_text(text)
        if plan.id not in self._created and len(self._created) >= self.max_created_workflows:
            raise ValueError(
                f"this server holds {self.max_created_workflows} created workflows already"
            )
        self._register_protocol(ProtocolEntry(plan, text))
        self._created.add(plan.id)
        return plan

    def load_protocols(self, directory: str | Path) -> dict[str, str]:
        """Register every `*.yaml` and `*.yml` file in `directory` as a protocol.

        A file that is refused is reported in the result (and listed by `list_workflows` as
        unreadable) and the others are still registered.

        Args:
            directory: The directory to read (not its subdirectories).

        Returns:
            For each refused file, its path and why it was refused; empty when all loaded.

        Raises:
            OSError: The directory cannot be listed.
        """
        problems: dict[str, str] = {}
        for path in sorted(yaml_files(Path(directory))):
            try:
                self.protocol(path)
            except (PlanError, OSError, ValueError) as exc:
                problems[str(path)] = str(exc)
            else:
                self.unreadable_protocols.pop(str(path), None)
        self.unreadable_protocols.update(problems)
        return problems

    def _register_protocol(self, entry: ProtocolEntry) -> None:
        name = entry.plan.id
        if name in self._workflows and name not in self._protocols:
            raise ValueError(f"protocol {name!r}: a workflow of that name is already registered")
        register = getattr(self, "workflow")  # noqa: B009 — App's decorator
        previous = self._workflows.pop(name, None)
        try:
            register(name=name, description=entry.plan.description)(
                _workflow_fn(self._protocol_host, name)
            )
        except (ValueError, TypeError):
            if previous is not None:
                self._workflows[name] = previous
            raise
        self._protocols[name] = entry

    def _plan_text(self, name: str) -> dict[str, str]:
        return {"id": name, "text": self._protocols[name].text}


def _workflow_fn(host: ProtocolHost, name: str) -> Callable[..., Any]:
    async def protocol_workflow(ctx: Context, inp: ProtocolInput) -> dict[str, Any]:
        return await run_protocol(ctx, host, name, inp)

    protocol_workflow.__qualname__ = f"protocol:{name}"
    # Named by the protocol's id, which Realm leaves free ("08-pr-review", "Review the PR-…"):
    # the loader refuses only '/' and surrounding spaces, so the workflow-name rule is waived.
    protocol_workflow.realm_id = name  # type: ignore[attr-defined]
    assert inspect.iscoroutinefunction(protocol_workflow)  # noqa: S101
    return protocol_workflow
