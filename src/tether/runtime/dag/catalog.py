"""The App's DAG side (mixed into `App`): `app.dag(...)`, `app.load_dags(dir)`,
`app.inline_dag(text)`. A DAG's Python steps (`run: NAME`) call the App's user functions
(runtime/functions.py). Each DAG is registered as an ordinary workflow named after the DAG
whose input is `DagInput`, so every DAG run is an ordinary execution. Whoever serves the DAGs
(the MCP tool catalog) follows registrations, replacements and removals with `watch_dags`."""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tether.runtime.context import Context
from tether.runtime.dag.environment import (
    DEFAULT_PASSTHROUGH,
    INLINE_ORIGIN,
    RunEnvironment,
    passthrough,
    run_environment,
)
from tether.runtime.dag.interpreter import DagHost, DagInput, run_dag
from tether.runtime.dag.replay import remember_snapshot
from tether.runtime.dag.work import as_command, unknown_action
from tether.runtime.exposure import Exposure
from tether.runtime.functions import FunctionNotRegistered, Functions
from tether.runtime.ids import new_execution_id
from tether.specs.dag import Action, DagSpec, DagSpecError, Shell, load_string, shell_steps
from tether.specs.errors import INLINE
from tether.specs.yaml_nodes import yaml_files
from tether.storage import repo

logger = logging.getLogger(__name__)

INLINE_SHELL_ENV = "TETHER_INLINE_SHELL"
INLINE_KEPT = 256  # inline spec texts kept for runs not yet started (oldest dropped first)


def inline_key(text: str) -> str:
    """The content key of an inline spec text (what its runs carry in `DagInput.inline`)."""
    return hashlib.sha256(text.encode()).hexdigest()


class InlineShellRefused(DagSpecError):
    """An inline DAG spec may not run shell steps unless the operator set TETHER_INLINE_SHELL."""


@dataclass(frozen=True)
class DagEntry:
    """A registered DAG: its parsed spec and the text it came from (recorded by each run)."""

    spec: DagSpec
    text: str
    file: str
    mtime: float | None = None
    inline: bool = False  # arrived over MCP (inline_dag): runs, but is not served as tools


