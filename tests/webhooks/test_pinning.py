"""An attempt connects to the address the policy checked, not wherever the name
resolves by then, and TLS still names and verifies the URL's host: a local HTTPS
receiver with a certificate for a name that resolves nowhere is reached through the
pinned address; a name its certificate does not cover is refused."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from modelport.webhooks.sender import HttpSender
from modelport.webhooks.urls import Target

NAME = "hooks.example.test"


def _cert(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None, signer: Any, ca: bool
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
        )
    else:
        builder = builder.add_extension(
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
    return builder.sign(signer, hashes.SHA256())


class TlsReceiver:
    def __init__(self, folder: Path) -> None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _cert("test ca", ca_key, None, ca_key, ca=True)
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = _cert(NAME, key, ca.subject, ca_key, ca=False)
        (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        (folder / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        (folder / "leaf.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self.client_context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(folder / "leaf.pem", folder / "leaf.key")
        self.server_names: list[str | None] = []
        self.hosts: list[str | None] = []
        receiver = self

        def remember(sock: Any, server_name: str | None, context: Any) -> None:
            receiver.server_names.append(server_name)

        server_context.sni_callback = remember

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.hosts.append(self.headers.get("host"))
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = server_context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[TlsReceiver]:
    receiver = TlsReceiver(tmp_path)
    yield receiver
    receiver.close()


def test_the_attempt_goes_to_the_checked_address_with_the_urls_name(tls: TlsReceiver) -> None:
    sender = HttpSender(5.0, verify=tls.client_context)
    try:
        url = f"https://{NAME}:{tls.port}/hooks?x=1"
        outcome = sender.send(Target(url, NAME, tls.port, ("127.0.0.1",)), b"{}", {})
    finally:
        sender.close()
    assert outcome.ok, outcome
    assert tls.server_names == [NAME]
    assert tls.hosts == [f"{NAME}:{tls.port}"]


def test_a_certificate_for_another_name_is_refused(tls: TlsReceiver) -> None:
    sender = HttpSender(5.0, verify=tls.client_context)
    try:
        other = "elsewhere.example.test"
        url = f"https://{other}:{tls.port}/hooks"
        outcome = sender.send(Target(url, other, tls.port, ("127.0.0.1",)), b"{}", {})
    finally:
        sender.close()
    assert outcome.status_code is None
    assert outcome.error is not None and "CERTIFICATE" in outcome.error.upper()
    assert tls.hosts == []
