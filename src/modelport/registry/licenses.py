"""SPDX license identifiers and expressions.

Known identifiers and exceptions come from the SPDX list bundled with
``license_expression``. User-defined ``LicenseRef-...`` identifiers are allowed,
as the SPDX specification allows them. Identifiers are normalized to their
canonical case (``mit`` -> ``MIT``) so that catalog filters match.
"""

from __future__ import annotations

import re
from functools import cache

from license_expression import Licensing, get_spdx_licensing

from modelport.errors import InvalidInput

LICENSE_REF_RE = re.compile(r"^(DocumentRef-[A-Za-z0-9.-]+:)?LicenseRef-[A-Za-z0-9.-]+$")
MAX_LENGTH = 256


@cache
def _licensing() -> Licensing:
    return get_spdx_licensing()


def normalize_license(expression: str, *, field: str = "license") -> str:
    """Return the normalized SPDX expression, or raise ``invalid_license`` naming ``field``."""
    text = expression.strip() if isinstance(expression, str) else ""
    if not text or len(text) > MAX_LENGTH:
        raise _invalid(expression, field, f"must be 1-{MAX_LENGTH} characters")
    licensing = _licensing()
    try:
        info = licensing.validate(text)
    except Exception:  # the parser raises assorted (and unhelpful) errors on bad syntax
        raise _invalid(expression, field, "malformed expression") from None
    unknown = [s for s in info.invalid_symbols if not LICENSE_REF_RE.match(s)]
    if unknown:
        raise _invalid(expression, field, "unknown SPDX identifier(s): " + ", ".join(unknown))
    other = [e for e in info.errors if not e.startswith("Unknown license key")]
    if other:
        raise _invalid(expression, field, "; ".join(other))
    if info.normalized_expression:
        return str(info.normalized_expression)
    # Only LicenseRef symbols were "unknown": keep them, normalize the rest.
    return str(licensing.parse(text, validate=False))


def _invalid(expression: object, field: str, why: str) -> InvalidInput:
    return InvalidInput(
        f"invalid license {expression!r} in {field}: {why}", code="invalid_license", field=field
    )
