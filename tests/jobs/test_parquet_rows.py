"""``jobs.parquet`` alone: columns of every supported nesting and datatype read as the
declared tensors, any range of rows across row groups, and outputs written in the form
it reads back."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from modelport.errors import InvalidInput
from modelport.jobs import parquet
from modelport.manifest import TensorSpec


def spec(name: str, datatype: str, shape: list[int]) -> TensorSpec:
    return TensorSpec(name=name, datatype=datatype, shape=shape)


def file_of(table: pa.Table, row_group_size: int) -> io.BytesIO:
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=row_group_size)
    out.seek(0)
    return out


def test_every_range_of_rows_reads_as_the_declared_tensors() -> None:
    cube = np.arange(7 * 2 * 3, dtype=np.float64).reshape(7, 2, 3)
    ids = np.arange(7, dtype=np.int64) * 100
    flags = np.array([True, False] * 3 + [True])
    table = pa.table(
        {
            # rank 3: lists of fixed-size lists
            "cube": pa.array(cube.tolist(), type=pa.list_(pa.list_(pa.float64(), 3))),
            "ids": pa.array(ids),
            "flags": pa.array(flags),
        }
    )
    inputs = [
        spec("cube", "FP64", [-1, 2, 3]),
        spec("ids", "INT64", [-1]),
        spec("flags", "BOOL", [-1]),
    ]
    source = file_of(table, row_group_size=3)
    assert parquet.is_parquet(source.getvalue()[:4])
    assert parquet.count_rows(source) == 7
    rows = parquet.ParquetRows(source, inputs)
    assert rows.rows == 7
    for start, stop in [(0, 7), (0, 3), (2, 5), (5, 9), (6, 7)]:
        got = rows.read(start, stop)
        np.testing.assert_array_equal(got["cube"], cube[start:stop])
        np.testing.assert_array_equal(got["ids"], ids[start:stop])
        np.testing.assert_array_equal(got["flags"], flags[start:stop])
        assert got["cube"].dtype == np.float64 and got["cube"].flags.c_contiguous
        assert got["flags"].dtype == np.bool_


def test_outputs_are_written_as_the_reader_reads_them() -> None:
    outputs = {
        "scores": np.arange(12, dtype=np.float32).reshape(3, 2, 2),
        "label": np.array([1, 0, 1], dtype=np.int32),
    }
    data = parquet.write(outputs)
    table = pq.read_table(io.BytesIO(data))
    assert table.column_names == ["scores", "label"]
    assert table.schema.field("scores").type == pa.list_(pa.list_(pa.float32(), 2), 2)
    back = parquet.ParquetRows(
        io.BytesIO(data), [spec("scores", "FP32", [-1, 2, 2]), spec("label", "INT32", [-1])]
    ).read(0, 3)
    for name, array in outputs.items():
        np.testing.assert_array_equal(back[name], array)


def test_strings_never_feed_an_input() -> None:
    source = file_of(pa.table({"text": pa.array(["a", "b"])}), 2)
    with pytest.raises(InvalidInput) as caught:
        parquet.ParquetRows(source, [spec("text", "BYTES", [-1])])
    assert caught.value.code == "batch_columns_mismatch"


def test_bytes_that_are_not_parquet_are_refused() -> None:
    assert not parquet.is_parquet(b"\x93NUMPY")
    assert parquet.count_rows(io.BytesIO(b"PAR1 but nothing else")) is None
    with pytest.raises(InvalidInput) as caught:
        parquet.ParquetRows(io.BytesIO(b"PAR1 but nothing else"), [spec("x", "FP32", [-1])])
    assert caught.value.code == "invalid_batch_file"
