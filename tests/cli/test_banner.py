"""What `tether serve` says once it serves (cli/banner.py), pure: settings in, text out."""

from __future__ import annotations

from pathlib import Path

from tether.cli.banner import banner
from tether.settings import Settings

SERVES = "3 workflows, no DAGs, no protocols"


def rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line.split(None, 1)[1] for line in text.splitlines()[1:-1]}


def test_a_development_server_names_its_console_and_its_data_directory(tmp_path: Path) -> None:
    """The embedded database on loopback: MCP, console, metrics and the data directory."""
    text = banner(Settings(data_dir=tmp_path / "d"), 8123, "m:app", SERVES)
    assert text.splitlines()[0] == f"serving m:app: {SERVES}"
    assert rows(text) == {
        "MCP": "http://127.0.0.1:8123/mcp",
        "console": "http://127.0.0.1:8123/console/",
        "metrics": "http://127.0.0.1:8123/metrics",
        "database": f"the embedded PostgreSQL in {(tmp_path / 'd' / 'pg').resolve()} "
        "(TETHER_DATA_DIR)",
    }
    assert text.splitlines()[-1] == "  Ctrl-C stops it (twice: at once)"


def test_a_database_url_shows_its_host_and_database_never_its_password() -> None:
    settings = Settings(database_url="postgresql://owner:s3cret@db.internal:6432/tether")
    text = banner(settings, 8000, "m:app", SERVES)
    assert rows(text)["database"] == (
        "PostgreSQL at db.internal:6432, database tether (TETHER_DATABASE_URL)"
    )
    assert "s3cret" not in text and "owner" not in text
    assert "console" not in rows(text)  # a production server serves none unless asked


def test_metrics_follow_their_settings_and_an_ipv6_host_is_bracketed() -> None:
    off = banner(Settings(metrics=False), 8000, "m:app", SERVES)
    assert "metrics" not in rows(off)
    extra = banner(Settings(host="::1", metrics_port=9100), 8000, "m:app", SERVES)
    assert rows(extra)["MCP"] == "http://[::1]:8000/mcp"
    assert "http://[::1]:9100/metrics" in extra
