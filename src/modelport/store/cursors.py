"""Opaque page cursors over a row id: ``base64url(prefix + id)``. Each listing has its own
prefix, so a cursor of one listing is refused by another, and a bound: an id past its
column's range is refused as a bad cursor, never sent to the database."""

from __future__ import annotations

import base64
import binascii

from modelport.errors import InvalidInput

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _invalid() -> InvalidInput:
    return InvalidInput(
        "invalid cursor: pass back the next_cursor of a previous page",
        code="invalid_cursor",
        field="cursor",
    )


class IdCursor:
    """The cursors of one listing, keyed by the last row id of a page."""

    def __init__(self, prefix: bytes, *, maximum: int = INT32_MAX) -> None:
        self.prefix = prefix
        self.maximum = maximum

    def encode(self, last_id: int) -> str:
        raw = self.prefix + str(last_id).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode(self, cursor: str) -> int:
        """The id a cursor names; ``invalid_cursor`` for anything this listing did not
        make."""
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            if not raw.startswith(self.prefix):
                raise ValueError(cursor)
            value = int(raw[len(self.prefix) :].decode("ascii"))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise _invalid() from None
        if not 0 <= value <= self.maximum:
            raise _invalid()
        return value
