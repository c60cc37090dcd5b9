"""The model package manifest: one schema, plain data, no I/O.

Both the registry (which stores and signs manifests) and the runtime (which
loads what a manifest lists) depend on this package; it depends on nothing
above ``modelport.errors`` and ``modelport.digests``.
"""

from modelport.manifest.canonical import canonical_bytes, manifest_digest, parse_manifest
from modelport.manifest.types import (
    DATATYPES,
    UNSAFE_FORMATS,
    Example,
    ExampleTensor,
    FileEntry,
    Lineage,
    LineageParent,
    LineageRef,
    Manifest,
    Postprocessing,
    Processing,
    Resources,
    TensorSpec,
    Tolerance,
    stored_manifest,
)

__all__ = [
    "DATATYPES",
    "UNSAFE_FORMATS",
    "Example",
    "ExampleTensor",
    "FileEntry",
    "Lineage",
    "LineageParent",
    "LineageRef",
    "Manifest",
    "Postprocessing",
    "Processing",
    "Resources",
    "TensorSpec",
    "Tolerance",
    "canonical_bytes",
    "manifest_digest",
    "parse_manifest",
    "stored_manifest",
]
