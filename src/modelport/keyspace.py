"""Names in a Redis that several installations may share.

Every key, stream and channel one installation uses lives under
``modelport:{installation}:``, the installation id kept in its database (see
``store/installation.py``): a second installation on the same Redis database can
neither read nor write the first one's state. ``modelport.app`` builds the one
``Keyspace`` of a process and hands it to every Redis user; none builds a name of
its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Keyspace:
    installation: str

    def __post_init__(self) -> None:
        # A separator in the id would let one installation's names reach into another's.
        if not _ID.fullmatch(self.installation):
            raise ValueError(f"not an installation id: {self.installation!r}")

    @property
    def prefix(self) -> str:
        """What every name of this installation starts with."""
        return f"modelport:{self.installation}:"

    def name(self, *parts: str) -> str:
        """``modelport:{installation}:part:part...``."""
        return self.prefix + ":".join(parts)
