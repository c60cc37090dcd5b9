"""Manifests for transformers packages built from files on disk (no blob store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelport.digests import sha256_digest
from modelport.manifest import Manifest, parse_manifest


def file_entries(files: dict[str, Path]) -> list[dict[str, Any]]:
    return [
        {"path": name, "digest": sha256_digest(path.read_bytes()), "size": path.stat().st_size}
        for name, path in sorted(files.items())
    ]


def generative_manifest(files: dict[str, Path], **runtime: Any) -> Manifest:
    return parse_manifest(
        {
            "format": "transformers",
            "files": file_entries(files),
            "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
            "license": "MIT",
            "runtime": {"task": "chat", **runtime},
        }
    )


def embedding_manifest(
    files: dict[str, Path], width: int = 384, examples: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "format": "transformers",
        "files": file_entries(files),
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [
            {"name": "embedding", "datatype": "FP32", "shape": [-1, width]},
            {"name": "tokens", "datatype": "INT64", "shape": [-1]},
        ],
        "license": "Apache-2.0",
        "runtime": {"task": "embeddings"},
        "resources": {"max_batch_size": 32},
        "examples": examples or [],
    }
