"""The prefix cache's bookkeeping (pure Python): ids, kept prefixes, matches, eviction."""

from __future__ import annotations

from modelport.runtime.generative.llama.prefix import MIN_SHARED_TOKENS, PrefixCache

LONG = list(range(100, 100 + 4 * MIN_SHARED_TOKENS))


def test_ids_come_back_whatever_a_leaving_sequence_keeps() -> None:
    cache = PrefixCache(3, max_kept=1)
    for _ in range(50):  # short, duplicate and kept prefixes: no id is ever lost
        ids = [cache.take_id() for _ in range(2)]
        cache.keep(ids[0], [1, 2])  # too short to keep
        cache.keep(ids[1], LONG)  # kept (or the same as the one kept)
    assert cache.kept == 1
    assert sorted(cache.take_id() for _ in range(3)) == [0, 1, 2]  # the kept one gave way


def test_the_longest_prefix_wins_and_the_last_token_is_always_computed() -> None:
    cache = PrefixCache(8, max_kept=4)
    short, long = cache.take_id(), cache.take_id()
    cache.keep(short, LONG[: 2 * MIN_SHARED_TOKENS])
    cache.keep(long, LONG)
    match = cache.best([*LONG, 7])
    assert match is not None and (match.seq_id, match.tokens) == (long, len(LONG))
    same = cache.best(LONG)
    assert same is not None and same.tokens == len(LONG) - 1
    assert cache.best(LONG[: MIN_SHARED_TOKENS - 1] + [0] * 20) is None
    running = cache.best([5] * 30, running=[(9, [5] * 12)])
    assert running is not None and (running.seq_id, running.tokens) == (9, 12)


def test_the_least_recently_used_prefix_is_dropped_first() -> None:
    cache = PrefixCache(8, max_kept=2)
    a, b = cache.take_id(), cache.take_id()
    cache.keep(a, [1] * 20)
    cache.keep(b, [2] * 20)
    assert cache.held_tokens == 40
    cache.best([1] * 30)  # a is used: b is now the oldest
    assert cache.drop_oldest() == b
    c = cache.take_id()
    assert cache.keep(c, [3] * 20) == []  # room for it beside a
    d = cache.take_id()
    assert cache.keep(d, [4] * 20) == [a]  # full: the oldest, a, goes
    assert cache.held_tokens == 40
