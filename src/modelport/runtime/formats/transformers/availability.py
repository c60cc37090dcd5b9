"""Whether the ``modelport[llm]`` extra (torch, transformers) is installed, found
without importing it."""

from __future__ import annotations

import functools
from importlib.util import find_spec

from modelport.errors import Unprocessable

LLM_EXTRA = "modelport[llm]"
"""The extra that brings torch and transformers."""


@functools.cache
def llm_installed() -> bool:
    """Whether torch and transformers can be imported (neither is imported here)."""
    return find_spec("torch") is not None and find_spec("transformers") is not None


def require_llm() -> None:
    """Raise ``unsupported_format`` naming the extra when it is not installed."""
    if not llm_installed():
        raise Unprocessable(
            f"the transformers format needs torch and transformers: install {LLM_EXTRA}",
            code="unsupported_format",
        )
