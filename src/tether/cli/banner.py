"""What `tether serve` says once it serves: where to point an MCP client, the console and the
metrics, which database it uses (never its password), what it serves, and how to stop it.
Pure: settings and facts in, text out."""

from __future__ import annotations

from tether.app import METRICS_PATH
from tether.console import PREFIX as CONSOLE_PREFIX
from tether.database_url import describe
from tether.settings import Settings


def base_url(host: str, port: int) -> str:
    """`http://host:port`, an IPv6 address in brackets."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def banner(settings: Settings, port: int, app: str, serves: str) -> str:
    """The lines `tether serve` logs once it listens on `port`; `app` names the App and
    `serves` counts what it serves (`3 workflows, no DAGs, no protocols`)."""
    url = base_url(settings.host, port)
    rows = [("MCP", url + settings.mcp_path)]
    if settings.console_enabled():
        rows.append(("console", f"{url}{CONSOLE_PREFIX}/"))
    if settings.metrics:
        scraped = [url + METRICS_PATH]
        if settings.metrics_port:
            scraped.append(base_url(settings.host, settings.metrics_port) + METRICS_PATH)
        rows.append(("metrics", " and ".join(scraped)))
    rows.append(("database", describe(settings)))
    width = max(len(name) for name, _ in rows)
    lines = [f"serving {app}: {serves}"]
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    lines.append("  Ctrl-C stops it (twice: at once)")
    return "\n".join(lines)
