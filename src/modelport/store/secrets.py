"""Secrets at rest: what the platform stores for later use (remote backends' API keys,
webhook signing secrets) is sealed with a key from the environment.

The box is built once by ``modelport.app`` (``open_secret_box``) and handed to every
service that stores a secret. Such a service calls::

    row.api_key = box.seal(plain)      # before it writes: "fernet:v1:<token>"
    plain = box.open(row.api_key)      # when it needs the secret again

and lists its column in ``store.sealed.SEALED_COLUMNS``, so that
``modelport secrets rotate`` re-seals it with the newest key.

Keys (``MODELPORT_SECRET_KEY``) are Fernet keys (``Fernet.generate_key()``), several
comma-separated, newest first: the newest seals, any of them opens (MultiFernet). A
stored value without the ``fernet:`` prefix is a legacy plain value, from before
secrets were sealed: ``open`` returns it as it is, and rotation seals it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from modelport.errors import InvalidInput, Unavailable

PREFIX = "fernet:"
SCHEME = "fernet:v1:"
"""The stored form's prefix: the scheme and its version, then the Fernet token."""

KEY_REQUIRED = "secret_key_required"
UNREADABLE = "secret_unreadable"


class SecretBox:
    """Seals and opens stored secrets with Fernet keys, newest first."""

    def __init__(self, keys: Sequence[str | bytes], *, missing_key_reason: str = "") -> None:
        """``keys``: Fernet keys, newest first; none: nothing can be sealed or opened
        (``missing_key_reason`` says why, in the ``secret_key_required`` error)."""
        fernets = [_fernet(key, index) for index, key in enumerate(keys)]
        self._newest = fernets[0] if fernets else None
        self._newest_key = _key_bytes(keys[0]) if keys else None
        self._all = MultiFernet(fernets) if fernets else None
        self._missing = missing_key_reason or "no secret key is configured"

    @property
    def can_seal(self) -> bool:
        return self._all is not None

    def seal(self, plain: str) -> str:
        """The stored form of ``plain``, sealed with the newest key."""
        return SCHEME + self._box().encrypt(plain.encode()).decode("ascii")

    def open(self, stored: str) -> str:
        """The plain secret of a stored value (a legacy plain value as it is)."""
        if not is_sealed(stored):
            return stored
        token = _token(stored)
        try:
            return self._box().decrypt(token).decode()
        except InvalidToken:
            raise Unavailable(
                "a stored secret cannot be opened with the configured keys: "
                "MODELPORT_SECRET_KEY lacks the key that sealed it",
                code=UNREADABLE,
            ) from None

    def reseal(self, stored: str) -> str:
        """``stored`` sealed with the newest key (a legacy plain value: sealed)."""
        if not is_sealed(stored):
            return self.seal(stored)
        return self.seal(self.open(stored))

    def sealed_by_newest(self, stored: str) -> bool:
        """Whether ``stored`` is sealed and opens with the newest key."""
        if not is_sealed(stored) or self._newest is None:
            return False
        try:
            self._newest.decrypt(_token(stored))
        except InvalidToken:
            return False
        return True

    def derive(self, purpose: str) -> bytes | None:
        """A key for ``purpose`` (HMAC-SHA256 of it under the newest key), so that one
        secret serves several uses without any of them learning it; None without keys.
        It changes when the newest key does."""
        if self._newest_key is None:
            return None
        return hmac.new(self._newest_key, purpose.encode(), hashlib.sha256).digest()

    def _box(self) -> MultiFernet:
        if self._all is None:
            raise Unavailable(
                f"{self._missing}: set MODELPORT_SECRET_KEY (a Fernet key, "
                "`modelport secrets generate-key`) to store secrets",
                code=KEY_REQUIRED,
            )
        return self._all


def is_sealed(stored: str) -> bool:
    return stored.startswith(PREFIX)


def _token(stored: str) -> bytes:
    if not stored.startswith(SCHEME):
        raise Unavailable(
            "a stored secret names a sealing scheme this release does not know",
            code=UNREADABLE,
        )
    return stored[len(SCHEME) :].encode("ascii")


def _key_bytes(key: str | bytes) -> bytes:
    return key.strip() if isinstance(key, bytes) else key.strip().encode()


def _fernet(key: str | bytes, index: int) -> Fernet:
    try:
        return Fernet(key.strip() if isinstance(key, bytes) else key.strip().encode())
    except (ValueError, TypeError):
        # The key itself is never part of the message.
        raise InvalidInput(
            f"secret key #{index + 1} of MODELPORT_SECRET_KEY is not a Fernet key "
            "(32 url-safe base64-encoded bytes)",
            code="invalid_secret_key",
        ) from None


def generate_key() -> str:
    return Fernet.generate_key().decode("ascii")


def load_or_create_key_file(path: Path) -> tuple[str, bool]:
    """The Fernet key in ``path``, made on first use (mode 0600, folder 0700);
    returns it and whether it was made now. Race-free between processes: written to a
    private temporary file and hard-linked into place, so a loser reads the winner's."""
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(generate_key() + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
                created = True
        finally:
            tmp.unlink(missing_ok=True)
    return path.read_text().strip(), created
