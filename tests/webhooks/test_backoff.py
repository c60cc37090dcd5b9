"""Retry waits: exponential, capped, drawn at random below the ceiling."""

from __future__ import annotations

from modelport.webhooks.backoff import retry_delay


def test_backoff_doubles_to_its_cap_with_full_jitter() -> None:
    ceiling = [
        retry_delay(n, base_seconds=5, max_seconds=60, uniform=lambda lo, hi: hi)
        for n in range(1, 7)
    ]
    assert ceiling == [5, 10, 20, 40, 60, 60]
    assert retry_delay(1000, base_seconds=5, max_seconds=60, uniform=lambda lo, hi: hi) == 60
    draws = [retry_delay(3, base_seconds=5, max_seconds=60) for _ in range(200)]
    assert all(0 <= d <= 20 for d in draws) and len(set(draws)) > 1
