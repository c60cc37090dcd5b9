"""How a signing secret's value is kept in the database: the one seam for encryption
at rest. Today the value is stored as given; a key-wrapping scheme replaces these two
functions (and marks what it wrote, so values stored before it still load)."""

from __future__ import annotations


def seal(secret: str) -> str:
    """The stored form of ``secret``."""
    return secret


def unseal(stored: str) -> str:
    """The secret whose stored form is ``stored``."""
    return stored
