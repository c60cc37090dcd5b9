"""Which signatures make a version deployable and loadable.

Every stored signature of a version must verify over its manifest digest, and the
manifest must still hash to that digest (``signature_invalid`` otherwise: the stored
manifest or a signature was altered). Then at least one must verify
(``signature_missing``), and, where the operator lists trusted publisher keys
(``MODELPORT_TRUSTED_PUBLISHER_KEYS``), one by a trusted key (``signature_untrusted``).
The platform's own key is trusted only if it is listed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from modelport.errors import InvalidInput, Unprocessable
from modelport.registry import signing
from modelport.registry.types import Signature

KEY_ID_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
HEX_KEY_RE = re.compile(r"^[0-9a-fA-F]{64}$")
PEM_RE = re.compile(r"-----BEGIN PUBLIC KEY-----.+?-----END PUBLIC KEY-----", re.DOTALL)

SIGNATURE_INVALID = "signature_invalid"
SIGNATURE_MISSING = "signature_missing"
SIGNATURE_UNTRUSTED = "signature_untrusted"


@dataclass(frozen=True)
class TrustPolicy:
    """``trusted``: key ids (``sha256:<hex>``) a version must be signed by; empty: any
    signature that verifies will do."""

    trusted: frozenset[str] = frozenset()

    def judge(self, ref: str, digest: str, intact: bool, signatures: Sequence[Signature]) -> None:
        """Raise 422 unless ``ref`` (manifest ``digest``, ``intact`` when its stored
        manifest still hashes to it) may be deployed and loaded under this policy."""
        broken = [s for s in signatures if not s.verified]
        if not intact or broken:
            raise Unprocessable(
                f"{ref}: "
                + (
                    "its stored manifest does not hash to its digest"
                    if not intact
                    else f"the signature by {broken[0].signer} ({broken[0].key_id}) "
                    f"does not verify against {digest}"
                ),
                code=SIGNATURE_INVALID,
                version=ref,
                manifest_digest=digest,
            )
        if not signatures:
            raise Unprocessable(f"{ref} carries no signature", code=SIGNATURE_MISSING, version=ref)
        if self.trusted and not any(s.key_id in self.trusted for s in signatures):
            raise Unprocessable(
                f"{ref} is not signed by a trusted publisher key (signed by: "
                + ", ".join(f"{s.signer} {s.key_id}" for s in signatures)
                + ")",
                code=SIGNATURE_UNTRUSTED,
                version=ref,
                key_ids=[s.key_id for s in signatures],
            )


def parse_trusted_keys(value: str) -> frozenset[str]:
    """Key ids of a ``trusted_publisher_keys`` setting: comma-separated entries, each a
    key id, a raw Ed25519 public key (base64 or hex) or the path of a file of entries
    (one a line, ``#`` comments, PEM public keys too). 400 ``invalid_trusted_key``
    for an entry that is none of these."""
    found: set[str] = set()
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        path = Path(entry).expanduser()
        if path.is_file():
            found.update(_file_keys(path))
        else:
            found.add(_entry_key(entry, where="MODELPORT_TRUSTED_PUBLISHER_KEYS"))
    return frozenset(found)


def _file_keys(path: Path) -> Iterable[str]:
    text = path.read_text()
    for block in PEM_RE.findall(text):
        yield _pem_key(block.encode(), where=str(path))
    for line in PEM_RE.sub("", text).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            yield _entry_key(line, where=str(path))


def _entry_key(entry: str, *, where: str) -> str:
    if KEY_ID_RE.match(entry):
        return entry
    raw: bytes | None = None
    if HEX_KEY_RE.match(entry):
        raw = bytes.fromhex(entry)
    else:
        try:
            raw = base64.b64decode(entry, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != signing.PUBLIC_KEY_BYTES:
        raise InvalidInput(
            f"a trusted publisher key in {where} is neither a key id (sha256:<hex>), a raw "
            f"Ed25519 public key (base64 or hex), a PEM public key nor a file: {entry[:80]!r}",
            code="invalid_trusted_key",
        )
    return signing.key_id(raw)


def _pem_key(pem: bytes, *, where: str) -> str:
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInput(
            f"a PEM public key in {where} is not an Ed25519 key", code="invalid_trusted_key"
        )
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return signing.key_id(raw)
