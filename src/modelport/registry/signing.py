"""Ed25519 signatures over manifest digests.

What is signed is the ASCII manifest digest string (``b"sha256:<hex>"``), so an
external signer needs only the digest to sign a version::

    signature = Ed25519Sign(private_key, manifest_digest.encode("ascii"))

A key is identified by ``sha256:<hex>`` of its raw 32-byte public key.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
PLATFORM_SIGNER = "modelport"


def key_id(public_key: bytes) -> str:
    return "sha256:" + hashlib.sha256(public_key).hexdigest()


def verify(public_key: bytes, signature: bytes, manifest_digest: str) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of the digest by ``public_key``."""
    if len(public_key) != PUBLIC_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(
            signature, manifest_digest.encode("ascii")
        )
    except (InvalidSignature, ValueError):
        return False
    return True


class Signer:
    """The platform's signing key."""

    def __init__(self, private_key: Ed25519PrivateKey, *, name: str = PLATFORM_SIGNER) -> None:
        self._private_key = private_key
        self.name = name
        self.public_key = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.key_id = key_id(self.public_key)

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load_or_create(cls, path: Path) -> Signer:
        """Load the PEM key at ``path``; on first start create it (mode 0600, folders 0700).

        Creation is race-free between processes: the key is written to a private
        temporary file and hard-linked into place, so a second starter that loses the
        race loads the winner's complete key.
        """
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            pem = Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(pem)
                    handle.flush()
                    os.fsync(handle.fileno())
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"signing key at {path} is not an Ed25519 private key")
        return cls(key)

    def sign(self, manifest_digest: str) -> bytes:
        return self._private_key.sign(manifest_digest.encode("ascii"))
