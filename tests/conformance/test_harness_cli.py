"""The command line (`tether-conformance`, `tether conformance`) and its reports: text, JSON,
JUnit XML, expected failures (stale entries fail the run), fixtures and exit codes."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import respx

from tests.conformance.fake_server import URL, Fake
from tether import cli as tether_cli
from tether.conformance import cli, report
from tether.conformance.check import Check
from tether.conformance.client import Client
from tether.conformance.requirements import REQUIREMENTS

FAST = ["--timeout", "2", "--creations", "10"]


@pytest.fixture
def fake() -> Iterator[Fake]:
    server = Fake()
    with respx.mock(assert_all_called=False) as mock:
        mock.route(url__startswith=URL).mock(side_effect=server)
        yield server


def harness(*args: str) -> int:
    return cli.main(["--url", URL, *FAST, *args])


def test_a_clean_run_exits_0_and_prints_a_line_per_check_then_the_summary(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    """One progress line per scenario, one line per check, then `N passed, M failed`."""
    assert harness("--scenario", "envelope", "--scenario", "origin") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[1/3] envelope: envelope & errors"
    assert lines[-1] == "30 passed, 0 failed, 1 skipped"  # no tasks/get: get:never-task skips
    assert any(line.startswith("PASS  http:discover-ok  ") for line in lines)


def test_verbose_output_shows_the_spec_reference_and_the_exchange(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    """--verbose prints the request/response that decided each check."""
    assert harness("--scenario", "origin", "--verbose") == 0
    out = capsys.readouterr().out
    assert "spec: [MUST] CHECKLIST 4; https://" in out
    assert '"status": 403' in out


def test_json_and_junit_reports_carry_every_check(fake: Fake, tmp_path: Path) -> None:
    """--json and --junit write the same verdicts, with spec refs and details."""
    out_json, out_xml = tmp_path / "r.json", tmp_path / "r.xml"
    assert harness("--scenario", "headers", "--json", str(out_json), "--junit", str(out_xml)) == 0
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert data["exit_code"] == 0 and data["summary"]["fail"] == 0
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["headers:name-missing"]["checklist"] == [31]
    assert by_id["headers:name-missing"]["details"]["exchanges"][0]["response"]["status"] == 400
    root = ET.fromstring(out_xml.read_text(encoding="utf-8"))  # noqa: S314 — our own file
    cases = {c.get("name") for c in root.iter("testcase")}
    assert set(by_id) == cases
    assert root.get("failures") == "0"


def test_an_unexpected_failure_exits_1_and_junit_records_it(tmp_path: Path) -> None:
    """Exit 1 on an unexpected failure; JUnit has a <failure> for it."""
    out_xml = tmp_path / "r.xml"
    with respx.mock(assert_all_called=False) as mock:
        mock.route(url__startswith=URL).mock(side_effect=Fake(["ping-ok"]))
        assert harness("--scenario", "envelope", "--junit", str(out_xml)) == 1
    root = ET.fromstring(out_xml.read_text(encoding="utf-8"))  # noqa: S314 — our own file
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["routing:ping-removed"]


def test_expected_failures_pass_the_run_and_stale_ones_fail_it(tmp_path: Path) -> None:
    """A listed failure is tolerated; a listed check that now passes fails the run."""
    listed = tmp_path / "xfail.yml"
    listed.write_text("routing:ping-removed: ping is still served\n", encoding="utf-8")
    with respx.mock(assert_all_called=False) as mock:
        mock.route(url__startswith=URL).mock(side_effect=Fake(["ping-ok"]))
        assert harness("--scenario", "envelope", "--expected-failures", str(listed)) == 0
    with respx.mock(assert_all_called=False) as mock:
        mock.route(url__startswith=URL).mock(side_effect=Fake())
        assert harness("--scenario", "envelope", "--expected-failures", str(listed)) == 1


@pytest.mark.parametrize(
    "content",
    ["- routing:ping-removed\n", "server:\n  - routing:ping-removed\n", "routing:ping-removed:\n"],
)
def test_the_expected_failures_file_takes_a_list_or_a_mapping(tmp_path: Path, content: str) -> None:
    """Our choice: a list of ids, a mapping id → reason, optionally under `server:`."""
    path = tmp_path / "x.yml"
    path.write_text(content, encoding="utf-8")
    assert list(report.load_expected_failures(path)) == ["routing:ping-removed"]


def test_an_unknown_expected_failure_id_cannot_run(tmp_path: Path) -> None:
    """Our choice: a typo in the list is an error (exit 2), not a silently ignored entry."""
    path = tmp_path / "x.yml"
    path.write_text("- no:such-check\n", encoding="utf-8")
    with pytest.raises(report.ReportError):
        report.load_expected_failures(path)
    assert cli.main(["--url", URL, "--expected-failures", str(path)]) == 2


def test_a_warning_or_failure_listed_as_expected_is_xfail_and_a_skip_stays_a_skip() -> None:
    """Our choice: only a pass makes an expected-failure entry stale."""
    req = REQUIREMENTS["routing:ping-removed"]
    checks = [Check(req.id, s, "m", req.ref) for s in ("fail", "warn", "skip", "pass")]
    finals = [o.final for o in report.apply(checks, {req.id: ""})]
    assert finals == ["xfail", "xfail", "skip", "stale"]


def test_a_missing_fixture_skips_its_checks_with_the_reason(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check whose fixture is missing is `skip` with the reason, never a pass."""
    assert harness("--scenario", "discover", "--fixture", "greet=no_such_tool") == 0
    out = capsys.readouterr().out
    assert (
        "SKIP  tools-call:sync  fixture 'greet': the server offers no tool named 'no_such_tool'"
        in out
    )


