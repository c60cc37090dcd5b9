"""Request body ``Content-Encoding`` (gzip, deflate), decompressed under a size cap.

``tritonclient`` compresses request bodies when asked
(``request_compression_algorithm``); the cap keeps a small compressed body
from expanding without bound.
"""

from __future__ import annotations

import zlib

from modelport.errors import InvalidInput

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def decode_content(body: bytes, content_encoding: str | None, *, max_bytes: int) -> bytes:
    """The decoded body. Raises ``InvalidInput`` with code ``unsupported_content_encoding``,
    ``invalid_content_encoding`` (corrupt or truncated) or ``payload_too_large``."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    wbits = _WBITS.get(encoding)
    if wbits is None:
        raise InvalidInput(
            f"Content-Encoding {content_encoding!r} is not supported; use gzip or deflate",
            code="unsupported_content_encoding",
        )
    decoder = zlib.decompressobj(wbits)
    try:
        out = decoder.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise InvalidInput(
            f"body is not valid {encoding} data: {exc}", code="invalid_content_encoding"
        ) from None
    if len(out) > max_bytes or decoder.unconsumed_tail:
        raise InvalidInput(
            f"decompressed body is larger than {max_bytes} bytes", code="payload_too_large"
        )
    if not decoder.eof or decoder.unused_data:
        raise InvalidInput(
            f"body is not a single complete {encoding} stream", code="invalid_content_encoding"
        )
    return out
