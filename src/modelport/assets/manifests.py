"""An asset version's manifest: parsed strictly, digested canonically, and compared with
what is already published under its version."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from modelport.digests import sha256_digest
from modelport.errors import Conflict, InvalidInput

M = TypeVar("M", bound=BaseModel)


def parse_manifest(model: type[M], data: Any, *, what: str, code: str) -> M:
    """``data`` as a ``model``; 400 ``code`` naming the offending field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(manifest)"
        raise InvalidInput(
            f"invalid {what} manifest: {where}: {first['msg']}", code=code, field=where
        ) from None


def manifest_digest(manifest: BaseModel) -> str:
    """The canonical digest: sorted keys, no whitespace, defaults filled in."""
    doc = manifest.model_dump(mode="json")
    return sha256_digest(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS))


def require_same(published: str, digest: str, *, ref: str, what: str, code: str) -> None:
    """A version published again must carry the same manifest: 409 ``code`` otherwise."""
    if published != digest:
        raise Conflict(
            f"{what} version {ref} is published with another manifest",
            code=code,
            digest=published,
        )
