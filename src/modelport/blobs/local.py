"""Blobs in a local folder: ``root/sha256/ab/<hex>`` (to be implemented)."""

from __future__ import annotations

from pathlib import Path


class LocalBlobStore:  # placeholder until implemented
    def __init__(self, root: Path) -> None:
        self.root = root
