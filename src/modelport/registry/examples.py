"""Publish-time checks of a manifest's examples: each agrees with itself and with the
declared inputs and outputs.

Validation runs the examples later; what can be told from the manifest alone is refused
at publish instead, before a version number is spent on it:

- every example gives each declared input once, and no other;
- its expected outputs are declared outputs (a subset is fine), each at most once;
- each tensor has its declared datatype and a shape that fits the declared one (same
  rank, equal fixed dimensions, ``-1`` matching any);
- its data agrees with its shape and datatype (element count, nesting, value kinds
  and ranges), as a request's would have to.

Errors are ``InvalidInput`` with code ``invalid_example`` and ``field`` naming the tensor
(``manifest.examples.<i>.inputs.<j>``).
"""

from __future__ import annotations

from collections.abc import Sequence

from modelport.errors import InvalidInput
from modelport.manifest import ExampleTensor, Manifest, TensorSpec
from modelport.runtime.tensors import decode_json_tensor


def check_examples(manifest: Manifest) -> None:
    """Raise ``invalid_example`` at the first example tensor that cannot be right."""
    for index, example in enumerate(manifest.examples):
        _check(example.inputs, manifest.inputs, index, "inputs", every=True)
        _check(example.outputs, manifest.outputs, index, "outputs", every=False)


def _check(
    tensors: Sequence[ExampleTensor],
    specs: Sequence[TensorSpec],
    index: int,
    group: str,
    *,
    every: bool,
) -> None:
    role = f"example {index} {group[:-1]}"
    declared = {spec.name: spec for spec in specs}
    seen: set[str] = set()
    for position, tensor in enumerate(tensors):
        field = f"manifest.examples.{index}.{group}.{position}"
        spec = declared.get(tensor.name)
        if spec is None:
            raise _invalid(
                f"{role} '{tensor.name}' is not declared; the model's {group} are "
                + ", ".join(repr(name) for name in declared),
                field,
            )
        if tensor.name in seen:
            raise _invalid(f"{role} '{tensor.name}' is given twice", field)
        seen.add(tensor.name)
        if tensor.datatype != spec.datatype:
            raise _invalid(
                f"{role} '{tensor.name}' is {tensor.datatype}, but the manifest declares "
                f"{spec.datatype}",
                field,
            )
        if any(dim < 0 for dim in tensor.shape) or not _fits(spec.shape, tensor.shape):
            raise _invalid(
                f"{role} '{tensor.name}' has shape {tensor.shape}, which does not fit the "
                f"declared shape {spec.shape} (-1 matches any size)",
                field,
            )
        try:
            decode_json_tensor(tensor.name, tensor.datatype, tensor.shape, tensor.data, role=role)
        except InvalidInput as exc:
            raise _invalid(exc.message, field) from None
    if every and len(seen) != len(declared):
        missing = next(name for name in declared if name not in seen)
        raise _invalid(
            f"example {index} lacks input '{missing}'; every example gives every input",
            f"manifest.examples.{index}.inputs",
        )


def _fits(declared: Sequence[int], actual: Sequence[int]) -> bool:
    return len(declared) == len(actual) and all(
        want in (-1, got) for want, got in zip(declared, actual, strict=True)
    )


def _invalid(message: str, field: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_example", field=field)
