"""``ModelStreamInfer`` on a real generative model: a tiny random-weight Llama (built by
the test, ``tests/runtime/formats/transformers/packages.py``) published as a
``transformers`` version and run by the continuous-batching engine; its streamed text is
what ``transformers``' own greedy generation says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelport.api.grpc.codec import TEXT_INPUT
from tests.api_grpc.conftest import GrpcWorld
from tests.api_grpc.test_stream import Stream
from tests.conftest import ADMIN_KEY
from tests.registry.helpers import put_blob
from tests.runtime.formats.transformers.manifests import file_entries
from tests.runtime.formats.transformers.packages import build_tiny_llama, package_files

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# torch and a model's first load take seconds on a busy machine: not for the fast tier.
pytestmark = [pytest.mark.slow]

PROMPT = "the quick brown fox"
TOKENS = 6


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), chat=False)


@pytest.fixture
def llama_world(grpc_world: GrpcWorld, tiny_llama: Path) -> Iterator[GrpcWorld]:
    files = package_files(tiny_llama)
    for path in files.values():
        put_blob(grpc_world.services.blob_store, path.read_bytes())
    admin = httpx.Client(base_url=grpc_world.http, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with admin:
        admin.post("/api/tenants", json={"slug": "acme"})
        created = admin.post(
            "/api/models",
            json={"owner": "acme", "name": "llama", "license": "MIT", "task": "completions"},
        )
        assert created.status_code == 201, created.text
        manifest = {
            "format": "transformers",
            "files": file_entries(files),
            "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
            "license": "MIT",
            "runtime": {"task": "completions"},
        }
        published = admin.post(
            "/api/models/acme/llama/versions", json={"version": "1", "manifest": manifest}
        )
        assert published.status_code == 201, published.text
    yield grpc_world


def greedy_text(folder: Path, prompt: str, n: int) -> str:
    """What ``transformers``' own greedy generation continues ``prompt`` with."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=n,
        do_sample=False,
        pad_token_id=tokenizer.eos_token_id,
    )
    text: str = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    return text


def test_a_tiny_llama_streams_its_greedy_text(llama_world: GrpcWorld, tiny_llama: Path) -> None:
    services = llama_world.services
    assert services.grpc is not None and TEXT_INPUT == "text_input"
    stream = Stream(services.grpc.port, ADMIN_KEY)
    try:
        stream.send("acme/llama", PROMPT, max_tokens=TOKENS, temperature=0.0)
        chunks, final = stream.call()
    finally:
        stream.close()
    assert final["output_tokens"] <= TOKENS and final["input_tokens"] > 0
    assert len(chunks) >= 1
    assert "".join(chunks) == greedy_text(tiny_llama, PROMPT, TOKENS)
    services.metering.deliver()
    units = {e.event.unit for e in services.metering.ledger.entries()}
    assert {"input_token", "output_token"} <= units