class DagCatalog:
    """Mixed into `App`; keeps DAGs beside the workflows they become."""

    _workflows: dict[str, Any]
    _functions: Functions  # the App's, set before this __init__ runs
    # The App's remotes (runtime/remote/config.py): a DAG's `mcp.call` steps name one each.
    check_dag_remotes: Callable[..., None]

    def __init__(self) -> None:
        self._dags: dict[str, DagEntry] = {}
        self._inline: dict[tuple[str, str], str] = {}  # (DAG name, inline_key) → text
        self._dag_watchers: list[Callable[[], object]] = []
        self._passthrough = frozenset(DEFAULT_PASSTHROUGH)
        self._host = DagHost(self._functions, self._snapshot, self._new_child, self._environment)

    @property
    def dags(self) -> Mapping[str, DagEntry]:
        return MappingProxyType(self._dags)

    @property
    def dag_env_passthrough(self) -> frozenset[str]:
        """The process variables a stored DAG sees (`pass_dag_environment`)."""
        return self._passthrough

    def pass_dag_environment(self, names: Iterable[str]) -> None:
        """Let stored DAGs see the process variables `names` (in place of the default
        `DEFAULT_PASSTHROUGH`): as their lowest `${NAME}` source and in their steps'
        environment. Inline specs see none of them (`environment`). Read at each run's
        start, so a run sees the variables' values of then.

        Raises:
            ValueError: a name that is not a variable name, or a `TETHER_*` one.
        """
        self._passthrough = passthrough(names)

    def watch_dags(self, changed: Callable[[], object]) -> Callable[[], None]:
        """Call `changed()` after every DAG registration, replacement or removal (a reload);
        returns the function that stops it."""
        self._dag_watchers.append(changed)
        return lambda: self._dag_watchers.remove(changed)

    def dag(self, source: str | Path, *, mcp: bool | None = None) -> DagSpec:
        """Register (or replace) a DAG, in Dagu's YAML format, as a workflow of its name.

        A DAG registered again under the same name replaces the earlier one; runs already
        started keep the spec they recorded.

        Args:
            source: A `Path` to a YAML file (a DAG without a `name` is named after the
                file), or the YAML text itself.
            mcp: Publish its MCP tool set, as `App.workflow(expose=Exposure(tool_set=True))`
                does (default: the spec's own `mcp` field, which this overrides).

        Returns:
            The parsed spec (its `name` is the workflow's name).

        Raises:
            DagSpecError: The spec is invalid; the error names the field and line.
            OSError: The file cannot be read.
            ValueError: The name is taken by a workflow that is not a DAG, or is not a valid
                workflow name.
        """
        if isinstance(source, Path):
            text = source.read_text(encoding="utf-8")
            spec = load_string(text, file=str(source), default_name=source.stem)
            entry = DagEntry(spec, text, str(source), source.stat().st_mtime)
        else:
            spec = load_string(source)
            entry = DagEntry(spec, source, spec.file)
        self._register(entry, mcp=spec.mcp if mcp is None else mcp)
        return spec

    def inline_dag(
        self, text: str, *, default_name: str | None = None, spec: DagSpec | None = None
    ) -> DagSpec:
        """Register a DAG spec that arrived inline (over MCP): it may not run `command` /
        `script` steps unless TETHER_INLINE_SHELL is set; the refusal names the steps.
        `default_name`: the DAG's name when the spec sets none. `spec`: `text` already
        loaded (inline, with `default_name`), by a caller that did it off the event loop; its
        runs then find it parsed too."""
        if spec is None:
            spec = load_string(text, default_name=default_name)
        else:
            remember_snapshot(spec, text)
        if spec.runs_shell and not inline_shell_allowed():
            raise _shell_refusal(spec, text)
        _check_functions(spec, self._functions)
        self._register(DagEntry(spec, text, spec.file, inline=True), mcp=spec.mcp)
        key = (spec.name, inline_key(text))
        self._inline.pop(key, None)
        self._inline[key] = text
        while len(self._inline) > INLINE_KEPT:
            del self._inline[next(iter(self._inline))]
        return spec

    def load_dags(self, directory: str | Path) -> dict[str, str]:
        """Register every `*.yaml` and `*.yml` file in `directory` as a DAG.

        A file that is refused is reported in the result and the others are still
        registered, so one bad file does not keep the rest from loading.

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
                self.dag(path)
            except (DagSpecError, OSError, ValueError) as exc:
                problems[str(path)] = str(exc)
        return problems

    def remove_dag(self, name: str) -> None:
        """Forget a DAG (its file was deleted); runs already started keep their recorded spec."""
        if self._dags.pop(name, None) is not None:
            self._workflows.pop(name, None)
            self._dags_changed()

    # --- internals -------------------------------------------------------------------------------

    def _register(self, entry: DagEntry, *, mcp: bool) -> None:
        name = entry.spec.name
        self.check_dag_remotes(entry.spec, inline=entry.inline)
        if name in self._workflows and name not in self._dags:
            raise ValueError(f"DAG {name!r}: a workflow of that name is already registered")
        register = getattr(self, "workflow")  # noqa: B009 — App's decorator
        previous = self._workflows.pop(name, None)
        try:
            register(
                name=name,
                expose=Exposure(tool_set=mcp),
                description=entry.spec.description,
                **_admission(entry),
            )(_workflow_fn(self._host, name))
        except (ValueError, TypeError):
            if previous is not None:
                self._workflows[name] = previous
            raise
        self._dags[name] = entry
        self._dags_changed()

    def _dags_changed(self) -> None:
        for changed in list(self._dag_watchers):
            try:
                changed()
            except Exception:  # a watcher's fault must not undo or stop a reload
                logger.exception("a DAG watcher failed")

    def _snapshot(self, name: str, inline: str | None = None) -> dict[str, str]:
        if inline is None:
            entry = self._dags[name]
            snap = {"name": entry.spec.name, "file": entry.file, "text": entry.text}
            return {**snap, "origin": INLINE_ORIGIN} if entry.inline else snap
        text = self._inline.get((name, inline))
        if text is None:
            raise LookupError(
                f"inline spec {inline[:12]} of DAG {name!r} is not known to this process "
                "(registered by another server, or dropped): start it again"
            )
        return {"name": name, "file": INLINE, "text": text, "origin": INLINE_ORIGIN}

    def _environment(self, inline: bool) -> RunEnvironment:
        return run_environment(self._passthrough, inline=inline)

    def _new_child(self, dag: str, child_input: Any, parent: str) -> repo.NewExecution:
        if dag not in self._dags:
            raise LookupError(f"no DAG named {dag!r}")
        wf = self._workflows[dag]
        value = wf.dump_input(wf.parse_input(child_input))
        new_id = new_execution_id()
        return repo.NewExecution(
            id=new_id,
            workflow=dag,
            business_id=new_id,
            input=value,
            retention_s=wf.retention_s,
            deadline_at=wf.deadline(),
            created_data={"parent": parent},
        )


def _admission(entry: DagEntry) -> dict[str, Any]:
    """The DAG's admission fields as workflow options (docs/admission.md): `queue` wins over
    `maxActiveRuns` (as in Dagu, a global queue's limit applies, not the DAG's)."""
    spec = entry.spec
    return {
        "queue": spec.queue,
        "max_active_runs": spec.max_active_runs if spec.queue is None else None,
        "labels": [str(label) for label in spec.labels] or None,
        "schedule": [s.cron for s in spec.schedules] or None,
    }


def _shell_refusal(spec: DagSpec, text: str) -> InlineShellRefused:
    """The refusal of an inline spec that would run shell text: its steps that do, else the
    DAG-level field (`params`, `env`, `preconditions`) whose commands would run (backticks,
    an `eval`'s `$(…)`, a command precondition)."""
    needs = f"which an inline spec may not do unless the operator sets {INLINE_SHELL_ENV}"
    if shell := shell_steps(spec):
        first = next(s for s in (*spec.steps, *spec.handlers.values()) if s.name == shell[0])
        return InlineShellRefused(
            f"steps {list(shell)} run shell commands (command/script or a command "
            f"precondition), {needs}",
            field="command" if isinstance(first.work, Shell) else "preconditions",
            path=f"steps[{shell[0]}]",
            file=spec.file,
            line=first.line,
        )
    key = spec.command_fields[0]
    found = re.search(rf"(?m)^{key}\s*:", text)
    return InlineShellRefused(
        f"`{key}` holds commands to run, {needs}",
        field=key,
        path=key,
        file=spec.file,
        line=text.count("\n", 0, found.start()) + 1 if found else 1,
    )


def _check_functions(spec: DagSpec, functions: Functions) -> None:
    """An inline spec arrives once the app is set up: a `run:` naming no registered function
    is Dagu's one-word shell command, which needs TETHER_INLINE_SHELL, else it is refused by
    name now (a stored DAG's function may be registered later; until then it runs as the
    command)."""
    if all(name in functions for name in spec.function_names):
        return  # the usual case, told without walking every step
    for step in (*spec.steps, *spec.handlers.values()):
        if not isinstance(step.work, Action):
            continue
        try:
            functions.lookup(step.work.name)
        except FunctionNotRegistered as exc:
            command = as_command(step.work)
            if command is not None and inline_shell_allowed():
                continue
            raise DagSpecError(
                unknown_action(step.work.name, exc)
                if command is None
                else f"`run: {step.work.name}` names no registered action ({exc}), and as "
                f"Dagu's shell command it needs {INLINE_SHELL_ENV}",
                field="run",
                path=f"steps[{step.name}]",
                file=spec.file,
                line=step.line,
            ) from None


def inline_shell_allowed() -> bool:
    """TETHER_INLINE_SHELL as the settings read it (true/1/yes/on); unset or false: refused."""
    return os.environ.get(INLINE_SHELL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _workflow_fn(host: DagHost, name: str) -> Callable[..., Any]:
    async def dag_workflow(ctx: Context, inp: DagInput) -> dict[str, Any]:
        return await run_dag(ctx, host, name, inp)

    dag_workflow.__qualname__ = f"dag:{name}"
    # Named by the DAG's name, which its loader checked (Dagu's rule: `etl.daily`, `9lives`).
    dag_workflow.dag_name = name  # type: ignore[attr-defined]
    assert inspect.iscoroutinefunction(dag_workflow)  # noqa: S101
    return dag_workflow
