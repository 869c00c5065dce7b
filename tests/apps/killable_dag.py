"""A DAG for the process-level kill test (tests/e2e/test_kill_dag.py).

Every step appends `<step> <pid>` to `$SIDE_EFFECT_DIR/evidence`. Step `c` SIGKILLs its own
worker (the shell's parent) when `KILL_DAG=1`, after writing its line: the step is cut off
mid-command and must run again in the next worker; steps that finished must not. The worker
passes both variables through to its DAGs (`TETHER_DAG_ENV_PASSTHROUGH`).

`gated` is for the kill at a gate (tests/e2e/test_kill_dag.py): the test holds the run's row
while `b` runs, so `b`'s result cannot commit and `c`'s shell, started while `b` ran
(`tether.runtime.dag.ahead`), waits at its gate.
"""

from __future__ import annotations

import os
from pathlib import Path

from tether.runtime.registry import App

app = App("killable-dag")


@app.action("mark")
def mark(step: str) -> str:
    path = Path(os.environ["SIDE_EFFECT_DIR"]) / "evidence"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{step} {os.getpid()}\n")
    return step


app.dag(
    """
name: killme
type: chain
steps:
  - name: a
    command: echo "a $PPID" >> "$SIDE_EFFECT_DIR/evidence"
  - name: b
    run: mark
    with: {step: b}
  - name: c
    command: >-
      echo "c $PPID" >> "$SIDE_EFFECT_DIR/evidence";
      if [ "$KILL_DAG" = 1 ]; then kill -9 $PPID; sleep 5; fi
  - name: d
    command: echo "d $PPID" >> "$SIDE_EFFECT_DIR/evidence"
"""
)

app.dag(
    """
name: gated
type: chain
steps:
  - name: a
    command: echo "a $PPID" >> "$SIDE_EFFECT_DIR/evidence"
  - name: b
    command: >-
      echo "b-start $PPID" >> "$SIDE_EFFECT_DIR/evidence"; sleep 1;
      echo "b-end $PPID" >> "$SIDE_EFFECT_DIR/evidence"
  - name: c
    command: echo "c $PPID" >> "$SIDE_EFFECT_DIR/evidence"
  - name: d
    command: echo "d $PPID" >> "$SIDE_EFFECT_DIR/evidence"
"""
)
