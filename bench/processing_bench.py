"""What running a version's processing code in a warm sandboxed worker costs per call.

    .venv/bin/python bench/processing_bench.py [--calls 2000]

A tokenizer-like preprocess (texts → int64 ids) and an identity stage over a float32
tensor of several sizes, each called (1) inline in this process, the baseline, and (2)
through a ``WarmPool`` of one warm worker in the sandbox (``MODELPORT_SANDBOX``'s mode:
bubblewrap where it works, else unisolated): frames over pipes, a worker thread waiting
on the answer. Also the start of one worker (process, sandbox, imports). Both paths run
in the same run, so the ratio is what the isolation costs on this machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from modelport.sandbox import Limits, Sandbox, SandboxMode, isolation_available, processing_code
from modelport.sandbox.warm import WarmPool, WarmWorker

Tensors = dict[str, np.ndarray]
CODE = """
import numpy as np

VOCAB = {"good": 1, "great": 2, "bad": 3, "awful": 4, "ok": 5}


def tokenize(inputs):
    texts = [t.decode() for t in inputs["text"].reshape(-1)]
    ids = np.zeros((len(texts), 16), dtype=np.int64)
    for row, text in enumerate(texts):
        for col, word in enumerate(text.split()[:16]):
            ids[row, col] = VOCAB.get(word, 0)
    return {"ids": ids}


def identity(inputs):
    return {"x": inputs["x"]}
"""


def mean_seconds(call: Callable[[], object], calls: int) -> float:
    call()  # warm
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    mode = SandboxMode.AUTO if isolation_available() else SandboxMode.UNISOLATED
    sandbox = Sandbox(mode)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "files").mkdir()
        (folder / "files" / "code.py").write_text(CODE)
        (folder / "processing.json").write_text(
            '{"preprocess": "code:tokenize", "postprocess": "code:identity"}'
        )
        limits = Limits(wall_seconds=0, cpu_seconds=0, memory_bytes=1 << 30)

        def start(deadline: float) -> WarmWorker:
            started = sandbox.start(
                ["modelport.sandbox.processing_worker", "."],
                scratch=folder,
                readonly=[folder / "files"],
                limits=limits,
            )
            worker = WarmWorker(started)
            worker.wait_ready(deadline)
            return worker

        began = time.perf_counter()
        start(time.monotonic() + 60).close()
        print(f"sandbox: {sandbox.confinement().isolation.value}")
        print(f"worker start: {(time.perf_counter() - began) * 1000:.0f} ms")
        pool = WarmPool(start, size=1, start_timeout=60)
        sys.path.insert(0, str(folder / "files"))
        stages = processing_code.load(
            folder / "files", {"preprocess": "code:tokenize", "postprocess": "code:identity"}
        )
        texts = np.array([b"good great ok", b"awful bad"] * 4, dtype=object)
        cases: list[tuple[str, str, dict[str, np.ndarray]]] = [
            ("tokenize 8 texts", "preprocess", {"text": texts}),
            ("identity 1 KiB", "postprocess", {"x": np.ones(256, dtype=np.float32)}),
            ("identity 1 MiB", "postprocess", {"x": np.ones(1 << 18, dtype=np.float32)}),
        ]
        for label, stage, tensors in cases:
            fn = stages[stage]

            def inline_call(fn: processing_code.Stage = fn, given: Tensors = tensors) -> object:
                return processing_code.call(fn, dict(given))

            def warm_call(stage: str = stage, given: Tensors = tensors) -> object:
                return pool.call({"stage": stage}, given, time.monotonic() + 30)

            inline = mean_seconds(inline_call, args.calls)
            warm = mean_seconds(warm_call, args.calls)
            print(
                f"{label}: inline {inline * 1e6:.1f} µs, warm worker {warm * 1e6:.1f} µs "
                f"({warm / inline:.1f}x inline, +{(warm - inline) * 1e6:.0f} µs)"
            )
        pool.close()


if __name__ == "__main__":
    main()
