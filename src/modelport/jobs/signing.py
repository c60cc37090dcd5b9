"""Signed, expiring URLs to a job's outputs.

A signature is an HMAC-SHA256, under the installation's output URL key, over the job
id, the output's digest and the URL's expiry (Unix seconds), so a URL opens one output
of one job until one moment: another job's id, another digest or a later expiry does
not verify. The key is ``JOB_OUTPUT_URL_SECRET``, else one derived from the
installation's secret key (``modelport.app``); without either no URL is made
(``can_sign`` False) and every signature is refused. Comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from modelport.errors import Forbidden

__all__ = ["OutputSigner", "SignedOutput", "invalid_signature", "url_expired"]


def invalid_signature() -> Forbidden:
    return Forbidden(
        "the output URL's signature is not valid for this job and output",
        code="invalid_signature",
    )


def url_expired(expires: int) -> Forbidden:
    return Forbidden(
        "the output URL has expired: fetch the job again for a fresh one",
        code="url_expired",
        expires=expires,
    )


@dataclass(frozen=True)
class SignedOutput:
    """What a URL carries beside its path."""

    expires: int
    """Unix seconds after which the URL is refused."""
    signature: str
    """Lowercase hex."""


class OutputSigner:
    """Signs and verifies output URLs (see the module docstring)."""

    def __init__(self, key: bytes | None, *, seconds: int, now: Callable[[], datetime]) -> None:
        self._key = key or None
        self.seconds = seconds
        """How long a URL made now stays valid."""
        self.now = now

    @property
    def can_sign(self) -> bool:
        return self._key is not None

    def _mac(self, job_id: str, digest: str, expires: int) -> str:
        assert self._key is not None
        # Newline-separated: neither a job id nor a digest holds one, so no two
        # triples sign the same message.
        message = f"modelport-job-output\n{job_id}\n{digest}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, job_id: str, digest: str) -> SignedOutput | None:
        """A signature valid from now for ``seconds`` (None: no key to sign with)."""
        if self._key is None:
            return None
        expires = int(self.now().timestamp()) + self.seconds
        return SignedOutput(expires, self._mac(job_id, digest, expires))

    def verify(self, job_id: str, digest: str, expires: str | int, signature: str) -> None:
        """Pass, or raise 403 ``invalid_signature`` (wrong key, job, digest or expiry,
        or no key at all) or 403 ``url_expired`` (a genuine URL past its expiry)."""
        try:
            at = int(expires)
        except (TypeError, ValueError):
            raise invalid_signature() from None
        if self._key is None or not 0 <= at < 1 << 62:
            raise invalid_signature()
        expected = self._mac(job_id, digest, at)
        if not hmac.compare_digest(expected.encode(), signature.strip().lower().encode()):
            raise invalid_signature()
        if self.now().timestamp() >= at:
            raise url_expired(at)
