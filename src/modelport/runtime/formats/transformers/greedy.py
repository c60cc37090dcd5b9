"""Deterministic generation: greedy decoding from a fixed seed, the reference that
``modelport push`` records in a manifest's example and validation checks again.

A chat is rendered with the tokenizer's own chat template (with the generation
prompt), as the engine renders it. The tokens produced stop at ``max_tokens`` or at
the end-of-sequence token, which is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelport.errors import InvalidInput
from modelport.runtime.types import ChatMessage

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SEED = 0


@dataclass(frozen=True)
class Greedy:
    """What greedy decoding produced."""

    prompt_tokens: int
    tokens: tuple[int, ...]
    text: str


def prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    *,
    prompt: str | None = None,
    messages: Sequence[ChatMessage] | None = None,
) -> list[int]:
    """Token ids of a prompt, or of a chat rendered with the model's chat template."""
    if messages is not None:
        if not tokenizer.chat_template:
            raise InvalidInput("the model has no chat template", code="no_chat_template")
        rendered = tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=True,
            tokenize=False,
        )
        return list(tokenizer(str(rendered), add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt or "")["input_ids"])


def generate_greedy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    prompt: str | None = None,
    messages: Sequence[ChatMessage] | None = None,
    max_tokens: int,
) -> Greedy:
    """Greedy tokens after the prompt (or chat), at most ``max_tokens``."""
    import torch

    ids = prompt_ids(tokenizer, prompt=prompt, messages=messages)
    if not ids:
        raise InvalidInput("the prompt has no tokens", code="empty_prompt")
    torch.manual_seed(SEED)
    eos = tokenizer.eos_token_id
    generate: Any = model.generate  # typed through a mixin mypy cannot follow
    with torch.inference_mode():
        out = generate(
            torch.tensor([ids], device=model.device),
            attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=model.device),
            max_new_tokens=max_tokens,
            do_sample=False,
            # The model's own sampling defaults would only be warned about: greedy
            # decoding ignores them.
            temperature=None,
            top_p=None,
            top_k=None,
            eos_token_id=eos,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
        )
    generated: list[int] = []
    for token in out[0, len(ids) :].tolist():
        if token == eos:
            break
        generated.append(int(token))
    text = str(tokenizer.decode(generated, skip_special_tokens=True))
    return Greedy(prompt_tokens=len(ids), tokens=tuple(generated), text=text)
