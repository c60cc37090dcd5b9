"""Generative engine fixtures: a real byte-level BPE tokenizer trained here (with a chat
template and an end-of-sequence token) and tiny random-weight Llama models."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from collections.abc import Callable, Iterator

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

from modelport.runtime.generative.engine import EngineConfig  # noqa: E402
from modelport.runtime.generative.metrics import GenerationMetrics  # noqa: E402
from modelport.runtime.generative.torch_engine import TorchGenerativeEngine  # noqa: E402

torch.set_num_threads(1)

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Continuous batching decodes every running sequence together, one token per step.",
    "A stream of chunks arrives in order; a cancelled stream frees its memory.",
    "Numbers 0123456789 and punctuation: , . ; ! ? ( ) [ ] { } - + = / * & % $ # @",
    "Hello world! How are you today? I am fine, thank you very much.",
]


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def tiny_llama(vocab_size: int, seed: int = 0) -> LlamaForCausalLM:
    """A 2-layer Llama with random weights; a wide initialisation keeps the logits far
    apart, so greedy choices do not hinge on rounding."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.2,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=None,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    return tiny_llama(len(tokenizer))


EngineFactory = Callable[..., TorchGenerativeEngine]


@pytest.fixture
def make_engine(
    model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> Iterator[EngineFactory]:
    """Engines over the tiny model (unloaded after the test); ``kv_tokens`` sizes the
    budget in tokens."""
    engines: list[TorchGenerativeEngine] = []

    def make(kv_tokens: int = 2048, **options: object) -> TorchGenerativeEngine:
        from modelport.runtime.generative.kv import kv_bytes_per_token

        per_token = kv_bytes_per_token(model.config, model.dtype)
        config = EngineConfig(
            kv_budget_bytes=kv_tokens * per_token,
            context_length=int(options.pop("context_length", 512)),  # type: ignore[call-overload]
            **options,  # type: ignore[arg-type]
        )
        engine = TorchGenerativeEngine(
            model, tokenizer, config, name="acme/tiny:1", metrics=GenerationMetrics()
        )
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.unload()
