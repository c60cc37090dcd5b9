"""Content digests in OCI form: ``sha256:<64 lowercase hex>``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator

from modelport.errors import InvalidInput

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def check_digest(value: str) -> str:
    """Return ``value`` if it is a well-formed digest, else raise ``InvalidInput``."""
    if not isinstance(value, str) or not DIGEST_RE.match(value):
        raise InvalidInput(
            f"invalid digest {value!r}: expected 'sha256:' followed by 64 lowercase hex digits",
            code="invalid_digest",
        )
    return value


def _validate(value: str) -> str:
    if not DIGEST_RE.match(value):
        raise ValueError("expected 'sha256:' followed by 64 lowercase hex digits")
    return value


Digest = Annotated[str, AfterValidator(_validate)]
"""A pydantic field type for a digest string."""


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_chunks(chunks: Iterable[bytes]) -> tuple[str, int]:
    """Digest and total size of a stream of chunks."""
    h = hashlib.sha256()
    size = 0
    for chunk in chunks:
        h.update(chunk)
        size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def hex_part(digest: str) -> str:
    return digest.split(":", 1)[1]
