"""TLS to the database: `sslmode=verify-full` with the CA that signed the server's certificate
connects every connection of ours encrypted; a certificate from another CA, or for another host
name, is refused with a certificate error, and never by falling back to plaintext (the server
here accepts both).

PostgreSQL with TLS needs a server built with OpenSSL: the embedded one (pgserver) is not, so
these tests run Debian's `postgresql` package, installed when missing (tests/debian.py); they
fail, never skip, when it cannot be.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.debian import ensure_postgres
from tether.storage import pool
from tether.storage.errors import DatabaseUnavailable
from tether.storage.notify import READY_CHANNEL, Listener

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Authority:
    """A certificate authority made for one test session."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def new(cls, name: str) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def issue(self, dns_name: str) -> tuple[bytes, bytes]:
        """A server certificate for `dns_name` signed by this authority: (cert PEM, key PEM)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class TlsServer:
    """A PostgreSQL that speaks TLS with a certificate for `localhost` signed by `ca_file`'s
    CA, and also takes plaintext: a client that fell back would get in."""

    port: int
    ca_file: Path
    wrong_ca_file: Path
    log: Path

    def url(
        self, host: str = "localhost", *, ca: Path | None = None, mode: str = "verify-full"
    ) -> str:
        root = ca if ca is not None else self.ca_file
        return f"postgresql://tether@{host}:{self.port}/postgres?sslmode={mode}&sslrootcert={root}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    """Start a throwaway cluster of Debian's PostgreSQL with ssl = on (module-wide)."""
    bindir = ensure_postgres()
    owner: pwd.struct_passwd | None = None
    if os.getuid() == 0:  # PostgreSQL refuses to run as root: as the package's own user
        owner = pwd.getpwnam("postgres")  # the package made it
    as_owner = ["runuser", "-u", "postgres", "--"] if owner is not None else []

    root = Path(tempfile.mkdtemp(prefix="tls-pg", dir="/tmp"))
    try:
        root.chmod(0o755)
        ca, wrong = Authority.new("Tether test CA"), Authority.new("Some other CA")
        cert_pem, key_pem = ca.issue("localhost")
        files = {"ca.pem": ca.pem(), "wrong-ca.pem": wrong.pem()}
        files |= {"server.pem": cert_pem, "server.key": key_pem}
        for name, pem in files.items():
            (root / name).write_bytes(pem)
        (root / "server.key").chmod(0o600)  # PostgreSQL refuses a key others can read
        if owner is not None:
            for path in (root, *(root / name for name in files)):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        data = root / "data"
        subprocess.run(
            [*as_owner, str(bindir / "initdb"), "-D", str(data), "-U", "tether", "-A", "trust"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        port = _free_port()
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(
                f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\n"
                f"ssl = on\nssl_cert_file = '{root / 'server.pem'}'\n"
                f"ssl_key_file = '{root / 'server.key'}'\nlog_connections = on\n"
            )
        # `host` lines match TLS and plaintext alike: a client that fell back would get in.
        (data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 trust\n", encoding="utf-8")
        log = root / "postgres.log"
        subprocess.run(
            [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "start"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        try:
            yield TlsServer(port, root / "ca.pem", root / "wrong-ca.pem", log)
        finally:
            subprocess.run(
                [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                check=False,
                capture_output=True,
                timeout=120,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_verify_full_with_the_servers_ca_encrypts_every_connection_of_ours(
    tls_server: TlsServer,
) -> None:
    """The pool, a single connection and the LISTEN connection all connect over TLS with the
    certificate checked against the CA (`sslmode=verify-full&sslrootcert=…`), and LISTEN
    hears a NOTIFY (our choice: documented in docs/deploying.md)."""
    dsn = tls_server.url()
    db = await pool.create_pool(dsn, min_size=2, max_size=2)
    listener = Listener(dsn)
    heard = asyncio.Event()
    listener.subscribe(READY_CHANNEL, lambda _c, payload: heard.set() if payload else None)
    listening = asyncio.create_task(listener.run())
    try:
        async with asyncio.timeout(10):
            await listener.ready.wait()
        await db.execute("SELECT pg_notify($1, 'x')", READY_CHANNEL)
        async with asyncio.timeout(10):
            await heard.wait()
        plain = await pool.connect(dsn)
        try:
            ours = await plain.fetch(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                "WHERE a.application_name = 'tether'"
            )
        finally:
            await plain.close()
    finally:
        listener.stop()
        await asyncio.wait_for(listening, 10)
        await db.close()
    assert len(ours) == 4  # the pool's two, the listener's and this one
    assert all(row["ssl"] for row in ours)


async def test_a_certificate_from_another_ca_is_refused_and_never_retried_in_plaintext(
    tls_server: TlsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The server takes plaintext too, yet a certificate the CA file does not vouch for ends
    the attempt with a certificate error, and the LISTEN connection's retries log that reason
    and never report ready (our choice: never fall back; say why)."""
    wrong = tls_server.url(ca=tls_server.wrong_ca_file)
    with pytest.raises(DatabaseUnavailable) as info:
        await pool.connect(wrong)
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)

    caplog.set_level(logging.WARNING, logger="tether.storage.notify")
    listener = Listener(wrong, max_backoff=0.2)
    listening = asyncio.create_task(listener.run())
    try:
        async with asyncio.timeout(10):
            while not any("certificate verify failed" in r.message for r in caplog.records):
                assert not listener.ready.is_set()
                await asyncio.sleep(0.02)
    finally:
        listener.stop()
        await asyncio.wait_for(listening, 10)
    assert not listener.ready.is_set()


async def test_verify_full_also_checks_the_host_name(tls_server: TlsServer) -> None:
    """A certificate for `localhost` does not do for 127.0.0.1 under verify-full; verify-ca,
    which checks only the CA, takes it (so the refusal is the name's)."""
    with pytest.raises(DatabaseUnavailable) as info:
        await pool.connect(tls_server.url("127.0.0.1"))
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)
    conn = await pool.connect(tls_server.url("127.0.0.1", mode="verify-ca"))
    try:
        assert await conn.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
    finally:
        await conn.close()


async def test_a_server_without_tls_is_refused_under_verify_full(server_url: str) -> None:
    """The suite's own server (embedded, or the external one, or PgBouncer in front of it)
    speaks no TLS: under verify-full the connection fails instead of going on in plaintext."""
    conn = await pool.connect(server_url)
    try:
        if await conn.fetchval("SHOW ssl") == "on":
            pytest.skip("the suite's server speaks TLS: nothing to refuse")
    finally:
        await conn.close()
    with pytest.raises(DatabaseUnavailable):
        await pool.connect(f"{server_url}?sslmode=verify-full")


def test_tether_migrate_names_the_certificate_problem(tls_server: TlsServer) -> None:
    """`tether migrate` against a server whose certificate the CA file does not vouch for
    exits 1 with one line saying the certificate failed verification; with the right CA it
    applies the migrations (our choice: an operator sees why, not only that it failed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    wrong = subprocess.run(
        [sys.executable, "-m", "tether", "migrate"],
        cwd=REPO,
        env={**env, "TETHER_DATABASE_URL": tls_server.url(ca=tls_server.wrong_ca_file)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert wrong.returncode == 1
    (line,) = wrong.stderr.splitlines()
    assert line.startswith("tether: Unavailable: cannot reach PostgreSQL at localhost:")
    assert "SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify" in line
    right = subprocess.run(
        [sys.executable, "-m", "tether", "migrate"],
        cwd=REPO,
        env={**env, "TETHER_DATABASE_URL": tls_server.url()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert right.returncode == 0, right.stderr
    assert right.stdout.startswith("applied")
