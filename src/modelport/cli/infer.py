"""``modelport infer TARGET [INPUTS]``: one quick prediction from JSON or ``.npy``."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np
import orjson

from modelport.cli.application import Application
from modelport.client.predict import decode_outputs


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
    """``{"x": [[...]]}`` by input name, or an OIP request ``{"inputs": [{...}]}``."""
    if isinstance(doc, dict) and isinstance(doc.get("inputs"), list):
        tensors = {}
        for tensor in doc["inputs"]:
            if not isinstance(tensor, dict) or "name" not in tensor:
                raise click.BadParameter(f"{where}: every input needs a name")
            decoded = decode_outputs({"outputs": [tensor]}) if "datatype" in tensor else None
            tensors[tensor["name"]] = (
                decoded[tensor["name"]] if decoded is not None else tensor["data"]
            )
        return tensors
    if isinstance(doc, dict) and doc:
        return dict(doc)
    raise click.BadParameter(
        f'{where}: expected {{"input name": [[...]], ...}} or {{"inputs": [...]}}'
    )


def _read_inputs(
    app: Application, target: str, source: str | None, named: tuple[str, ...]
) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    if source is not None:
        if source == "-":
            inputs |= _from_document(_load_json(sys.stdin.read(), "stdin"), "stdin")
        elif source.endswith(".npy"):
            declared = app.client.predict.metadata(target).get("inputs", [])
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


@click.command()
@click.argument("target")
@click.argument("inputs", required=False)
@click.option(
    "--input", "named", multiple=True, help="NAME=FILE.npy or NAME=JSON (repeat for several)."
)
@click.option("--output", "outputs", multiple=True, help="Return only this output (repeatable).")
@click.pass_obj
def infer(
    app: Application,
    target: str,
    inputs: str | None,
    named: tuple[str, ...],
    outputs: tuple[str, ...],
) -> None:
    """Call TARGET (a model owner/name[:V], or an endpoint's name) once and print its
    outputs. INPUTS: a JSON object by input name ('{"x": [[1, 2]]}'), an Open Inference
    Protocol request, a .json or .npy file (one-input models), or - for stdin. Lists take
    the datatypes the model declares."""
    tensors = _read_inputs(app, target, inputs, named)
    try:
        result = app.client.predict.infer(target, tensors, outputs=outputs or None)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if app.terminal.as_json:
        app.terminal.json(result.raw)
        return
    version = f":{result.model_version}" if result.model_version else ""
    app.terminal.info(f"[bold]{result.model_name}{version}[/bold]")
    datatypes = {o["name"]: o["datatype"] for o in result.raw.get("outputs", [])}
    for name, array in result.outputs.items():
        buffer = io.StringIO()
        print(np.array2string(array, separator=", ", threshold=200), file=buffer, end="")
        app.terminal.info(f"{name} ({datatypes.get(name)} {list(array.shape)}):")
        app.terminal.out.print(buffer.getvalue(), markup=False, highlight=False)
