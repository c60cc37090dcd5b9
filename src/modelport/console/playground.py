"""The playground's form, built from a version's input schema, and the ``/v2`` request
made of what the person typed (checked here first, so a typo gets a clear message)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidInput

BAD_INPUT = "invalid_playground_input"
MAX_VALUES = 65_536
"""More values than a person types: the form is for trying a model, not for bulk calls."""

FLOATS = {"FP16", "FP32", "FP64"}
INTEGERS = {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"}


@dataclass(frozen=True)
class Field:
    """One input of the form: its tensor's name, type and shape, and the text shown."""

    name: str
    datatype: str
    shape: list[int]
    value: str
    example: str | None = None
    """The manifest example's text, when the version has one."""

    @property
    def accepted(self) -> str:
        """Text the form takes for this input, on one line: the example's, else a row
        of counting numbers of the schema's width."""
        if self.example:
            return " ".join(self.example.split("\n"))
        width = math.prod(d for d in self.shape[1:] if d > 0) if len(self.shape) > 1 else 0
        width = width or max(self.shape[0] if self.shape else 0, 1)
        if self.datatype == "BOOL":
            row = ["true"] * width
        elif self.datatype == "BYTES":
            row = ['"text"'] * width
        elif self.datatype in FLOATS:
            row = [f"{i + 1}.0" for i in range(width)]
        else:
            row = [str(i + 1) for i in range(width)]
        return "[" + ", ".join(row) + "]"

    @property
    def field_name(self) -> str:
        return f"input:{self.name}"

    @property
    def shape_text(self) -> str:
        return "[" + ", ".join("any" if d < 0 else str(d) for d in self.shape) + "]"


def form_fields(
    inputs: list[dict[str, Any]],
    example: dict[str, Any] | None,
    posted: dict[str, str] | None = None,
) -> list[Field]:
    """The form's fields, prefilled with what was posted, else the manifest's example."""
    shown: dict[str, str] = {}
    if example:
        for tensor in example.get("inputs", []):
            shown[tensor["name"]] = example_text(tensor)
    fields = []
    for spec in inputs:
        field = Field(spec["name"], spec["datatype"], list(spec.get("shape", [])), "")
        value = (posted or {}).get(field.field_name, shown.get(field.name, ""))
        fields.append(Field(field.name, field.datatype, field.shape, value, shown.get(field.name)))
    return fields


def example_text(tensor: dict[str, Any]) -> str:
    """An example tensor as the form shows it: one JSON array a row when it has several
    rows, else its values separated by commas (either way, what ``request_body`` takes)."""
    values = _flat(tensor.get("data", []))
    shape = [int(d) for d in tensor.get("shape") or [] if isinstance(d, int)]
    width = math.prod(shape[1:]) if len(shape) > 1 else 0
    if width and len(values) > width and len(values) % width == 0:
        rows = [values[i : i + width] for i in range(0, len(values), width)]
        return ",\n".join(json.dumps(row) for row in rows)
    return ", ".join(str(v) for v in values)


def _flat(data: Any) -> list[Any]:
    if isinstance(data, list):
        return [v for item in data for v in _flat(item)]
    return [data]


def _nesting(data: Any) -> list[int]:
    """The shape nested lists claim, read down their first elements."""
    shape: list[int] = []
    while isinstance(data, list):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return shape


def _parts(field: Field) -> tuple[list[Any], list[int] | None]:
    """The typed-in values, and the shape their brackets give (None: no brackets).

    Rows may be written as JSON arrays (``[5.1, 3.5], [6.7, 3.0]``, one a line or not,
    or all inside one array); otherwise values are separated by commas or lines."""
    text = field.value.strip()
    if "[" not in text:
        return _comma_separated(text), None
    joined = re.sub(r"\]\s*\[", "], [", text)  # rows on their own lines, no commas
    for candidate in (joined, f"[{joined}]"):
        try:
            nested = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(nested, list):
            break
    else:
        if field.datatype == "BYTES":  # text that holds a bracket, not JSON rows
            return _comma_separated(text), None
        raise _not_values(field)
    values, shape = _flat(nested), _nesting(nested)
    if len(values) != math.prod(shape) or any(isinstance(v, list | dict) for v in values):
        raise InvalidInput(
            f"input '{field.name}' has rows of different lengths; "
            f"write every row with the same number of values, e.g. {field.accepted}",
            code=BAD_INPUT,
            field=field.name,
        )
    return values, shape


