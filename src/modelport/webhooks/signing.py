"""Standard Webhooks signatures (https://www.standardwebhooks.com/): the secret format
and the ``webhook-*`` headers of one attempt.

A signature is ``v1,`` and the base64 HMAC-SHA256, keyed by the secret's decoded bytes,
of ``{webhook-id}.{webhook-timestamp}.{body}``; several (one per secret that signs,
during a rotation's overlap) are joined by spaces in ``webhook-signature``, and a
receiver accepts the message when any one of them matches.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
"""The spec asks for 24 to 64 random bytes."""


def new_secret() -> str:
    """A fresh ``whsec_<base64>`` secret."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` sent as ``message_id`` at ``timestamp``
    (whole seconds since the epoch)."""
    signed = b"%s.%d.%s" % (message_id.encode(), timestamp, body)
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    signing_secrets: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers, signed
    with every one of ``signing_secrets`` (newest first)."""
    if not signing_secrets:
        raise ValueError("no secret to sign with")
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            sign(secret, message_id, timestamp, body) for secret in signing_secrets
        ),
    }
