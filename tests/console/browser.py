"""Real headless Chromium for the console's end-to-end tests: Debian's `chromium` (installed by
scripts/ensure-chromium when missing; a test fails, never skips, when it cannot be), driven by
Python Playwright through `executable_path` (never `playwright install`), and axe-core at the
version tests/node/package-lock.json pins (`npm ci` into .cache/node by scripts/node-packages)
injected into pages for the accessibility check."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[2]
CHROMIUM: Final = os.environ.get("TETHER_CHROMIUM", "/usr/bin/chromium")
ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENS: Final = REPO / "docs" / "console-screens"


def ensure_chromium() -> str:
    """The browser binary, installed first if missing. Raises RuntimeError when it cannot be."""
    if not os.access(CHROMIUM, os.X_OK):
        done = subprocess.run(
            [str(REPO / "scripts" / "ensure-chromium")], capture_output=True, text=True
        )
        if done.returncode != 0 or not os.access(CHROMIUM, os.X_OK):
            raise RuntimeError(f"chromium is missing and could not be installed: {done.stderr}")
    return CHROMIUM


def ensure_axe() -> str:
    """axe-core's browser bundle, installed first if missing. Raises RuntimeError."""
    done = subprocess.run([str(REPO / "scripts" / "node-packages")], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"could not install the tests' npm packages: {done.stderr}")
    axe = Path(done.stdout.strip()) / "node_modules" / "axe-core" / "axe.min.js"
    return axe.read_text("utf-8")


async def axe_violations(page: Any, axe_source: str) -> list[dict[str, Any]]:
    """The serious and critical axe-core violations of the page as it is now."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.add_script_tag(content=axe_source)
    result = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]