def _comma_separated(text: str) -> list[Any]:
    parts = [p.strip() for p in text.replace("\n", ",").split(",")]
    return [p for p in parts if p]


def _values(field: Field) -> tuple[list[Any], list[int] | None]:
    parts, nested_shape = _parts(field)
    if not parts:
        raise InvalidInput(f"input '{field.name}' is empty", code=BAD_INPUT, field=field.name)
    if len(parts) > MAX_VALUES:
        raise InvalidInput(
            f"input '{field.name}' has more than {MAX_VALUES} values",
            code=BAD_INPUT,
            field=field.name,
        )
    try:
        if field.datatype in FLOATS:
            values: list[Any] = [_float(p) for p in parts]
            if not all(math.isfinite(v) for v in values):
                raise ValueError
            return values, nested_shape
        if field.datatype in INTEGERS:
            return [_int(p) for p in parts], nested_shape
        if field.datatype == "BOOL":
            return [_bool(p) for p in parts], nested_shape
    except ValueError:
        raise _not_values(field) from None
    return [str(p) for p in parts], nested_shape  # BYTES: each value a string


def _not_values(field: Field) -> InvalidInput:
    return InvalidInput(
        f"input '{field.name}' must be {field.datatype} values separated by commas, "
        f"or rows written as JSON arrays, e.g. {field.accepted}",
        code=BAD_INPUT,
        field=field.name,
    )


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(value)
    return float(value)


def _int(value: Any) -> int:
    if isinstance(value, bool | float) or not isinstance(value, str | int):
        raise ValueError(value)
    return int(value)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(value)


def _shape(field: Field, count: int, nested: list[int] | None = None) -> list[int]:
    """The shape the brackets gave, when it has the schema's rank and fits it; else the
    schema's shape with its one variable dimension sized to fit ``count`` values
    (several variable dimensions: all but the first are 1)."""
    if nested is not None and field.shape and len(nested) == len(field.shape):
        if any(d >= 0 and d != n for d, n in zip(field.shape, nested, strict=True)):
            raise InvalidInput(
                f"input '{field.name}' has shape {field.shape_text}; its rows written "
                f"in brackets give {nested}, e.g. {field.accepted}",
                code=BAD_INPUT,
                field=field.name,
            )
        return nested
    shape = list(field.shape) or [count]
    variable = [i for i, d in enumerate(shape) if d < 0]
    for i in variable[1:]:
        shape[i] = 1
    fixed = math.prod(d for d in shape if d >= 0)
    if variable:
        if fixed == 0 or count % fixed:
            raise InvalidInput(
                f"input '{field.name}' needs a multiple of {fixed} values for shape "
                f"{field.shape_text}, got {count}; e.g. {field.accepted}",
                code=BAD_INPUT,
                field=field.name,
            )
        shape[variable[0]] = count // fixed
    elif fixed != count:
        raise InvalidInput(
            f"input '{field.name}' needs {fixed} values for shape {field.shape_text}, "
            f"got {count}; e.g. {field.accepted}",
            code=BAD_INPUT,
            field=field.name,
        )
    return shape


def request_body(fields: list[Field]) -> dict[str, Any]:
    """The ``/v2`` infer request of the filled-in form."""
    tensors = []
    for field in fields:
        values, nested_shape = _values(field)
        tensors.append(
            {
                "name": field.name,
                "datatype": field.datatype,
                "shape": _shape(field, len(values), nested_shape),
                "data": values,
            }
        )
    return {"inputs": tensors}


def body_rows(fields: list[Field], body: dict[str, Any]) -> int:
    """The rows of the form's request (``request_body``): dimension 0 of the inputs
    declared with a variable first dimension, 1 when there are none."""
    rows = 1
    for field, tensor in zip(fields, body["inputs"], strict=True):
        if field.shape and field.shape[0] < 0 and tensor["shape"]:
            rows = max(rows, int(tensor["shape"][0]))
    return rows