def test_fixtures_can_be_remapped_to_other_tool_names(capsys: pytest.CaptureFixture[str]) -> None:
    """--fixture NAME=TOOL makes the harness call TOOL for that fixture."""
    server = Fake()
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route(url__startswith=URL).mock(side_effect=server)
        assert harness("--scenario", "discover", "--fixture", "greet=test_headers") == 0
    names = [json.loads(c.request.content).get("params", {}).get("name") for c in route.calls]
    assert "test_headers" in names and "greet" not in names


def test_an_unreachable_server_cannot_run() -> None:
    """Exit 2 when the server cannot be tested at all."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli.main(["--url", f"http://127.0.0.1:{port}/mcp", "--timeout", "2"]) == 2


@pytest.mark.parametrize(
    "args",
    [["--scenario", "nope"], ["--fixture", "nope=x"], ["--fixture", "greet"], ["--header", "x"]],
)
def test_bad_arguments_cannot_run(args: list[str]) -> None:
    """Exit 2 (could not run) for unknown scenarios/fixtures and malformed pairs."""
    assert cli.main(["--url", URL, *args]) == 2


def test_headers_from_the_command_line_go_on_every_request(tmp_path: Path) -> None:
    """--header K:V (auth tokens, gateway routing) is sent with every request, and
    credentials never reach a report."""
    out = tmp_path / "r.json"
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route(url__startswith=URL).mock(side_effect=Fake())
        args = ["--scenario", "meta", "--header", "Authorization: Bearer t0k", "--verbose"]
        assert harness(*args, "--json", str(out)) == 0
    assert route.calls
    assert all(c.request.headers.get("authorization") == "Bearer t0k" for c in route.calls)
    text = out.read_text(encoding="utf-8")
    assert "t0k" not in text and "<redacted>" in text


def test_tether_conformance_forwards_to_the_harness(capsys: pytest.CaptureFixture[str]) -> None:
    """`tether conformance …` is the same command as `tether-conformance …`."""
    assert tether_cli.main(["conformance", "--list"]) == 0
    out = capsys.readouterr().out
    assert "envelope: envelope & errors" in out
    assert "  errors:http-status  [MUST]" in out


async def test_the_client_goes_through_an_http_proxy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The harness works through an HTTP proxy (httpx reads HTTP_PROXY)."""
    seen: list[bytes] = []
    body = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}'

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n")[0])
        length = int(
            next(
                (
                    line.split(b":")[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                b"0",
            )
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with server, asyncio.timeout(5):
        client = Client("http://mcp.example.invalid/mcp", timeout=2)
        try:
            ex = await client.call("server/discover")
        finally:
            await client.aclose()
    assert seen == [b"POST http://mcp.example.invalid/mcp HTTP/1.1"]
    assert ex.result == {"resultType": "complete"}
