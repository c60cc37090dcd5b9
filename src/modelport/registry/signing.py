"""Manifest signing (to be implemented)."""

from __future__ import annotations

from pathlib import Path


class Signer:
    @classmethod
    def load_or_create(cls, path: Path) -> Signer:
        return cls()
