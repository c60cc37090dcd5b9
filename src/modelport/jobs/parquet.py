"""Parquet files of tensor batches (the ``modelport[parquet]`` extra, pyarrow): a file's
rows read shard by shard, and a shard's outputs written as a Parquet file. Pure of the
database and the jobs: it is handed a file object and the target's tensors.

A file's columns are the target's inputs, by name, no more and no fewer. A column of
numbers is an input of rank 1; a column of lists (fixed-size or not, nested for higher
ranks) an input of rank 1 + its nesting, every row's lists of one length. The leaf type
is the input's datatype exactly (a ``double`` column feeds an ``FP64`` input, not an
``FP32`` one): nothing is cast behind the caller's back. Strings never feed a tensor
batch; a dataset's split (``datasets.splits``) reads a string or binary column as a
``BYTES`` tensor of rank 1 (``ParquetRows(..., texts=True)``). A mismatch is a 400
``batch_columns_mismatch``; a file that is not Parquet, or holds nulls or no rows, a 400
``invalid_batch_file``; without pyarrow, a 400 ``parquet_unavailable``.

Memory stays bounded: ``ParquetRows.read`` decodes only the row groups a shard spans,
and a file object over a blob reads only the byte ranges pyarrow asks for (the
footer, then those row groups' column chunks).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

import numpy as np

from modelport.blobs.service import BlobRanges, BlobService
from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime.tensors import numpy_dtype

MAGIC = b"PAR1"


def is_parquet(head: bytes) -> bool:
    """Whether a file starts as a Parquet file does (its magic)."""
    return head[:4] == MAGIC


def _pyarrow() -> tuple[Any, Any, Any]:
    """``pyarrow``, ``pyarrow.parquet`` and ``pyarrow.compute``, or a clear refusal."""
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.parquet
    except ImportError:
        raise InvalidInput(
            "Parquet batches need the 'parquet' extra: pip install 'modelport[parquet]'",
            code="parquet_unavailable",
        ) from None
    return pyarrow, pyarrow.parquet, pyarrow.compute


def _mismatch(message: str) -> InvalidInput:
    return InvalidInput(message, code="batch_columns_mismatch")


def _bad_file(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_batch_file")


class BlobFile(io.RawIOBase):
    """A read-only, seekable file over a stored blob's ranges (``BlobService.open_ranges``),
    so pyarrow reads only what it asks for and never holds the whole file."""

    def __init__(self, ranges: BlobRanges) -> None:
        super().__init__()
        self._ranges = ranges
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._ranges.size}[whence]
        self._at = max(0, base + offset)
        return self._at

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._ranges.read(self._at, self._at + len(view))
        view[: len(data)] = data
        self._at += len(data)
        return len(data)


def open_file(ranges: BlobRanges) -> BinaryIO:
    """A buffered file object over a blob's ranges."""
    return io.BufferedReader(BlobFile(ranges), buffer_size=1 << 20)


def open_blob(blobs: BlobService, digest: str, *, verify: bool = True) -> BinaryIO:
    """A file object over the blob ``digest`` (``verify``: as ``BlobService.open_ranges``)."""
    return open_file(blobs.open_ranges(digest, verify=verify))


def count_rows(source: BinaryIO) -> int | None:
    """A Parquet file's rows, from its footer (None: not Parquet, or no pyarrow)."""
    try:
        _, parquet, _ = _pyarrow()
        return int(parquet.ParquetFile(source).metadata.num_rows)
    except Exception:  # not Parquet, or no pyarrow: the stage says why
        return None


