"""The owner of the process's thread pools: one pool per name, all closed together;
closing waits for a draining pool's work and cancels what was still queued."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError

import pytest

from modelport.background.pools import ThreadPools
from tests.polling import eventually


def test_a_pool_is_built_once_per_name_and_its_threads_carry_it() -> None:
    pools = ThreadPools()
    try:
        webhook = pools.get("webhook", 2)
        assert pools.get("webhook", 8) is webhook  # the first size holds
        assert pools.get("processing", 2) is not webhook
        assert pools.names == ["processing", "webhook"]
        assert (
            webhook.submit(lambda: threading.current_thread().name).result(60).startswith("webhook")
        )
    finally:
        pools.close()


def test_close_waits_for_running_work_cancels_queued_work_and_refuses_more() -> None:
    pools = ThreadPools()
    pool = pools.get("webhook", 1)
    entered, gate = threading.Event(), threading.Event()

    def running() -> str:
        entered.set()
        assert gate.wait(60)
        return "finished"

    first = pool.submit(running)
    queued = pool.submit(lambda: "never")
    assert entered.wait(60)
    closer = threading.Thread(target=pools.close)
    closer.start()
    assert eventually(queued.cancelled)  # at once, while the first still runs
    gate.set()
    closer.join(60)
    assert first.result(0) == "finished"  # drained before close returned
    with pytest.raises(CancelledError):
        queued.result(0)
    with pytest.raises(RuntimeError):
        pools.get("webhook", 1)
    pools.close()  # twice is harmless
