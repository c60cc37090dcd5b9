"""Finding llama.cpp (``llama-cpp-python``'s bindings) and saying why it is unusable.

The library is built from source when it is installed (``scripts/bootstrap.sh`` builds
a portable wheel once and caches it). Whether it loads is decided once per process:
``llama_problem()`` answers None when it is usable, else the reason, which the server
logs at start-up and a pinned ``runtime.engine: llama.cpp`` load answers with.
"""

from __future__ import annotations

import collections
import ctypes
import functools
from types import ModuleType

from modelport.errors import Unavailable

ENGINE_UNAVAILABLE = "engine_unavailable"


@functools.cache
def _load() -> tuple[ModuleType | None, str | None]:
    try:
        import llama_cpp
    except ImportError as exc:
        return None, (
            f"llama-cpp-python is not installed ({exc}); install modelport[llm] with"
            " scripts/bootstrap.sh, which builds it for this CPU"
        )
    except OSError as exc:  # the shared library is there but does not load
        return None, f"the llama.cpp library does not load on this machine: {exc}"
    try:
        _quiet(llama_cpp)
        llama_cpp.llama_backend_init()
    except Exception as exc:
        return None, f"the llama.cpp backend does not start: {exc}"
    return llama_cpp, None


def llama_problem() -> str | None:
    """Why llama.cpp cannot run here, or None when it can."""
    return _load()[1]


def require_llama() -> ModuleType:
    """The bindings module, or 503 ``engine_unavailable`` saying why not."""
    module, problem = _load()
    if module is None:
        raise Unavailable(
            f"the llama.cpp engine is unavailable: {problem}", code=ENGINE_UNAVAILABLE
        )
    return module


_ERRORS: collections.deque[str] = collections.deque(maxlen=16)
"""llama.cpp's latest warning and error lines, for the error that follows them."""


def recent_errors() -> str:
    """The warnings and errors llama.cpp wrote since the last call, one per line."""
    lines = []
    while _ERRORS:
        lines.append(_ERRORS.popleft())
    return "; ".join(lines)


def _quiet(llama_cpp: ModuleType) -> None:
    """Keep llama.cpp's own log lines (model loading chatter) off stderr; its warnings
    and errors are kept for the error that follows (``recent_errors``). The callback
    runs inside llama.cpp's calls, from any thread: it only appends to a deque (taking
    no lock a logging handler might hold)."""

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _write(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        # ggml's levels: 3 warn, 4 error. One KV cache serves every sequence: more cells
        # than one sequence's context is the design, not an overflow.
        if level in (3, 4) and b"n_ctx_seq" not in text:
            _ERRORS.append(text.decode("utf-8", "replace").strip())

    # Kept alive with the module: llama.cpp holds the pointer.
    _quiet.callback = _write  # type: ignore[attr-defined]
    llama_cpp.llama_log_set(_write, ctypes.c_void_p(0))
