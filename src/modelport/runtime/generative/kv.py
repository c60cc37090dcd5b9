"""KV cache accounting: bytes per token from a model's config, and the budget ledger.

A sequence reserves its whole upper bound (prompt + ``max_tokens``) when it is
admitted, so a running sequence never runs out of KV memory mid-decode: the only
reason to take memory back from a running sequence is priority (preemption).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig


def kv_bytes_per_token(model_config: PretrainedConfig, dtype: torch.dtype) -> int:
    """Bytes one token's keys and values take over every layer:
    ``2 * layers * kv_heads * head_dim * dtype size``."""
    config: Any = model_config
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    layers = int(config.num_hidden_layers)
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    return 2 * layers * kv_heads * head_dim * int(dtype.itemsize)


class Reclaimable(Protocol):
    """KV cells held by something that gives them back on demand (a prefix cache)."""

    held_tokens: int

    def reclaim(self, tokens: int) -> None:
        """Free at least ``tokens`` of the held cells (or all of them)."""
        ...


class KvLedger:
    """Tokens of KV memory reserved out of a fixed capacity (not thread-safe: its owner
    serialises the calls). Cells a ``cache`` holds count as free: a reservation that
    needs them reclaims them first."""

    def __init__(
        self, capacity_tokens: int, bytes_per_token: int, cache: Reclaimable | None = None
    ) -> None:
        if capacity_tokens < 1:
            raise ValueError("the KV budget holds no token")
        self.capacity_tokens = capacity_tokens
        self.bytes_per_token = bytes_per_token
        self.used_tokens = 0
        self.cache = cache

    @property
    def free_tokens(self) -> int:
        return self.capacity_tokens - self.used_tokens

    @property
    def used_bytes(self) -> int:
        return self.used_tokens * self.bytes_per_token

    def fits(self, tokens: int) -> bool:
        return tokens <= self.free_tokens

    def reserve(self, tokens: int) -> None:
        if not self.fits(tokens):
            raise RuntimeError(f"{tokens} KV tokens asked, {self.free_tokens} free")
        if self.cache is not None:
            short = tokens - (self.free_tokens - self.cache.held_tokens)
            if short > 0:
                self.cache.reclaim(short)
        self.used_tokens += tokens

    def release(self, tokens: int) -> None:
        if tokens > self.used_tokens:
            raise RuntimeError(f"{tokens} KV tokens released, {self.used_tokens} reserved")
        self.used_tokens -= tokens
