"""Torch tests run on one thread: the machine's cores are shared."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from tests.runtime.formats.transformers.packages import build_tiny_llama  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny random-weight Llama package folder (safetensors + tokenizer + template)."""
    yield build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
