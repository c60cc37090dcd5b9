"""Canonical form and digest of a manifest."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from modelport.digests import sha256_digest
from modelport.errors import InvalidInput
from modelport.manifest.types import SCHEMA_VERSION, Manifest


def parse_manifest(data: Any) -> Manifest:
    """Validate raw JSON data as a manifest; errors name the offending field."""
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(manifest)", "error": _message(err)}
            for err in exc.errors()
        ]
        first = problems[0]
        raise InvalidInput(
            f"invalid manifest: {first['field']}: {first['error']}",
            code="invalid_manifest",
            errors=problems,
        ) from None


def _message(error: ErrorDetails) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown field: schema_version {SCHEMA_VERSION} of the manifest does not define it"
    return error["msg"]


def canonical_bytes(manifest: Manifest) -> bytes:
    """Sorted keys, no whitespace, defaults filled in: equal manifests give equal bytes.

    The digests of manifests made before a field was added or retired stay what they
    were: ``processing`` is left out when absent; ``postprocessing`` holds only the fields
    given (``Postprocessing`` dumps no null); the retired ``preprocessing`` is there (null, or what a stored version had),
    and so is any other field a stored version keeps aside (``stored_manifest``)."""
    doc = manifest.model_dump(mode="json")
    if doc.get("processing") is None:
        doc.pop("processing", None)
    doc["preprocessing"] = None
    doc.update(manifest.retired_fields)
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


def manifest_digest(manifest: Manifest) -> str:
    return sha256_digest(canonical_bytes(manifest))