class ParquetRows:
    """A Parquet file of rows for the target's ``inputs``, read a range of rows at a
    time (see the module docstring)."""

    def __init__(
        self, source: BinaryIO, inputs: Sequence[TensorSpec], *, texts: bool = False
    ) -> None:
        """``texts``: a ``BYTES`` tensor of rank 1 may be a column of strings or binaries
        (a dataset's texts, ``datasets.splits``); tensor batches keep it off."""
        pyarrow, parquet, _ = _pyarrow()
        self._texts = texts
        try:
            self._file = parquet.ParquetFile(source)
        except (pyarrow.ArrowException, OSError) as exc:
            raise _bad_file(f"not a Parquet file: {exc}") from None
        self._specs = {spec.name: spec for spec in inputs}
        schema = self._file.schema_arrow
        columns = list(schema.names)
        missing = [name for name in self._specs if name not in columns]
        extra = [name for name in columns if name not in self._specs]
        if missing or extra or len(set(columns)) != len(columns):
            raise _mismatch(
                f"the file's columns {columns} must be the target's inputs "
                f"{list(self._specs)}, each once"
            )
        for spec in inputs:
            if not (texts and _is_text(pyarrow, spec, schema.field(spec.name).type)):
                _check_type(spec, schema.field(spec.name).type)
        metadata = self._file.metadata
        self.rows = int(metadata.num_rows)
        if self.rows == 0:
            raise _bad_file("the Parquet file holds no rows")
        self._starts = [0]
        for group in range(metadata.num_row_groups):
            self._starts.append(self._starts[-1] + int(metadata.row_group(group).num_rows))

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Rows ``[start, stop)`` as one array per input (dimension 0 the rows)."""
        stop = min(stop, self.rows)
        starts = self._starts
        groups = [g for g in range(len(starts) - 1) if starts[g] < stop and starts[g + 1] > start]
        table = self._file.read_row_groups(groups, columns=list(self._specs))
        table = table.slice(start - starts[groups[0]], stop - start)
        return {
            name: _texts(table.column(name).combine_chunks())
            if self._texts and spec.datatype == "BYTES"
            else _as_array(spec, table.column(name).combine_chunks())
            for name, spec in self._specs.items()
        }


def _check_type(spec: TensorSpec, arrow_type: Any) -> None:
    """The column's nesting gives the input's rank and its leaf type the datatype."""
    pyarrow, _, _ = _pyarrow()
    types = pyarrow.types
    rank, leaf, widths = 1, arrow_type, []
    while _is_list(pyarrow, leaf):
        widths.append(leaf.list_size if types.is_fixed_size_list(leaf) else -1)
        rank, leaf = rank + 1, leaf.value_type
    want = numpy_dtype(spec.name, spec.datatype)
    try:
        got = np.dtype(leaf.to_pandas_dtype())
    except (NotImplementedError, TypeError):
        got = None
    if got != want or not (
        types.is_integer(leaf) or types.is_floating(leaf) or types.is_boolean(leaf)
    ):
        raise _mismatch(f"column '{spec.name}' holds {leaf}; the input takes {spec.datatype}")
    if rank != len(spec.shape):
        raise _mismatch(
            f"column '{spec.name}' gives tensors of rank {rank} (lists nested "
            f"{rank - 1} deep); the input has shape {list(spec.shape)}"
        )
    # Fixed-size lists are checked here; other lists as their rows are read.
    for want_width, width in zip(spec.shape[1:], widths, strict=True):
        if -1 not in (want_width, width) and want_width != width:
            raise _mismatch(
                f"column '{spec.name}' holds lists of {width}; the input has shape "
                f"{list(spec.shape)}"
            )


def _is_text(pyarrow: Any, spec: TensorSpec, arrow_type: Any) -> bool:
    """A column of strings or binaries for a ``BYTES`` tensor of rank 1."""
    types = pyarrow.types
    textual = types.is_string(arrow_type) or types.is_large_string(arrow_type)
    textual = textual or types.is_binary(arrow_type) or types.is_large_binary(arrow_type)
    if spec.datatype != "BYTES" or not textual:
        return False
    if len(spec.shape) != 1:
        raise _mismatch(
            f"column '{spec.name}' holds texts, one a row; the input has shape {list(spec.shape)}"
        )
    return True


def _texts(column: Any) -> np.ndarray:
    """A column of strings or binaries as a ``BYTES`` tensor (UTF-8 bytes, one a row)."""
    if column.null_count:
        raise _bad_file("a text column holds nulls")
    return np.array(
        [v.encode() if isinstance(v, str) else bytes(v) for v in column.to_pylist()],
        dtype=object,
    )


def _is_list(pyarrow: Any, arrow_type: Any) -> bool:
    types = pyarrow.types
    return bool(
        types.is_list(arrow_type)
        or types.is_large_list(arrow_type)
        or types.is_fixed_size_list(arrow_type)
    )


def _as_array(spec: TensorSpec, column: Any) -> np.ndarray:
    pyarrow, _, compute = _pyarrow()
    rows, dims, values = len(column), [], column
    while _is_list(pyarrow, values.type):  # one level of nesting
        if values.null_count:
            raise _bad_file(f"column '{spec.name}' holds nulls")
        lengths = compute.list_value_length(values).to_numpy(zero_copy_only=False)
        width = int(lengths[0]) if len(lengths) else 0
        if (lengths != width).any():
            raise _mismatch(f"column '{spec.name}' holds lists of different lengths")
        dims.append(width)
        values = values.flatten()
    if values.null_count:
        raise _bad_file(f"column '{spec.name}' holds nulls")
    shape = (rows, *dims)
    for want, got in zip(spec.shape[1:], dims, strict=True):
        if want != -1 and want != got:
            raise _mismatch(
                f"column '{spec.name}' gives rows of shape {list(shape[1:])}; the input has "
                f"shape {list(spec.shape)}"
            )
    array = values.to_numpy(zero_copy_only=False)
    dtype = numpy_dtype(spec.name, spec.datatype)
    return np.ascontiguousarray(array.astype(dtype, copy=False)).reshape(shape)


def write(outputs: Mapping[str, np.ndarray]) -> bytes:
    """A shard's outputs as a Parquet file: one column per output, a tensor of rank
    above 1 as fixed-size lists (nested), the form ``ParquetRows`` reads."""
    pyarrow, parquet, _ = _pyarrow()
    columns = {}
    for name, array in outputs.items():
        array = np.asarray(array)
        if array.ndim == 0:
            array = array.reshape(1)
        column = pyarrow.array(np.ascontiguousarray(array).reshape(-1))
        for width in reversed(array.shape[1:]):
            column = pyarrow.FixedSizeListArray.from_arrays(column, width)
        columns[name] = column
    sink = pyarrow.BufferOutputStream()
    parquet.write_table(pyarrow.table(columns), sink)
    return bytes(sink.getvalue().to_pybytes())
