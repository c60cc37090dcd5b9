"""A version's processing code, loaded inside a sandboxed child (the warm processing
worker, or validation's worker): its entry points imported once from the package's
files, then called with tensors.

An entry point is a function of one argument, a dict of numpy arrays by tensor name
(byte-string tensors are object arrays of ``bytes``), returning such a dict (any array-
like values; ``str`` elements are encoded as UTF-8). The code may import the standard
library, numpy and its own package's modules; any other import fails with
``ModuleNotFoundError`` (other installed packages are not provided). That is the
contract, not the boundary: the sandbox (no network, no process creation, an empty
environment, read-only files) is.

Standard library and numpy only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import numpy as np

Stage = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
ALLOWED_PACKAGES = frozenset({"numpy"})


class _OnlyAllowed(importlib.abc.MetaPathFinder):
    """Refuses a top-level module that is neither the standard library, numpy, nor a
    module of the package."""

    def __init__(self, package: Path) -> None:
        self.package = package
        self._prefix = str(package.resolve()) + os.sep

    def _from_package(self) -> bool:
        """Whether a frame of the package's code is on the stack of this import."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if os.path.abspath(frame.f_code.co_filename).startswith(self._prefix):
                return True
            frame = frame.f_back
        return False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top in ALLOWED_PACKAGES:
            return None
        if not self._from_package():
            return None  # the host's own imports (numpy's, the worker's) are not restricted
        if (self.package / f"{top}.py").is_file() or (self.package / top).is_dir():
            return None
        raise ModuleNotFoundError(
            f"No module named {fullname!r}: processing code may import the standard "
            "library, numpy and its own package's modules only",
            name=fullname,
        )


def load(package: Path, entries: Mapping[str, str | None]) -> dict[str, Stage]:
    """Import each entry point (``module:function``) from ``package`` (put first on
    ``sys.path``, and every other import restricted as above); by stage name."""
    package = package.resolve()
    sys.path.insert(0, str(package))
    sys.meta_path.insert(0, _OnlyAllowed(package))
    stages: dict[str, Stage] = {}
    for stage, entry in entries.items():
        if entry is None:
            continue
        module_name, _, function = entry.partition(":")
        module = importlib.import_module(module_name)
        found = getattr(module, function, None)
        if not callable(found):
            raise TypeError(f"{entry}: {module_name} has no function {function!r}")
        stages[stage] = found
    return stages


def call(stage: Stage, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run one stage; its answer as a dict of arrays (a ``TypeError`` when it is not)."""
    answer = stage(tensors)
    if not isinstance(answer, Mapping):
        raise TypeError(f"returned a {type(answer).__name__}, not a dict of tensors by name")
    return {str(name): _array(str(name), value) for name, value in answer.items()}


def _array(name: str, value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind == "U":
        flat = [item.encode() for item in array.reshape(-1).tolist()]
        encoded = np.empty(len(flat), dtype=np.object_)
        encoded[:] = flat
        return encoded.reshape(array.shape)
    if array.dtype.kind == "S":
        return array.astype(np.object_)
    return array
