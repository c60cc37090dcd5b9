"""Batch files read from the blob store a shard at a time, in bounded memory.

- ``jsonl_shards``: a JSON Lines batch file streamed in the store's chunks, line by
  line, and handed out one shard of parsed requests at a time. Shards already done are
  counted through without being parsed.
- ``NpyRows``: a ``.npy`` file's header parsed from its first bytes, then the rows of
  one shard fetched by a ranged read (``BlobService.open_ranges``: a local file's seek,
  an S3 ``Range`` request); no other row is read.

Neither ever holds the whole file.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Generator
from dataclasses import dataclass

import numpy as np

from modelport.blobs.service import BlobRanges, BlobService
from modelport.errors import InvalidInput
from modelport.files.batch_lines import iter_stream_lines, parse_line
from modelport.files.types import BatchLine

__all__ = ["NpyRows", "Shard", "first_line", "jsonl_shards"]

_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 1 << 16
"""numpy writes headers of a few hundred bytes; a longer one is not a file of rows."""


@dataclass(frozen=True)
class Shard:
    position: int
    lines: list[BatchLine]
    """Its requests; empty for a shard in ``skip`` (its lines were only counted)."""
    rows: int


def jsonl_shards(
    blobs: BlobService, digest: str, size: int, skip: Collection[int] = ()
) -> Generator[Shard]:
    """The batch file ``digest`` in shards of ``size`` lines, streamed (see the module
    docstring); shards in ``skip`` come with their count only."""
    blob = blobs.stat(digest)
    position, rows = 0, 0
    lines: list[BatchLine] = []
    for number, raw in iter_stream_lines(blobs.read(blob)):
        if position not in skip:
            lines.append(parse_line(number, raw))
        rows += 1
        if rows == size:
            yield Shard(position, lines, rows)
            position, lines, rows = position + 1, [], 0
    if rows:
        yield Shard(position, lines, rows)


def first_line(blobs: BlobService, digest: str) -> BatchLine | None:
    """The first request of a batch file, reading no further than its line."""
    stream = iter_stream_lines(blobs.read(blobs.stat(digest)))
    try:
        found = next(stream, None)
    finally:
        stream.close()
    return None if found is None else parse_line(*found)


def _refuse(problem: str) -> InvalidInput:
    return InvalidInput(f"not a .npy file of rows: {problem}", code="invalid_batch_file")


class NpyRows:
    """The rows of a stored ``.npy`` file, read by range (see the module docstring).

    Refused (``invalid_batch_file``): not ``.npy``, object (pickled) data, Fortran order
    (a row is not contiguous), no rows, or fewer bytes than the header promises.
    """

    @classmethod
    def open(cls, blobs: BlobService, digest: str, *, verify: bool = True) -> NpyRows:
        """The rows of the blob ``digest`` (``verify``: as ``BlobService.open_ranges``)."""
        return cls(blobs.open_ranges(digest, verify=verify))

    def __init__(self, ranges: BlobRanges) -> None:
        self._ranges = ranges
        head = self._ranges.read(0, 10)
        if len(head) < 10 or head[:6] != _MAGIC:
            raise _refuse("no .npy magic")
        major = head[6]
        if major == 1:
            start, length = 10, int.from_bytes(head[8:10], "little")
        elif major in (2, 3):
            start = 12
            length = int.from_bytes(self._ranges.read(8, 12), "little")
        else:
            raise _refuse(f"format version {major}")
        if length > _MAX_HEADER:
            raise _refuse(f"a header of {length} bytes")
        text = self._ranges.read(start, start + length).decode("latin1")
        try:
            header = ast.literal_eval(text)
            dtype = np.dtype(np.lib.format.descr_to_dtype(header["descr"]))
            shape = tuple(int(d) for d in header["shape"])
            fortran = bool(header["fortran_order"])
        except (ValueError, SyntaxError, KeyError, TypeError) as exc:
            raise _refuse(f"an unreadable header ({exc})") from None
        if dtype.hasobject:
            raise _refuse("object data (pickles are not read)")
        if not shape or shape[0] == 0:
            raise InvalidInput("the .npy file holds no rows", code="invalid_batch_file")
        if fortran and len(shape) > 1:
            raise _refuse("Fortran order (save it C-contiguous)")
        self.dtype = dtype
        self.shape = shape
        self.offset = start + length
        self.row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        if self.offset + self.rows * self.row_bytes > self._ranges.size:
            raise _refuse(f"{self._ranges.size} bytes hold fewer than {self.rows} rows")

    @property
    def rows(self) -> int:
        return self.shape[0]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` (clipped to the file), fetched alone."""
        stop = min(stop, self.rows)
        count = max(0, stop - start)
        data = self._ranges.read(
            self.offset + start * self.row_bytes, self.offset + stop * self.row_bytes
        )
        # A copy: the shard is handed to the runtime, which may write into it.
        return (
            np.frombuffer(data, dtype=self.dtype, count=count * self._per_row())
            .reshape((count, *self.shape[1:]))
            .copy()
        )

    def _per_row(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64))
