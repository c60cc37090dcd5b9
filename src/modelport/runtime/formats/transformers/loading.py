"""Loading a ``transformers`` package: never its code, only local files.

Every ``from_pretrained`` call passes ``trust_remote_code=False`` and
``local_files_only=True`` (the Hub is never asked; ``HF_HUB_OFFLINE`` semantics) and
reads a folder of links to the files ``package.check_package`` accepted. GGUF weights
are loaded with ``gguf_file=`` (transformers de-quantizes them to ``dtype``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelport.errors import InvalidInput, ModelportError, Unprocessable
from modelport.runtime.formats.transformers.availability import require_llm
from modelport.runtime.formats.transformers.folder import linked_folder
from modelport.runtime.formats.transformers.package import (
    INVALID_PACKAGE,
    PackageLayout,
    check_architecture,
    check_package,
    is_causal_lm,
)
from modelport.runtime.formats.transformers.pooling import Pooling, read_pooling

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

LOAD_FAILED = "load_failed"
WRONG_KIND = "unsupported_task"


@dataclass
class LoadedCausalLM:
    """A causal LM and its tokenizer, in eval mode on their device."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    layout: PackageLayout
    device: str

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


@dataclass
class LoadedEncoder:
    """An encoder, its tokenizer and the pooling its package declares."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    pooling: Pooling
    layout: PackageLayout
    device: str
    max_length: int

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def _common(layout: PackageLayout) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"trust_remote_code": False, "local_files_only": True}
    if layout.gguf is not None:
        kwargs["gguf_file"] = layout.gguf
    return kwargs


def _quiet() -> None:
    # Progress bars write to stderr from the loading thread of a server process.
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _place(model: PreTrainedModel, device: str) -> None:
    """Move to ``device``, in inference mode (no dropout)."""
    module: Any = model  # transformers types ``to`` through a decorator mypy misreads
    module.to(device)
    module.eval()


def read_config(folder: Path, layout: PackageLayout) -> PretrainedConfig:
    """The model's config (from config.json or the GGUF file), its architecture checked."""
    from transformers import AutoConfig

    try:
        config: PretrainedConfig = AutoConfig.from_pretrained(folder, **_common(layout))
    except ModelportError:
        raise
    except Exception as exc:  # transformers raises many kinds for a bad package
        raise Unprocessable(
            f"the model's config could not be read: {exc}", code=LOAD_FAILED
        ) from None
    check_architecture(config.model_type, config.architectures)
    return config


def is_generative(config: PretrainedConfig, layout: PackageLayout) -> bool:
    """Whether a package holds a causal LM (GGUF files always do, for transformers)."""
    return layout.is_gguf or is_causal_lm(config.model_type, config.architectures)


def _tokenizer(folder: Path, layout: PackageLayout) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    if not layout.tokenizer and not layout.is_gguf:
        raise InvalidInput(
            "the package has no tokenizer files (tokenizer.json, tokenizer_config.json, ...)",
            code=INVALID_PACKAGE,
        )
    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(folder, **_common(layout))
    return tokenizer


def load_causal_lm(files: Mapping[str, Path], *, device: str, dtype: torch.dtype) -> LoadedCausalLM:
    """Model and tokenizer of a causal LM package; ``unsupported_task`` for an encoder."""
    require_llm()
    from transformers import AutoModelForCausalLM

    _quiet()
    layout = check_package(files)
    with linked_folder(files, layout) as folder:
        config = read_config(folder, layout)
        if not is_generative(config, layout):
            raise Unprocessable(
                f"{config.model_type} {config.architectures} is an encoder, not a causal LM: "
                "serve it with task 'embeddings'",
                code=WRONG_KIND,
            )
        try:
            tokenizer = _tokenizer(folder, layout)
            # The config read and checked above: a GGUF file is not parsed for it again.
            model = AutoModelForCausalLM.from_pretrained(
                folder, config=config, dtype=dtype, **_common(layout)
            )
        except ModelportError:
            raise
        except Exception as exc:
            raise Unprocessable(f"the model could not be loaded: {exc}", code=LOAD_FAILED) from None
    _place(model, device)
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return LoadedCausalLM(model, tokenizer, layout, device)


def load_encoder(files: Mapping[str, Path], *, device: str, dtype: torch.dtype) -> LoadedEncoder:
    """Encoder, tokenizer and pooling of a sentence-embedding package;
    ``unsupported_task`` for a causal LM."""
    require_llm()
    from transformers import AutoModel

    _quiet()
    layout = check_package(files)
    pooling = read_pooling(files)
    with linked_folder(files, layout) as folder:
        config = read_config(folder, layout)
        if is_generative(config, layout):
            raise Unprocessable(
                f"{config.model_type} is a causal LM: it is served by the generative engine "
                "(task chat or completions), not as an embedding model",
                code=WRONG_KIND,
            )
        try:
            tokenizer = _tokenizer(folder, layout)
            model = AutoModel.from_pretrained(folder, config=config, dtype=dtype, **_common(layout))
        except ModelportError:
            raise
        except Exception as exc:
            raise Unprocessable(f"the model could not be loaded: {exc}", code=LOAD_FAILED) from None
    _place(model, device)
    limits = [
        n
        for n in (
            pooling.max_seq_length,
            getattr(config, "max_position_embeddings", None),
            tokenizer.model_max_length if tokenizer.model_max_length < 1 << 30 else None,
        )
        if isinstance(n, int) and n > 0
    ]
    return LoadedEncoder(model, tokenizer, pooling, layout, device, min(limits) if limits else 512)
