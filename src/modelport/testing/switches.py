"""Switches that turn a fast path off, so tests and benchmarks can compare it with the
general path it stands in for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from modelport.runtime import tensors


@contextmanager
def general_path() -> Iterator[None]:
    """The decode fast path of JSON tensors off while the block runs: it answers None,
    as it does for anything it does not handle, so the general path decodes."""
    saved = tensors.decode_json_numbers_fast
    tensors.decode_json_numbers_fast = lambda *args: None
    try:
        yield
    finally:
        tensors.decode_json_numbers_fast = saved
