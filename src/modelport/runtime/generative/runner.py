"""The model steps of the engine: prefill of joining sequences, one batched decode.

KV layout: per layer one preallocated pool of token slots (``[slots + 1, kv_heads,
head_dim]`` for keys and for values) sized by the version's KV budget. A sequence gets
its slots (prompt + ``max_tokens`` of them, any of the pool's, not contiguous) when it
is admitted and gives them back when it leaves. ``SlotCache`` is a ``transformers``
``Cache`` whose ``update`` writes each row's new keys and values at that row's own
slots and hands attention the row's past keys gathered up to the longest row of the
step, with a per-step 4D mask hiding the padding: a step costs the rows' work, and a
sequence can join or leave between any two steps without touching the others. The
last pool row is a scratch slot that absorbs the writes of padding positions.

Prefill rows are left-padded to the longest prompt of the step, so that the model's
own head computes every row's logits at the last position only
(``logits_to_keep=1``); a preempted sequence is recomputed from its prompt and the
tokens it had generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, CacheLayerMixin


class _SlotLayer(CacheLayerMixin):
    """One layer's pools; what ``update`` writes and reads is set per step."""

    is_compileable = False
    is_sliding = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, plan: _StepPlan) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.keys, self.values = keys, values
        self.pool_keys, self.pool_values, self.plan = keys, values, plan
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        plan = self.plan
        rows, heads, length, dim = key_states.shape
        flat_keys = key_states.transpose(1, 2).reshape(rows * length, heads, dim)
        flat_values = value_states.transpose(1, 2).reshape(rows * length, heads, dim)
        keys, values = self.pool_keys, self.pool_values
        keys.index_copy_(0, plan.write, flat_keys.to(keys.dtype))
        values.index_copy_(0, plan.write, flat_values.to(values.dtype))
        if plan.read is None:  # a prefill: the past is exactly what was just computed
            return key_states, value_states
        return keys[plan.read].transpose(1, 2), values[plan.read].transpose(1, 2)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.plan.kv_length, 0

    def get_seq_length(self) -> int:
        return self.plan.kv_length - self.plan.query_length

    def get_max_length(self) -> int:
        return -1


@dataclass
class _StepPlan:
    write: torch.Tensor
    """Slot of each new token, rows flattened ([rows * query_length])."""
    read: torch.Tensor | None
    """Slots of each row's keys, padded with the scratch slot ([rows, kv_length])."""
    kv_length: int
    query_length: int


class SlotCache(Cache):
    """The engine's ``Cache``: every layer reads and writes token slots of its pools."""

    def __init__(self, pools: list[tuple[torch.Tensor, torch.Tensor]], plan: _StepPlan) -> None:
        super().__init__(layers=[_SlotLayer(k, v, plan) for k, v in pools])


@dataclass
class PrefillRow:
    tokens: list[int]
    slots: torch.Tensor


@dataclass
class DecodeRow:
    token: int
    """The newest token, not yet in the cache."""
    position: int
    """Its position (tokens already cached before it)."""
    slots: torch.Tensor


class BatchRunner:
    """Runs the model's steps over a pool of ``capacity_tokens`` KV slots."""

    def __init__(self, model: PreTrainedModel, capacity_tokens: int, device: str) -> None:
        config: Any = model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = int(text.num_attention_heads)
        kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
        self.model = model
        self.device = torch.device(device)
        self.dtype = model.dtype
        self.capacity_tokens = capacity_tokens
        self.scratch = capacity_tokens
        shape = (capacity_tokens + 1, kv_heads, head_dim)
        self.pools = [
            (
                torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device),
            )
            for _ in range(int(text.num_hidden_layers))
        ]
        self._free = list(range(capacity_tokens - 1, -1, -1))
        self._min = torch.finfo(self.dtype).min

    def pool_bytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.pools)

    @property
    def free_slots(self) -> int:
        return len(self._free)

    def allocate(self, tokens: int) -> torch.Tensor:
        if tokens > len(self._free):
            raise RuntimeError(f"{tokens} KV slots asked, {len(self._free)} free")
        taken = self._free[len(self._free) - tokens :]
        del self._free[len(self._free) - tokens :]
        # Slot lists stay on the CPU: each step builds its index tensors from them and
        # moves those once.
        return torch.tensor(taken, dtype=torch.long)

    def release(self, slots: torch.Tensor) -> None:
        self._free.extend(slots.tolist())

    def prefill(self, rows: list[PrefillRow]) -> torch.Tensor:
        """Logits of the next token of each row ([rows, vocab])."""
        lengths = [len(r.tokens) for r in rows]
        q = max(lengths)
        # Left padding: every row's last token is at the last position, where the
        # model's own head computes its logits.
        pads = torch.tensor([q - n for n in lengths])
        ids = torch.zeros((len(rows), q), dtype=torch.long)
        write = torch.full((len(rows), q), self.scratch, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, q - lengths[i] :] = torch.tensor(row.tokens, dtype=torch.long)
            write[i, q - lengths[i] :] = row.slots[: lengths[i]]
        positions = (torch.arange(q)[None, :] - pads[:, None]).clamp(min=0)
        keys = torch.arange(q)
        causal = keys[None, None, :] <= keys[None, :, None]
        # A padding query sees itself only (its output is dropped; a row seeing
        # nothing would make a softmax over nothing).
        visible = (causal & (keys[None, None, :] >= pads[:, None, None])) | (
            keys[None, None, :] == keys[None, :, None]
        )
        plan = _StepPlan(write.flatten().to(self.device), None, q, q)
        return self._forward(ids, positions, visible, plan)

    def decode(self, rows: list[DecodeRow]) -> torch.Tensor:
        """Logits of the token after each row's newest one ([rows, vocab])."""
        length = max(r.position for r in rows) + 1
        read = torch.full((len(rows), length), self.scratch, dtype=torch.long)
        for i, row in enumerate(rows):
            read[i, : row.position + 1] = row.slots[: row.position + 1]
        ids = torch.tensor([[r.token] for r in rows], dtype=torch.long)
        positions = torch.tensor([[r.position] for r in rows], dtype=torch.long)
        write = torch.stack([r.slots[r.position] for r in rows])
        visible = (torch.arange(length)[None, :] <= positions)[:, None, :]
        plan = _StepPlan(write.to(self.device), read.to(self.device), length, 1)
        return self._forward(ids, positions, visible, plan)

    def _forward(
        self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor, plan: _StepPlan
    ) -> torch.Tensor:
        mask = torch.zeros(visible.shape, dtype=self.dtype).masked_fill(~visible, self._min)
        out = self.model(
            input_ids=ids.to(self.device),
            position_ids=positions.to(self.device),
            attention_mask=mask[:, None].to(self.device),
            cache=SlotCache(self.pools, plan),
            use_cache=True,
            logits_to_keep=1,
        )
        logits: torch.Tensor = out.logits[:, -1]
        return logits
