"""A real generative model over the worker pool: a tiny random-weight Llama (built by
the test, ``tests/runtime/formats/transformers/packages.py``) published as a
``transformers`` chat version, placed on a worker that runs it on the
continuous-batching engine, and called through the gateway's ``/v1`` with the official
``openai`` SDK: its streamed answer is its whole one, and both are billed by the
token on the gateway, once."""

from __future__ import annotations

import platform
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope
from tests.registry.helpers import put_blob
from tests.runtime.formats.transformers.manifests import file_entries
from tests.runtime.formats.transformers.packages import build_tiny_llama, package_files
from tests.serving.conftest import Serving
from tests.serving.pool.conftest import Worker, drive, pool_of

pytest.importorskip("torch")
pytest.importorskip("transformers")

# torch and a model's first load take seconds on a busy machine: not for the fast tier.
pytestmark = [pytest.mark.slow]
platform.processor()  # the SDK's platform headers run ``uname -p``: at collection

TOKENS = 8
HELLO = [{"role": "user", "content": "hello world"}]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), chat=True)


def publish(gateway: Serving, folder: Path) -> None:
    files = package_files(folder)
    for path in files.values():
        put_blob(gateway.services.blob_store, path.read_bytes())
    registry = gateway.services.registry
    registry.create_model("acme", "llama", actor="test", license="MIT", visibility="public")
    manifest = {
        "format": "transformers",
        "files": file_entries(files),
        "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
        "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
        "license": "MIT",
        "runtime": {"task": "chat"},
    }
    registry.publish("acme", "llama", "1", manifest, actor="test")
    gateway.force_state("acme", "llama", "1", "approved")


def test_a_tiny_llama_on_a_worker_streams_what_it_answers_whole(
    gateway: Serving,
    start_worker: Callable[[str], Worker],
    tiny_llama: Path,
) -> None:
    worker = start_worker("w1")
    pool = pool_of(gateway)
    drive(gateway, [worker], lambda: len(pool.view.workers) == 1)
    tenancy = gateway.services.tenancy
    gateway.ensure_tenant("beta")
    tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
    key = tenancy.create_key("beta", "app", name="test", actor="admin").secret
    gateway.services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**7, tenant="beta")
    publish(gateway, tiny_llama)
    gateway.endpoint("chat", tenant="beta")
    deployed = gateway.deploy("chat", [("acme/llama:1", 100)], wait=False)
    drive(
        gateway, [worker], lambda: gateway.deployment("chat", deployed["id"])["state"] == "active"
    )

    client = openai.OpenAI(
        base_url="http://testserver/v1", api_key=key, http_client=gateway.client, max_retries=0
    )
    whole = client.chat.completions.create(
        model="chat",
        messages=HELLO,  # type: ignore[arg-type]
        max_tokens=TOKENS,
        temperature=0.0,
    )
    assert whole.usage is not None and 0 < whole.usage.completion_tokens <= TOKENS
    chunks = list(
        client.chat.completions.create(
            model="chat",
            messages=HELLO,  # type: ignore[arg-type]
            max_tokens=TOKENS,
            temperature=0.0,
            stream=True,
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content
    assert streamed  # the model said something

    gateway.services.metering.deliver()
    entries = Ledger(gateway.services.database).entries(tenant="beta")
    output = [e.event.quantity for e in entries if e.event.unit == "output_token"]
    inputs = [e.event.quantity for e in entries if e.event.unit == "input_token"]
    assert output == [whole.usage.completion_tokens] * 2  # each call once
    assert inputs == [whole.usage.prompt_tokens] * 2
