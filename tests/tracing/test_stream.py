"""A ``/v1`` stream's trace, on a tiny random-weight Llama served by the transformers
engine: the server span lasts the whole stream, the steps before the first chunk and the
steps run at its end are its children, and it carries the time to first token and the
tokens."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modelport.observability import tracing
from tests.metering.conftest import approve
from tests.registry.helpers import put_blob
from tests.tracing.conftest import Traced, children, one

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from tests.runtime.formats.transformers.manifests import file_entries  # noqa: E402
from tests.runtime.formats.transformers.packages import build_tiny_llama, package_files  # noqa: E402

MAX_TOKENS = 5


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def test_a_stream_has_its_steps_and_first_token_and_tokens(
    traced: Traced, tiny_llama: Path
) -> None:
    files = package_files(tiny_llama)
    for path in files.values():
        put_blob(traced.services.blob_store, path.read_bytes())
    client, services = traced.client, traced.services
    services.tenancy.create_tenant("acme", actor="admin")
    created = client.post(
        "/api/models",
        json={
            "owner": "acme",
            "name": "tiny",
            "license": "MIT",
            "visibility": "public",
            "task": "chat",
        },
    )
    assert created.status_code == 201, created.text
    manifest = {
        "format": "transformers",
        "files": file_entries(files),
        "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
        "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
        "license": "MIT",
        "runtime": {"task": "chat", "kv_cache_bytes": 8 << 20, "context_length": 128},
    }
    published = client.post(
        "/api/models/acme/tiny/versions", json={"version": "1", "manifest": manifest}
    )
    assert published.status_code == 201, published.text
    approve(services, "acme", "tiny", "1")
    services.tenancy.create_tenant("beta", actor="admin")
    services.tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
    key = services.tenancy.create_key("beta", "app", name="test", actor="admin").secret
    traced.clear()
    body = {
        "model": "acme/tiny",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    usage = None
    with client.stream(
        "POST", "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[len("data: ") :])
                usage = event.get("usage") or usage
    assert usage is not None
    spans = traced.spans()
    server = one(spans, "POST /v1/chat/completions")
    steps = [span.name for span in children(spans, server)]
    assert steps == [
        "authorize",
        "admit",
        "moderate",
        "reserve",
        "dispatch",
        "record",
        "settle",
    ]
    attributes = server.attributes
    assert attributes is not None
    assert attributes[tracing.FIRST_TOKEN_MS] > 0  # type: ignore[operator]
    assert attributes[tracing.OUTPUT_TOKENS] == usage["completion_tokens"]
    assert attributes[tracing.INPUT_TOKENS] == usage["prompt_tokens"]
    assert str(attributes[tracing.PREDICTION_ID])
    # The last steps ran before the server span ended: it lasted the whole stream.
    (settle,) = [s for s in children(spans, server) if s.name == "settle"]
    assert settle.end_time is not None and server.end_time is not None
    assert settle.end_time <= server.end_time
