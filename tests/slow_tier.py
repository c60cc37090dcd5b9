"""Keeps the fast tier fast: a test that starts a process must be marked ``slow``.

``./scripts/test.sh --fast`` runs ``-m "not slow"``. These hooks (imported by
``tests/conftest.py``) note every process started through ``subprocess`` or
``multiprocessing`` while a test sets up and runs, and fail an unmarked test that started
one, naming it. The registry's validation worker is exempt: it is part of publishing a
version (most fixtures do), and it finishes in a fraction of a second; so is the
sandbox's probe of bubblewrap, made once a process before the first validation.
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
from collections.abc import Generator, Sequence
from typing import Any

import pytest

EXEMPT = (
    "modelport.registry.validation_worker",
    "modelport.sandbox.launch -- modelport.sandbox.types",
)
_started: list[str] = []


def _note(argv: str | bytes | os.PathLike[str] | Sequence[Any]) -> None:
    words = [argv] if isinstance(argv, str | bytes | os.PathLike) else list(argv)
    text = " ".join(os.fsdecode(w) if isinstance(w, bytes | os.PathLike) else str(w) for w in words)
    if not any(name in text for name in EXEMPT):
        _started.append(text[:160])


def pytest_configure(config: pytest.Config) -> None:
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    spawnv_passfds = multiprocessing.util.spawnv_passfds  # type: ignore[attr-defined]

    def noting_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> Any:
        _note(args)
        return execute_child(self, args, *rest)

    def noting_spawnv_passfds(path: Any, args: Any, passfds: Any) -> Any:
        _note(args)
        return spawnv_passfds(path, args, passfds)

    subprocess.Popen._execute_child = noting_execute_child  # type: ignore[attr-defined]
    multiprocessing.util.spawnv_passfds = noting_spawnv_passfds  # type: ignore[attr-defined]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    _started.clear()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    result = yield  # a test that failed reports its own failure
    started, _started[:] = list(_started), []
    if started and item.get_closest_marker("slow") is None:
        pytest.fail(
            f"this test starts processes ({'; '.join(started[:3])}) but is not marked slow: "
            "add @pytest.mark.slow so that the fast tier (./scripts/test.sh --fast) skips it",
            pytrace=False,
        )
    return result
