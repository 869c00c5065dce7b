"""Combinations of fields that Dagu's current public DAGs use, each as a minimal DAG of our
own put through the loader: it loads, or it is refused naming the field, never silently
ignored. (Whole DAG files, one per feature, are in test_dag_files.py.)
"""

from __future__ import annotations

import pytest

from tether.runtime.registry import App
from tether.specs.dag import DagSpecError, load_string

STEP = "steps:\n  - name: a\n    command: echo a\n"

#: (the combination, our snippet, the field a refusal names; None: it loads)
COMBINATIONS: list[tuple[str, str, str | None]] = [
    # Dagu v2 writes shell text under `run:` (Tether's `run: <name>` names a Python action)
    ("run shell text",
     'steps:\n  - name: a\n    run: echo "hi"\n', None),
    ("ids, depends lists, type graph",
     "type: graph\nsteps:\n  - id: a\n    command: echo a\n  - id: b\n    command: echo b\n"
     "    depends: [a]\n", None),
    ("type build", "type: build\n" + STEP, "type"),
    ("defaults (retry for every step)",
     "defaults:\n  retry_policy: {limit: 2}\n" + STEP, "defaults"),
    ("step retry_policy", STEP + "    retry_policy:\n      limit: 2\n"
     "      interval_sec: 5\n", None),
    ("custom actions", "actions:\n  greet: {}\n" + STEP, "actions"),
    ("harness", "harness: {provider: x}\n" + STEP, "harness"),
    ("harnesses", "harnesses: {x: {}}\n" + STEP, "harnesses"),
    ("output-only steps", "steps:\n  - id: a\n    output:\n      v: '1'\n",
     "output"),
    ("template.render action",
     "steps:\n  - id: a\n    action: template.render\n    with: {template: x}\n", "action"),
    ("http.request action",
     "steps:\n  - id: a\n    action: http.request\n    with: {url: 'http://x'}\n", "action"),
    ("typed params",
     "params:\n  - name: ENV\n    type: string\n    default: DEV\n" + STEP, None),
    ("env list", "env:\n  - LOG_LEVEL: info\n" + STEP, None),
    ("schedule", "schedule: '0 * * * *'\n" + STEP, None),
    ("preconditions", STEP + "    preconditions:\n"
     "      - condition: '$ENV'\n        expected: DEV\n", None),
    ("lifecycle hooks", "handler_on:\n  success:\n    command: echo ok\n" + STEP,
     None),
    ("sub-DAG call", "steps:\n  - name: a\n    call: child\n    params: X=1\n",
     None),
    ("docker container", STEP + "    container: {image: alpine}\n", "container"),
    ("history retention", "hist_retention_days: 7\n" + STEP,
     "hist_retention_days"),
    ("ssh", "ssh: {host: x}\n" + STEP, "ssh"),
    ("tools", "tools: [jq]\n" + STEP, "tools"),
    ("working_dir", "working_dir: .\n" + STEP, None),
    ("DAG-level shell", "shell: bash\n" + STEP, None),
    ("null and numeric depends, trimmed ids and names",
     "type: graph\nsteps:\n  - name: '42'\n    command: x\n  - id: ' b '\n    name: ' B '\n"
     "    command: y\n    depends: [42]\n  - id: c\n    depends: null\n    command: z\n"
     "  - id: d\n    depends: [B, b]\n    command: w\n", None),
    ("v2 sub-DAG run",
     "steps:\n  - name: a\n    action: dag.run\n    with: {dag: child, params: X=1}\n", None),
    ("dag.enqueue action",
     "steps:\n  - name: a\n    action: dag.enqueue\n    with: {dag: child}\n", "action"),
    ("approval gate", STEP + "    approval:\n      prompt: ok?\n      input: [X]\n",
     None),
]  # fmt: skip


@pytest.mark.parametrize(("what", "text", "field"), COMBINATIONS, ids=[c[0] for c in COMBINATIONS])
def test_each_combination_loads_or_is_refused_naming_its_field(
    what: str, text: str, field: str | None
) -> None:
    if field is None:
        assert load_string(text, default_name="x").steps
        return
    with pytest.raises(DagSpecError) as info:
        load_string(text, default_name="x")
    assert info.value.field == field, (what, str(info.value))
    assert field in str(info.value)


def test_a_one_word_run_that_names_no_action_is_refused_for_an_inline_spec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`run: date` is Dagu's shell command `date`, or names an action. An inline spec (the
    app is set up by then) naming no registered action is refused naming `run`, unless the
    operator allows inline shell; one that names a registered action loads."""
    monkeypatch.delenv("TETHER_INLINE_SHELL", raising=False)
    app = App()

    @app.action("twice")
    def twice(n: int) -> int:
        return 2 * n

    with pytest.raises(DagSpecError) as info:
        app.inline_dag("steps:\n  - name: a\n    run: date\n", default_name="x")
    assert info.value.field == "run" and "TETHER_INLINE_SHELL" in str(info.value)
    assert "x" not in app.dags
    assert app.inline_dag("steps:\n  - name: a\n    run: twice\n", default_name="y").steps
    with pytest.raises(DagSpecError) as info:  # arguments: an action, whatever the setting
        app.inline_dag("steps:\n  - name: a\n    run: nope\n    with: {n: 1}\n", default_name="z")
    assert info.value.field == "run" and "no registered action" in str(info.value)
    monkeypatch.setenv("TETHER_INLINE_SHELL", "1")
    assert app.inline_dag("steps:\n  - name: a\n    run: date\n", default_name="x").steps
