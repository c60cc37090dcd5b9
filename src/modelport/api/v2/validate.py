"""Check a parsed inference request against a version's declared inputs and outputs."""

from __future__ import annotations

from collections.abc import Sequence

from modelport.api.v2.types import InferenceRequest
from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec


def validate_request(
    request: InferenceRequest,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    max_input_bytes: int | None = None,
) -> None:
    """Raise ``InvalidInput`` unless ``request`` fits the manifest's tensor specs.

    Every declared input must be present and no other; datatypes must be equal;
    ranks must be equal and each fixed dimension equal (``-1`` matches any).
    Errors use code ``invalid_input``; a requested output the model does not
    declare gives ``unknown_output``; inputs larger than ``max_input_bytes``
    together (BYTES counted by element lengths) give ``inputs_too_large``.
    """
    specs = {spec.name: spec for spec in inputs}
    given: set[str] = set()
    for tensor in request.inputs:
        name = tensor.name
        spec = specs.get(name)
        if spec is None:
            raise InvalidInput(
                f"unknown input '{name}'; the model takes {_names(specs)}",
                code="invalid_input",
                input=name,
            )
        if tensor.datatype != spec.datatype:
            raise InvalidInput(
                f"input '{name}': expected datatype {spec.datatype}, got {tensor.datatype}",
                code="invalid_input",
                input=name,
            )
        if not _shape_matches(spec.shape, tensor.shape):
            raise InvalidInput(
                f"input '{name}': expected shape {list(spec.shape)}, got {list(tensor.shape)}",
                code="invalid_input",
                input=name,
            )
        given.add(name)
    # Every given name is declared, so one is missing exactly when fewer are given.
    if len(given) != len(specs):
        missing = next(name for name in specs if name not in given)
        raise InvalidInput(
            f"missing input '{missing}'; the model takes {_names(specs)}",
            code="invalid_input",
            input=missing,
        )
    if request.outputs:
        declared = {spec.name for spec in outputs}
        for output in request.outputs:
            if output.name not in declared:
                raise InvalidInput(
                    f"unknown output '{output.name}'; the model gives "
                    f"{_names({spec.name: spec for spec in outputs})}",
                    code="unknown_output",
                    output=output.name,
                )
    if max_input_bytes is not None:
        total = 0
        for tensor in request.inputs:
            total += tensor.nbytes
        if total > max_input_bytes:
            raise InvalidInput(
                f"inputs hold {total} bytes, above the limit of {max_input_bytes}",
                code="inputs_too_large",
            )


def _shape_matches(declared: Sequence[int], actual: Sequence[int]) -> bool:
    if len(declared) != len(actual):
        return False
    # A plain loop: all() over a generator costs more for a few dimensions.
    for want, got in zip(declared, actual, strict=True):  # noqa: SIM110
        if want != -1 and want != got:
            return False
    return True


def _names(specs: dict[str, TensorSpec]) -> str:
    return ", ".join(f"'{name}'" for name in specs)
