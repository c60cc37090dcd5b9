"""``modelport demo``: start the platform and walk through publishing and calling a real model.

It serves on HOST:PORT from a local home folder, builds a small ONNX classifier,
then drives the platform exactly as a user would, over HTTP: ``push`` (upload and
publish), validation and approval, an alias, ``models list``, ``pull``, and an
Open Inference Protocol prediction. It keeps serving until interrupted, printing
what to try next.
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
import orjson

from modelport.cli.application import Application

MODEL = "demo/iris-classifier"
VERSION = "1"
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
EXAMPLE_ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]


def build_demo_package(folder: Path) -> None:
    """Write model.onnx (4 features → 3 class probabilities) and its manifest.json.

    The manifest's example output is computed here with onnxruntime, so validation
    and warm-up check the platform against an independent run of the same graph.
    """
    import onnxruntime as ort

    from modelport.testing import mlp, save

    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / "model.onnx"
    save(mlp(n_features=4, hidden=16, n_classes=3, seed=7), model_path)
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    features = np.asarray(EXAMPLE_ROWS, dtype=np.float32)
    (probabilities,) = session.run(["probabilities"], {"features": features})
    manifest: dict[str, Any] = {
        "format": "onnx",
        "files": [],  # push fills in path, digest and size
        "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}],
        "license": "Apache-2.0",
        "resources": {"max_batch_size": 64, "hardware": ["cpu"]},
        "examples": [
            {
                "inputs": [
                    {"name": "features", "datatype": "FP32", "shape": [2, 4], "data": EXAMPLE_ROWS}
                ],
                "outputs": [
                    {
                        "name": "probabilities",
                        "datatype": "FP32",
                        "shape": [2, 3],
                        "data": probabilities.reshape(-1).tolist(),
                    }
                ],
                "tolerance": {"atol": 1e-5, "rtol": 1e-4},
            }
        ],
        "description": "A tiny iris-style classifier: " + ", ".join(FEATURES) + " → 3 classes.",
        "tags": ["demo", "tabular"],
    }
    (folder / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


def _admin_key(home: Path) -> str:
    """The demo's admin key, kept in its home so a rerun keeps working with the same key."""
    path = home / "admin-key"
    if path.exists():
        return path.read_text().strip()
    home.mkdir(parents=True, exist_ok=True)
    key = "mp_admin_" + secrets.token_urlsafe(32)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def _start_server(home: Path, host: str, port: int, admin_key: str) -> Any:
    import uvicorn

    from modelport.app import build_app
    from modelport.config import Settings

    settings = Settings(home=home, admin_key=admin_key)
    server = uvicorn.Server(
        uvicorn.Config(build_app(settings), host=host, port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="modelport-demo-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise click.ClickException(f"the server could not start on {host}:{port}")
        time.sleep(0.05)
    return server


def _step(app: Application, text: str) -> None:
    app.terminal.info(f"\n[bold cyan]▶ {text}[/bold cyan]")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option(
    "--home",
    default=".modelport-demo",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the demo keeps its database, blobs and keys.",
)
@click.option("--no-serve", is_flag=True, help="Stop after the walkthrough instead of serving.")
@click.pass_context
def demo(ctx: click.Context, host: str, port: int, home: Path, no_serve: bool) -> None:
    """Run the platform with a demo model published, validated, approved and called."""
    from modelport.cli.models.list import list_models
    from modelport.cli.pull import pull
    from modelport.cli.push import push

    parent: Application = ctx.obj
    home = home.resolve()
    key = _admin_key(home)
    server = _start_server(home, host, port, key)
    url = f"http://{host}:{port}"
    app = Application(url=url, api_key=key, as_json=parent.terminal.as_json)
    ctx.obj = app
    try:
        _step(app, f"modelport is serving on {url} (state in {home})")
        package = home / "demo-model"
        build_demo_package(package)
        _step(app, f"modelport push {package} --model {MODEL} --version {VERSION}")
        ctx.invoke(
            push,
            folder=package,
            model_ref=MODEL,
            version=VERSION,
            task="tabular-classification",
            chunk_size=16 << 20,
        )
        _walkthrough(ctx, app, list_models, pull, home)
    except BaseException:
        server.should_exit = True
        raise
    _instructions(app, url, key)
    if no_serve:
        server.should_exit = True
        return
    try:
        while not server.should_exit:
            time.sleep(0.5)
    except KeyboardInterrupt:
        server.should_exit = True


def _walkthrough(
    ctx: click.Context, app: Application, list_models: Any, pull: Any, home: Path
) -> None:
    owner, name = MODEL.split("/")
    base = f"/api/models/{owner}/{name}/versions/{VERSION}"
    state = app.check(app.http.get(base))["state"]
    for target, reason in (
        ("validated", "demo: files verified, model loaded, example reproduced"),
        ("approved", "demo: approved for use"),
    ):
        if state in ("candidate", "validated") and state != target:
            _step(app, f"modelport versions transition {MODEL}:{VERSION} --to {target}")
            body = app.check(
                app.http.post(f"{base}/transitions", json={"to": target, "reason": reason})
            )
            state = body["state"]
            app.terminal.success(f"{MODEL}:{VERSION} is {state}")
    _step(app, f"modelport alias set {MODEL} default {VERSION}")
    app.check(
        app.http.put(f"/api/models/{owner}/{name}/aliases/default", json={"version": VERSION})
    )
    app.terminal.success(f"default → {VERSION}")
    _step(app, "modelport models list")
    ctx.invoke(list_models, limit=50)
    target = home / "pulled"
    _step(app, f"modelport pull {MODEL}:{VERSION} {target}")
    ctx.invoke(pull, ref=f"{MODEL}:{VERSION}", folder=target)
    _step(app, f"POST /v2/models/{MODEL}/infer (Open Inference Protocol)")
    request = {
        "inputs": [
            {"name": "features", "datatype": "FP32", "shape": [1, 4], "data": EXAMPLE_ROWS[0]}
        ]
    }
    result = app.check(app.http.post(f"/v2/models/{MODEL}/infer", json=request))
    probabilities = result["outputs"][0]["data"]
    app.terminal.info(
        f"model_version={result.get('model_version')} probabilities="
        + ", ".join(f"{p:.4f}" for p in probabilities)
    )


def _instructions(app: Application, url: str, key: str) -> None:
    if app.terminal.as_json:
        app.terminal.json({"url": url, "admin_key": key, "model": MODEL, "version": VERSION})
        return
    app.terminal.info(
        f"""
[bold]Try it[/bold] (the server keeps running; Ctrl-C stops it):

  export MODELPORT_URL={url} MODELPORT_API_KEY={key}
  .venv/bin/modelport models show {MODEL}
  .venv/bin/modelport versions list {MODEL}
  curl -s -H "Authorization: Bearer $MODELPORT_API_KEY" {url}/v2/models/{MODEL}
  curl -s -H "Authorization: Bearer $MODELPORT_API_KEY" -H 'Content-Type: application/json' \\
       -d '{{"inputs":[{{"name":"features","datatype":"FP32","shape":[1,4],"data":[6.7,3.0,5.2,2.3]}}]}}' \\
       {url}/v2/models/{MODEL}/infer
  curl -s {url}/metrics | grep modelport_
  open {url}/api/docs for the platform API
"""
    )
