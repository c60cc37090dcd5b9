"""The inputs of a call, as ``infer`` and ``jobs submit`` both read them.

One parser, so that what works for a quick prediction works for a job: a JSON object by
input name (``{"x": [[1, 2]]}``), an Open Inference Protocol request
(``{"inputs": [{...}]}``) or its list of tensors, a ``.json`` or ``.npy`` file (``.npy``:
one-input models), ``-`` for stdin, and ``--input NAME=FILE.npy|JSON``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import numpy as np
import orjson

from modelport.client import Client
from modelport.client.predict import decode_outputs, encode_inputs, needs_metadata


def _load_npy(path: str) -> np.ndarray:
    try:
        array = np.load(Path(path), allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"cannot read {path} as .npy: {exc}") from None
    if not isinstance(array, np.ndarray):
        raise click.BadParameter(f"{path} is not a single .npy array")
    return array


def _load_json(text: str, where: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"{where} is not JSON: {exc}") from None


def _from_document(doc: Any, where: str) -> dict[str, Any]:
    """``{"x": [[...]]}`` by input name, or an OIP request ``{"inputs": [{...}]}`` (or
    its bare list of tensors)."""
    if isinstance(doc, list):
        doc = {"inputs": doc}
    if isinstance(doc, dict) and isinstance(doc.get("inputs"), list):
        tensors = {}
        for tensor in doc["inputs"]:
            if not isinstance(tensor, dict) or "name" not in tensor:
                raise click.BadParameter(f"{where}: every input needs a name")
            decoded = decode_outputs({"outputs": [tensor]}) if "datatype" in tensor else None
            tensors[tensor["name"]] = (
                decoded[tensor["name"]] if decoded is not None else tensor.get("data")
            )
        return tensors
    if isinstance(doc, dict) and doc:
        return dict(doc)
    raise click.BadParameter(
        f'{where}: expected {{"input name": [[...]], ...}} or {{"inputs": [...]}}'
    )


def read_inputs(
    client: Client, target: str, source: str | None, named: tuple[str, ...]
) -> dict[str, Any]:
    """The inputs by name: arrays, or lists that take the datatype the target declares."""
    inputs: dict[str, Any] = {}
    if source is not None:
        if source == "-":
            inputs |= _from_document(_load_json(sys.stdin.read(), "stdin"), "stdin")
        elif source.endswith(".npy"):
            declared = client.predict.metadata(target).get("inputs", [])
            if len(declared) != 1:
                names = ", ".join(t["name"] for t in declared)
                raise click.BadParameter(
                    f"{target} has inputs {names}: name each, --input NAME=FILE.npy"
                )
            inputs[declared[0]["name"]] = _load_npy(source)
        elif Path(source).is_file():
            inputs |= _from_document(_load_json(Path(source).read_text(), source), source)
        else:
            inputs |= _from_document(_load_json(source, "INPUTS"), "INPUTS")
    for item in named:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r}: use NAME=FILE.npy or NAME=JSON")
        inputs[name] = _load_npy(value) if value.endswith(".npy") else _load_json(value, name)
    if not inputs:
        raise click.BadParameter("give the inputs: a JSON object, a .json or .npy file, or --input")
    return inputs


def oip_tensors(client: Client, target: str, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """``read_inputs``' answer as OIP JSON tensors; lists take the declared datatypes."""
    declared = client.predict.metadata(target) if needs_metadata(inputs) else None
    try:
        return encode_inputs(inputs, declared)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
