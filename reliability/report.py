"""Phase results and the summary table (printed, and written as Markdown on request)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reliability.client import Ledger

COLUMNS = (
    "phase",
    "runs",
    "kills",
    "outages",
    "requests",
    "lost",
    "duplicated",
    "5xx",
    "violations",
    "RSS drift",
    "seconds",
    "result",
)


@dataclass
class PhaseReport:
    phase: str
    runs: int = 0
    kills: int = 0
    outages: int = 0
    lost: int = 0
    duplicated: int = 0
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
    def ok(self) -> bool:
        return (
            not self.problems
            and self.lost == 0
            and self.duplicated == 0
            and self.violations == 0
            and self.five_xx == 0
        )

    @property
    def five_xx(self) -> int:
        return self.ledger.unexpected_5xx + self.bad_503

    def row(self) -> tuple[str, ...]:
        return (
            self.phase,
            str(self.runs),
            str(self.kills),
            str(self.outages),
            str(self.ledger.requests),
            str(self.lost),
            str(self.duplicated),
            str(self.five_xx),
            str(self.violations),
            self.rss_drift,
            f"{self.seconds:.0f}",
            "PASS" if self.ok else "FAIL",
        )


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
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(r.ledger.counts.items()))
        if kinds:
            out.append(f"{bullet}responses: {kinds}; max latency {r.ledger.max_latency:.2f}s")
        out.extend(f"{bullet}{k}: {v}" for k, v in r.figures.items())
        out.extend(f"{bullet}PROBLEM: {p}" for p in r.problems[:20])
        out.extend(f"{bullet}VIOLATION: {p}" for p in r.ledger.violations[:20])
    return "\n".join(out)


START = "<!-- results:start -->"
END = "<!-- results:end -->"


def write_markdown(path: Path, command: str, reports: list[PhaseReport], env: str) -> None:
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
