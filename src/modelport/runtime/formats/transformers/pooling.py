"""Sentence embeddings from token states, as the package's sentence-transformers
modules declare them (``modules.json``, the pooling module's ``config.json``).

Supported modules: ``Transformer``, ``Pooling`` and ``Normalize``; pooling modes
``cls``, ``mean``, ``max``, ``mean_sqrt_len`` and ``lasttoken`` (several modes at once
are concatenated in sentence-transformers' order). A package without ``modules.json``
is pooled by the mean, not normalized (sentence-transformers' default). Anything else
(a ``Dense`` projection, weighted-mean pooling) is refused (``unsupported_pooling``)
rather than served as different embeddings than its authors meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from modelport.errors import Unprocessable
from modelport.runtime.formats.transformers.package import MODULES, read_json

if TYPE_CHECKING:
    import torch

UNSUPPORTED = "unsupported_pooling"
MODES = ("cls", "max", "mean", "mean_sqrt_len", "lasttoken")
"""Modes in the order sentence-transformers concatenates them."""
_MODULE_TYPES = {
    "sentence_transformers.models.Transformer": "transformer",
    "sentence_transformers.models.Pooling": "pooling",
    "sentence_transformers.models.Normalize": "normalize",
}


@dataclass(frozen=True)
class Pooling:
    """How token states become one vector per text."""

    modes: tuple[str, ...] = ("mean",)
    normalize: bool = False
    max_seq_length: int | None = None
    """Tokens per text the model reads (``sentence_bert_config.json``); None: the
    tokenizer's and the model's limit."""
    lowercase: bool = False

    def apply(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[batch, tokens, d]`` states and ``[batch, tokens]`` mask -> ``[batch, d']``."""
        import torch

        weights = mask.unsqueeze(-1).to(states.dtype)
        counts = weights.sum(dim=1).clamp(min=1e-9)
        parts = []
        for mode in self.modes:
            if mode == "cls":
                parts.append(states[:, 0])
            elif mode == "max":
                masked = states.masked_fill(weights == 0, -1e9)
                parts.append(masked.max(dim=1).values)
            elif mode == "mean":
                parts.append((states * weights).sum(dim=1) / counts)
            elif mode == "mean_sqrt_len":
                parts.append((states * weights).sum(dim=1) / torch.sqrt(counts))
            else:  # lasttoken: right padding, so the last attended position
                last = mask.sum(dim=1).long() - 1
                parts.append(states[torch.arange(states.shape[0]), last.clamp(min=0)])
        pooled = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled


def read_pooling(files: Mapping[str, Path]) -> Pooling:
    """The pooling the package declares (see the module's docstring)."""
    sentence = (
        read_json(files["sentence_bert_config.json"], "sentence_bert_config.json")
        if ("sentence_bert_config.json" in files)
        else {}
    )
    max_seq = sentence.get("max_seq_length")
    lowercase = bool(sentence.get("do_lower_case", False))
    if MODULES not in files:
        return Pooling(max_seq_length=max_seq, lowercase=lowercase)
    modules = _read_modules(files[MODULES])
    kinds = [kind for kind, _ in modules]
    # The Transformer module must be the package's own top folder: the weights the
    # loader reads are those at the top of the package.
    if kinds.count("pooling") != 1 or kinds[0] != "transformer" or modules[0][1]:
        raise Unprocessable(
            "modules.json must list the Transformer, then one Pooling (and optionally a "
            f"Normalize); found {kinds}",
            code=UNSUPPORTED,
        )
    pooling_path = next(path for kind, path in modules if kind == "pooling")
    name = f"{pooling_path}/config.json" if pooling_path else "config.json"
    if name not in files:
        raise Unprocessable(f"the pooling module's {name} is missing", code=UNSUPPORTED)
    config = read_json(files[name], name)
    if config.get("pooling_mode_weightedmean_tokens"):
        raise Unprocessable("weighted-mean pooling is not supported", code=UNSUPPORTED)
    modes = tuple(m for m in MODES if config.get(_mode_key(m)))
    if not modes:
        raise Unprocessable(f"{name} enables no pooling mode", code=UNSUPPORTED)
    return Pooling(
        modes=modes, normalize="normalize" in kinds, max_seq_length=max_seq, lowercase=lowercase
    )


def _mode_key(mode: str) -> str:
    return {
        "cls": "pooling_mode_cls_token",
        "lasttoken": "pooling_mode_lasttoken",
    }.get(mode, f"pooling_mode_{mode}_tokens")


def _read_modules(path: Path) -> list[tuple[str, str]]:
    import json

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise Unprocessable(f"modules.json is not readable JSON: {exc}", code=UNSUPPORTED) from None
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise Unprocessable("modules.json must hold a list of modules", code=UNSUPPORTED)
    modules = []
    for module in data:
        kind = _MODULE_TYPES.get(str(module.get("type")))
        if kind is None:
            raise Unprocessable(
                f"sentence-transformers module {module.get('type')!r} is not supported "
                "(only Transformer, Pooling and Normalize)",
                code=UNSUPPORTED,
            )
        modules.append((kind, str(module.get("path") or "")))
    return modules
