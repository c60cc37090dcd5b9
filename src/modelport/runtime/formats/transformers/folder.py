"""A package's loadable files as a folder, the shape ``from_pretrained`` reads."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from modelport.runtime.formats.transformers.package import PackageLayout


@contextmanager
def linked_folder(files: Mapping[str, Path], layout: PackageLayout) -> Iterator[Path]:
    """A temporary folder of symbolic links to the package's loadable files (only those:
    transformers never sees a file the layout does not name), removed on exit. Loading
    reads everything it needs before returning, so the folder need not outlive it."""
    root = Path(tempfile.mkdtemp(prefix="modelport-hf-"))
    try:
        for relative in layout.loadable:
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(Path(files[relative]).resolve(), target)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
