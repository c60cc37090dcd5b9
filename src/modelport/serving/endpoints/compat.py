"""Can a candidate stand in for the stable version? Pure comparison of tensor schemas.

A candidate is compatible when every request the stable version accepts is one
the candidate accepts, and the candidate answers with every output callers get
from the stable one:

- it takes exactly the stable version's inputs (no new required input, none dropped),
  each with the same datatype and a shape that agrees (same rank; each dimension
  equal, or -1 on either side);
- it gives at least the stable version's outputs, with the same datatype and agreeing
  shapes (extra outputs are allowed).
"""

from __future__ import annotations

from collections.abc import Sequence

from modelport.manifest import TensorSpec


def incompatibilities(
    stable_inputs: Sequence[TensorSpec],
    stable_outputs: Sequence[TensorSpec],
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> list[str]:
    """Why a version with ``inputs``/``outputs`` cannot replace the stable one (empty: it can)."""
    problems: list[str] = []
    mine = {t.name: t for t in inputs}
    for spec in stable_inputs:
        other = mine.pop(spec.name, None)
        if other is None:
            problems.append(f"input '{spec.name}' is missing")
        else:
            problems += _differences("input", spec, other)
    problems += [f"input '{name}' is new (callers do not send it)" for name in mine]
    given = {t.name: t for t in outputs}
    for spec in stable_outputs:
        other = given.get(spec.name)
        if other is None:
            problems.append(f"output '{spec.name}' is missing")
        else:
            problems += _differences("output", spec, other)
    return problems


def _differences(kind: str, want: TensorSpec, got: TensorSpec) -> list[str]:
    problems = []
    if want.datatype != got.datatype:
        problems.append(f"{kind} '{want.name}' is {got.datatype}, not {want.datatype}")
    if not shapes_agree(want.shape, got.shape):
        problems.append(f"{kind} '{want.name}' has shape {got.shape}, not {want.shape}")
    return problems


def shapes_agree(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))
