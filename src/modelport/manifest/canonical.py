"""Canonical form and digest of a manifest."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from modelport.digests import sha256_digest
from modelport.errors import InvalidInput
from modelport.manifest.types import Manifest


def parse_manifest(data: Any) -> Manifest:
    """Validate raw JSON data as a manifest; errors name the offending field."""
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(manifest)", "error": err["msg"]}
            for err in exc.errors()
        ]
        first = problems[0]
        raise InvalidInput(
            f"invalid manifest: {first['field']}: {first['error']}",
            code="invalid_manifest",
            errors=problems,
        ) from None


def canonical_bytes(manifest: Manifest) -> bytes:
    """Sorted keys, no whitespace, defaults filled in: equal manifests give equal bytes.

    ``processing`` is left out when absent, so the digests of manifests made before the
    field existed stay what they were."""
    doc = manifest.model_dump(mode="json")
    if doc.get("processing") is None:
        doc.pop("processing", None)
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


def manifest_digest(manifest: Manifest) -> str:
    return sha256_digest(canonical_bytes(manifest))
