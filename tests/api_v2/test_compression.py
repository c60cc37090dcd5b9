"""Compressed request bodies, as tritonclient sends them with request_compression_algorithm."""

from __future__ import annotations

import gzip
import zlib

import pytest

from modelport.api.v2 import decode_content
from modelport.errors import InvalidInput

BODY = b'{"inputs": []}' * 100


@pytest.mark.parametrize(
    ("encoding", "compress"),
    # tritonclient uses gzip.compress and zlib.compress for these two.
    [("gzip", gzip.compress), ("GZip", gzip.compress), ("deflate", zlib.compress)],
)
def test_round_trip(encoding: str, compress: object) -> None:
    assert callable(compress)
    assert decode_content(compress(BODY), encoding, max_bytes=len(BODY)) == BODY


@pytest.mark.parametrize("encoding", [None, "identity", " identity "])
def test_identity(encoding: str | None) -> None:
    assert decode_content(b"raw", encoding, max_bytes=1) == b"raw"


def refused(body: bytes, encoding: str, code: str, max_bytes: int = 1 << 20) -> str:
    with pytest.raises(InvalidInput) as err:
        decode_content(body, encoding, max_bytes=max_bytes)
    assert err.value.code == code, err.value.message
    return err.value.message


def test_bomb_is_cut_off_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * (8 << 20))
    assert len(bomb) < 16 << 10
    assert "larger than 1048576" in refused(bomb, "gzip", "payload_too_large", 1 << 20)


def test_exact_limit_passes() -> None:
    assert decode_content(gzip.compress(BODY), "gzip", max_bytes=len(BODY)) == BODY
    refused(gzip.compress(BODY), "gzip", "payload_too_large", len(BODY) - 1)


def test_corrupt_truncated_and_trailing_data() -> None:
    data = gzip.compress(BODY)
    refused(b"not gzip", "gzip", "invalid_content_encoding")
    refused(data[:-6], "gzip", "invalid_content_encoding")
    refused(data + b"junk", "gzip", "invalid_content_encoding")
    refused(zlib.compress(BODY), "gzip", "invalid_content_encoding")


def test_unsupported_encoding() -> None:
    assert "'br'" in refused(b"x", "br", "unsupported_content_encoding")
