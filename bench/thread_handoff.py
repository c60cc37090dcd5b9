"""What handing work to another thread and back costs on this machine.

    .venv/bin/python bench/thread_handoff.py

The platform never runs model code on the event loop, so every batch crosses to an
executor thread and back. This prints the round trip of one item through two
``queue.SimpleQueue`` objects between two Python threads (a thread that sleeps
between items, as an executor does at low load), and the same work called inline as
the baseline. On a virtual machine whose idle CPUs halt, each wake-up of a sleeping
thread is paid in the hypervisor, and it shows here.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time


def round_trip_seconds(items: int) -> float:
    """Mean seconds for one item to go to a worker thread and come back."""
    to_worker: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    back: queue.SimpleQueue[int] = queue.SimpleQueue()

    def echo() -> None:
        while (item := to_worker.get()) is not None:
            back.put(item)

    worker = threading.Thread(target=echo, daemon=True)
    worker.start()
    started = time.perf_counter()
    for item in range(items):
        to_worker.put(item)
        back.get()
    elapsed = time.perf_counter() - started
    to_worker.put(None)
    worker.join()
    return elapsed / items


def inline_seconds(items: int) -> float:
    """Mean seconds for the same puts and gets on one thread (the baseline)."""
    box: queue.SimpleQueue[int] = queue.SimpleQueue()
    started = time.perf_counter()
    for item in range(items):
        box.put(item)
        box.get()
    return (time.perf_counter() - started) / items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    args = parser.parse_args()
    inline = inline_seconds(args.items)
    hop = round_trip_seconds(args.items)
    print(f"inline: {inline * 1e6:.2f} µs per item")
    print(f"to a thread and back: {hop * 1e6:.1f} µs per item ({hop / inline:.0f}x inline)")


if __name__ == "__main__":
    main()
