"""The prefix cache: token sequences whose KV cells are kept after their sequence left.

Pure bookkeeping (no llama.cpp): which sequence ids are free, which hold a retained
prefix (its tokens, last use), the longest prefix of a prompt that some kept or running
sequence already computed, and which kept prefixes to drop when cells are needed. The
kernels apply the decisions (``seq_cp`` to share cells, ``seq_rm`` to drop them).

Kept prefixes are counted as held cells, so that running sequences' reservations plus
the kept prefixes never exceed the KV cache; the engine's ledger reclaims them (oldest
use first) whenever an admission needs their room.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MIN_SHARED_TOKENS = 8
"""Shorter common prefixes are recomputed: a copy would save less than it costs."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class Match:
    """Where a prompt's computed prefix can be copied from."""

    seq_id: int
    tokens: int


class PrefixCache:
    """Sequence ids and the prefixes kept in them (not thread-safe: the engine thread
    owns it)."""

    def __init__(self, seq_ids: int, *, max_kept: int) -> None:
        self._free = list(range(seq_ids - 1, -1, -1))
        self.max_kept = max_kept
        self._kept: OrderedDict[int, tuple[int, ...]] = OrderedDict()
        self.held_tokens = 0
        """Cells the kept prefixes hold (at most; some may be shared with running ones)."""

    # -- sequence ids --------------------------------------------------------------
    def take_id(self) -> int:
        if not self._free:
            # Kept prefixes give their ids back before a running sequence goes without.
            if not self._kept:
                raise RuntimeError("no free sequence id")
            self.drop_oldest()
        return self._free.pop()

    def give_id(self, seq_id: int) -> None:
        self._free.append(seq_id)

    # -- kept prefixes -------------------------------------------------------------
    @property
    def kept(self) -> int:
        return len(self._kept)

    def keep(self, seq_id: int, tokens: Sequence[int]) -> list[int]:
        """Keep ``seq_id``'s computed ``tokens``; answers the ids dropped to make room
        (their cells are to be removed and their ids are free again). A prefix shorter
        than ``MIN_SHARED_TOKENS``, or the same as one kept, is not kept: its own id
        comes back in the answer."""
        if len(tokens) < MIN_SHARED_TOKENS or self.max_kept < 1:
            self.give_id(seq_id)
            return [seq_id]
        key = tuple(tokens)
        for kept_id, kept_tokens in self._kept.items():
            if common_prefix(kept_tokens, key) == len(key):
                # Already covered by a kept prefix: refresh that one, drop this one.
                self._kept.move_to_end(kept_id)
                self.give_id(seq_id)
                return [seq_id]
        dropped = []
        while len(self._kept) >= self.max_kept:
            dropped.append(self.drop_oldest())
        self._kept[seq_id] = key
        self.held_tokens += len(key)
        return dropped

    def drop_oldest(self) -> int:
        """Forget the least recently used kept prefix; its id (cells to remove)."""
        seq_id, tokens = self._kept.popitem(last=False)
        self.held_tokens -= len(tokens)
        self._free.append(seq_id)
        return seq_id

    def drop_all(self) -> list[int]:
        return [self.drop_oldest() for _ in range(len(self._kept))]

    def best(
        self, tokens: Sequence[int], running: Iterable[tuple[int, Sequence[int]]] = ()
    ) -> Match | None:
        """The longest computed prefix of ``tokens`` among kept prefixes and ``running``
        sequences (id, tokens in their cells), leaving at least the last token to compute
        (its logits are needed); None below ``MIN_SHARED_TOKENS``."""
        limit = len(tokens) - 1
        best: Match | None = None
        for seq_id, computed in (*self._kept.items(), *running):
            n = min(common_prefix(computed, tokens), limit)
            if n >= MIN_SHARED_TOKENS and (best is None or n > best.tokens):
                best = Match(seq_id, n)
        if best is not None and best.seq_id in self._kept:
            self._kept.move_to_end(best.seq_id)
        return best
