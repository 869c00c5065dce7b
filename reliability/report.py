"""Phase results and the summary table (printed, and written as Markdown on request)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reliability.client import Ledger

COLUMNS = (
    "phase",
    "runs",
    "kills",
    "kills in runs",
    "recovered",
    "outages",
    "requests",
    "lost",
    "duplicated",
    "wrong",
    "plain re-runs",
    "5xx",
    "protocol violations",
    "RSS drift",
    "seconds",
    "result",
)
# The verifier's kinds counted in the "lost" and "duplicated" columns; every other kind is
# counted under "wrong" (reliability/verify.py lists them all).
LOST_KINDS = frozenset({"lost run", "missing effect", "answer missing", "plain step never ran"})
DUP_KINDS = frozenset(
    {
        "extra run",
        "duplicated effect",
        "duplicate ended event",
        "answer recorded twice",
        "recorded step ran again",
    }
)


@dataclass
class PhaseReport:
    phase: str
    runs: int = 0
    kills: int = 0
    outages: int = 0
    kills_inside: int = 0  # kills that cut off a run in the middle of a step
    recovered: int = 0  # runs finished by a later claim after their lease was lost
    plain_reruns: int = 0  # at-least-once re-executions of plain steps: expected, counted
    checks: Counter[str] = field(default_factory=Counter)  # verifier violations by kind
    skipped: str | None = None  # why the phase could not run (never a pass)
    ledger: Ledger = field(default_factory=Ledger)
    rss_drift: str = "-"
    bad_503: int = 0  # 503/-31000 answers where no outage or restart explains them
    seconds: float = 0.0
    figures: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return self.ledger.counts["violation"]

    @property
    def lost(self) -> int:
        return sum(n for k, n in self.checks.items() if k in LOST_KINDS)

    @property
    def duplicated(self) -> int:
        return sum(n for k, n in self.checks.items() if k in DUP_KINDS)

    @property
    def wrong(self) -> int:
        return sum(n for k, n in self.checks.items() if k not in LOST_KINDS | DUP_KINDS)

    @property
    def ok(self) -> bool:
        """Passed: ran, and nothing went wrong. A skipped phase is never ok."""
        return (
            self.skipped is None
            and not self.problems
            and not any(self.checks.values())
            and self.violations == 0
            and self.five_xx == 0
        )

    @property
    def result(self) -> str:
        if self.skipped is not None:
            return "SKIPPED"
        return "PASS" if self.ok else "FAIL"

    @property
    def five_xx(self) -> int:
        return self.ledger.unexpected_5xx + self.bad_503

    def row(self) -> tuple[str, ...]:
        return (
            self.phase,
            str(self.runs),
            str(self.kills),
            str(self.kills_inside),
            str(self.recovered),
            str(self.outages),
            str(self.ledger.requests),
            str(self.lost),
            str(self.duplicated),
            str(self.wrong),
            str(self.plain_reruns),
            str(self.five_xx),
            str(self.violations),
            self.rss_drift,
            f"{self.seconds:.0f}",
            self.result,
        )


def overall(reports: list[PhaseReport], expected: int) -> str:
    """One line: PASS only when every expected phase ran and passed; a skipped phase makes
    the whole result INCOMPLETE (never a pass)."""
    failed = [r.phase for r in reports if r.result == "FAIL"]
    skipped = [r.phase for r in reports if r.result == "SKIPPED"]
    missing = expected - len(reports)
    if failed or missing > 0:
        return f"FAIL: failed {failed}" + (f", {missing} phase(s) missing" if missing else "")
    if skipped:
        return f"INCOMPLETE: skipped {skipped} (not a pass); the others passed"
    return f"PASS: all {len(reports)} phases passed"


def table(reports: list[PhaseReport], *, markdown: bool = False) -> str:
    rows = [COLUMNS, *(r.row() for r in reports)]
    if markdown:
        out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(COLUMNS)]
        out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def details(reports: list[PhaseReport], *, markdown: bool = False) -> str:
    bullet = "- " if markdown else "  "
    out: list[str] = []
    for r in reports:
        out.append(f"\n**{r.phase}**\n" if markdown else f"{r.phase}:")
        if r.skipped is not None:
            out.append(f"{bullet}SKIPPED: {r.skipped}")
        if r.checks:
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(r.checks.items()))
            out.append(f"{bullet}verifier violations by kind: {kinds}")
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(r.ledger.counts.items()))
        if kinds:
            out.append(f"{bullet}responses: {kinds}; max latency {r.ledger.max_latency:.2f}s")
        out.extend(f"{bullet}{k}: {v}" for k, v in r.figures.items())
        out.extend(f"{bullet}PROBLEM: {p}" for p in r.problems[:20])
        out.extend(f"{bullet}VIOLATION: {p}" for p in r.ledger.violations[:20])
    return "\n".join(out)


START = "<!-- results:start -->"
END = "<!-- results:end -->"


def write_markdown(
    path: Path, command: str, reports: list[PhaseReport], env: str, expected: int | None = None
) -> None:
    """Write the results between the START and END markers of `path` (the rest of the file is
    kept), or the whole file when it has no markers."""
    block = "\n".join(
        [
            START,
            f"Command: `{command}`  ",
            f"Machine: {env}",
            "",
            table(reports, markdown=True),
            "",
            f"Overall: {overall(reports, len(reports) if expected is None else expected)}",
            "",
            details(reports, markdown=True),
            END,
        ]
    )
    old = path.read_text("utf-8") if path.exists() else ""
    if START in old and END in old:
        head, rest = old.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = block + "\n"
    path.write_text(text, "utf-8")
