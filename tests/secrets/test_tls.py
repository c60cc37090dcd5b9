"""``modelport serve --tls-cert --tls-key`` terminates TLS itself: a client that trusts
the (self-signed) certificate talks HTTPS to it; a missing or wrong key stops the
command with a clear message."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ADMIN_KEY, free_port

pytestmark = pytest.mark.slow  # starts real processes


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def serve(home: Path, port: int, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env |= {"MODELPORT_HOME": str(home), "MODELPORT_ADMIN_KEY": ADMIN_KEY}
    return subprocess.Popen(
        [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_serve_terminates_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    port = free_port()
    proc = serve(tmp_path / "home", port, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        trusting = ssl.create_default_context(cafile=str(cert))
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                response = httpx.get(f"{url}/healthz", verify=trusting, timeout=2)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        assert response.status_code == 200
        listed = httpx.get(
            f"{url}/api/tenants",
            verify=trusting,
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert listed.status_code == 200, listed.text
        # A client that does not trust the certificate refuses it.
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/healthz", timeout=5)
        # Plain HTTP is not served on the port.
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert f"https://127.0.0.1:{port}" in out


def test_serve_refuses_a_certificate_without_its_key(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    _, other_key = self_signed(tmp_path / "other")
    for args, expected in (
        (["--tls-cert", str(cert)], "needs both a certificate and its key"),
        (["--tls-cert", str(cert), "--tls-key", str(other_key)], "cannot serve TLS"),
    ):
        proc = serve(tmp_path / "home", free_port(), *args)
        out = proc.communicate(timeout=60)[0]
        assert proc.returncode != 0 and expected in out, out
