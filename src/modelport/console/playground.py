"""The playground's form, built from a version's input schema, and the ``/v2`` request
made of what the person typed (checked here first, so a typo gets a clear message)."""

from __future__ import annotations

import math
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
            data = tensor.get("data", [])
            shown[tensor["name"]] = ", ".join(str(v) for v in data)
    fields = []
    for spec in inputs:
        field = Field(spec["name"], spec["datatype"], list(spec.get("shape", [])), "")
        value = (posted or {}).get(field.field_name, shown.get(field.name, ""))
        fields.append(Field(field.name, field.datatype, field.shape, value))
    return fields


def _values(field: Field) -> list[Any]:
    parts = [p.strip() for p in field.value.replace("\n", ",").split(",")]
    parts = [p for p in parts if p]
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
            values: list[Any] = [float(p) for p in parts]
            if not all(math.isfinite(v) for v in values):
                raise ValueError
            return values
        if field.datatype in INTEGERS:
            return [int(p) for p in parts]
        if field.datatype == "BOOL":
            return [_bool(p) for p in parts]
    except ValueError:
        raise InvalidInput(
            f"input '{field.name}' must be comma-separated {field.datatype} values",
            code=BAD_INPUT,
            field=field.name,
        ) from None
    return parts  # BYTES: each value a string


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(text)


def _shape(field: Field, count: int) -> list[int]:
    """The schema's shape with its one variable dimension sized to fit ``count`` values
    (several variable dimensions: all but the first are 1)."""
    shape = list(field.shape) or [count]
    variable = [i for i, d in enumerate(shape) if d < 0]
    for i in variable[1:]:
        shape[i] = 1
    fixed = math.prod(d for d in shape if d >= 0)
    if variable:
        if fixed == 0 or count % fixed:
            raise InvalidInput(
                f"input '{field.name}' needs a multiple of {fixed} values for shape "
                f"{field.shape_text}, got {count}",
                code=BAD_INPUT,
                field=field.name,
            )
        shape[variable[0]] = count // fixed
    elif fixed != count:
        raise InvalidInput(
            f"input '{field.name}' needs {fixed} values for shape {field.shape_text}, got {count}",
            code=BAD_INPUT,
            field=field.name,
        )
    return shape


def request_body(fields: list[Field]) -> dict[str, Any]:
    """The ``/v2`` infer request of the filled-in form."""
    tensors = []
    for field in fields:
        values = _values(field)
        tensors.append(
            {
                "name": field.name,
                "datatype": field.datatype,
                "shape": _shape(field, len(values)),
                "data": values,
            }
        )
    return {"inputs": tensors}


def price_per_call_micros(rules: list[dict[str, Any]], version: str) -> int | None:
    """What one call costs by the model's per-prediction price rule for ``version``
    (a version's own rule before the model's), in micros; None when no such rule.
    Rules priced by other units (tokens, compute) add to this by what the call used."""
    matching = [
        r for r in rules if r.get("unit") == "prediction" and r.get("version") in (None, version)
    ]
    if not matching:
        return None
    own = [r for r in matching if r.get("version") == version]
    chosen = max(own or matching, key=lambda r: str(r.get("effective_from")))
    return int(chosen["unit_price_micros"]) // max(int(chosen.get("per_units") or 1), 1)


def price_of_tokens_micros(rules: list[dict[str, Any]], usage: dict[str, int]) -> int | None:
    """What a chat's tokens cost by the model's token price rules (the model-wide rule
    of each unit), in micros; None when the model has no token prices."""
    quantities = {
        "input_token": int(usage.get("prompt_tokens", 0)),
        "output_token": int(usage.get("completion_tokens", 0)),
    }
    total = None
    for unit, quantity in quantities.items():
        matching = [r for r in rules if r.get("unit") == unit and r.get("version") is None]
        if not matching:
            continue
        rule = max(matching, key=lambda r: str(r.get("effective_from")))
        per = max(int(rule.get("per_units") or 1), 1)
        total = (total or 0) + int(rule["unit_price_micros"]) * quantity // per
    return total
