"""The API key format: ``mp_live_<key id>_<secret>``.

The prefix makes leaked keys easy to scan for (``KEY_PATTERN``). The key id is
looked up in the database (or the key cache); only a SHA-256 of the secret is
stored and compared in constant time. Secrets carry about 238 bits of entropy,
so a fast hash is enough: there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass

PREFIX = "mp_live_"
ID_LENGTH = 16
SECRET_LENGTH = 40
_ID_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits

KEY_PATTERN = re.compile(rf"\b{PREFIX}([0-9a-z]{{{ID_LENGTH}}})_([0-9A-Za-z]{{{SECRET_LENGTH}}})\b")
"""Matches a modelport API key anywhere in text (for leak scanners)."""
_EXACT = re.compile(rf"^{PREFIX}([0-9a-z]{{{ID_LENGTH}}})_([0-9A-Za-z]{{{SECRET_LENGTH}}})$")


@dataclass(frozen=True)
class ParsedKey:
    key_id: str
    secret: str


def new_key_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(ID_LENGTH))


def new_secret() -> str:
    return "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))


def format_key(key_id: str, secret: str) -> str:
    return f"{PREFIX}{key_id}_{secret}"


def parse_key(token: str) -> ParsedKey | None:
    """The key id and secret of a well-formed key; None for anything else."""
    match = _EXACT.match(token)
    return ParsedKey(match[1], match[2]) if match else None


def hash_secret(key_id: str, secret: str) -> str:
    """What is stored: hex SHA-256 over the key id and the secret."""
    return hashlib.sha256(f"{key_id}:{secret}".encode()).hexdigest()


def secret_matches(key_id: str, secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(key_id, secret), stored_hash)
