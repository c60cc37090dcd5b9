"""A warm processing worker: ``python -m modelport.sandbox.processing_worker DIR``, started
in the sandbox by ``modelport.sandbox.warm`` (its launcher set the limits and the
system-call filter first), and kept for many calls.

``DIR/processing.json`` names the entry points (``{"preprocess": "mod:fn" | null,
"postprocess": ...}``); the package's code is under ``DIR/files`` (read-only). The
worker imports the entry points once, answers ``{"ready": true}`` (or ``{"error"}``
and exits), then, for each request frame (``modelport.sandbox.frames``) on its standard
input, ``{"stage": "preprocess" | "postprocess"}`` with the tensors, writes one answer
frame on its standard output: ``{"ok": true}`` with the stage's tensors, or
``{"ok": false, "error": str}`` when the code raised. It exits at the end of its input.

The publisher's code gets a standard output of its own (the standard error), so a
``print`` cannot corrupt the frames.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# One call at a time per worker (the pool gives concurrency): numpy's BLAS gets one
# thread, and no per-thread buffers under the worker's address-space limit. Set before
# numpy is first imported (below).
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from modelport.sandbox import frames, processing_code  # noqa: E402

_ERROR_CHARS = 2000


def _reader(stream: BinaryIO) -> Callable[[int], bytes]:
    def read_exact(n: int) -> bytes:
        data = stream.read(n)
        if data is None or len(data) != n:
            raise EOFError
        return data

    return read_exact


def _send(out: BinaryIO, header: dict[str, object], tensors: dict[str, object]) -> None:
    for part in frames.encode(header, tensors):
        out.write(part)
    out.flush()


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"[:_ERROR_CHARS]


def main(argv: list[str] | None = None) -> int:
    directory = Path((argv if argv is not None else sys.argv[1:])[0])
    # The frames go on the real standard output; the code's prints go to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    inp = sys.stdin.buffer
    try:
        entries = json.loads((directory / "processing.json").read_text())
        stages = processing_code.load(directory / "files", entries)
    except BaseException as exc:  # any failure to import is reported, SystemExit too
        _send(out, {"ready": False, "error": _describe(exc)}, {})
        return 1
    _send(out, {"ready": True}, {})
    read_exact = _reader(inp)
    while True:
        try:
            header, tensors = frames.decode(read_exact)
        except EOFError:
            return 0
        stage = stages.get(str(header.get("stage")))
        if stage is None:
            _send(out, {"ok": False, "error": f"no {header.get('stage')} entry point"}, {})
            continue
        try:
            answer = processing_code.call(stage, tensors)
            _send(out, {"ok": True}, dict(answer))
        except frames.FrameError as exc:
            _send(out, {"ok": False, "error": str(exc)}, {})
        except Exception as exc:  # the code's failure fails this call, not the worker
            _send(out, {"ok": False, "error": _describe(exc)}, {})


if __name__ == "__main__":
    sys.exit(main())
