"""``modelport infer TARGET [INPUTS]``: one quick prediction from JSON or ``.npy``."""

from __future__ import annotations

import io

import click
import numpy as np

from modelport.cli.application import Application
from modelport.cli.inputs import read_inputs


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
    tensors = read_inputs(app.client, target, inputs, named)
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
