"""Which files a ``transformers`` package holds, and what makes one unsafe.

A package is a Hugging Face model folder at the top of the manifest's files:

- ``config.json`` (required with safetensors weights; a GGUF file carries its own);
- weights: ``*.safetensors`` (with ``model.safetensors.index.json`` when sharded), or
  exactly one ``*.gguf`` file;
- tokenizer files: ``tokenizer.json``, ``tokenizer_config.json``,
  ``special_tokens_map.json``, ``added_tokens.json``, vocabularies (``vocab.txt``,
  ``vocab.json``, ``merges.txt``, ``*.model`` sentencepiece files), a chat template
  (``chat_template.jinja`` / ``chat_template.json``);
- ``generation_config.json``;
- for a sentence encoder: ``modules.json``, ``sentence_bert_config.json``,
  ``config_sentence_transformers.json`` and the pooling module's ``config.json``
  (``1_Pooling/config.json``).

Anything else (a README, a licence) may be present; it is never shown to
transformers. Refused, with code ``unsafe_content``: pickle weights (``*.bin``,
``*.pt``, ``*.pth``, ``*.ckpt``, ``*.pkl``...) and Python code (``*.py``), whatever
the rest holds, and an ``auto_map`` in ``config.json`` or ``tokenizer_config.json``
(it names package code for ``trust_remote_code``). Refused with code
``unsupported_architecture``: a ``model_type`` or an architecture that transformers
itself does not ship (its auto mappings are the reference).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelport.errors import InvalidInput, Unprocessable

CONFIG = "config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
MODULES = "modules.json"
SAFETENSORS_INDEX = "model.safetensors.index.json"

TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        TOKENIZER_CONFIG,
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "tokenizer.model",
        "spiece.model",
        "sentencepiece.bpe.model",
        "chat_template.jinja",
        "chat_template.json",
    }
)
SENTENCE_FILES = frozenset(
    {MODULES, "sentence_bert_config.json", "config_sentence_transformers.json"}
)
OTHER_FILES = frozenset({CONFIG, "generation_config.json", SAFETENSORS_INDEX})
_POOLING_CONFIG = re.compile(r"^\d+_Pooling/config\.json$")

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".dill")
"""Weights in these files are pickles: loading them runs code."""
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".so", ".dylib", ".dll")

UNSAFE = "unsafe_content"
UNSUPPORTED_ARCHITECTURE = "unsupported_architecture"
INVALID_PACKAGE = "invalid_package"


@dataclass(frozen=True)
class PackageLayout:
    """The files of a package that transformers may read, by role (manifest paths)."""

    config: str | None
    safetensors: tuple[str, ...]
    gguf: str | None
    tokenizer: tuple[str, ...]
    sentence: tuple[str, ...]
    other: tuple[str, ...]

    @property
    def loadable(self) -> tuple[str, ...]:
        """Every file laid out for transformers; nothing else is."""
        weights = (*self.safetensors, *((self.gguf,) if self.gguf else ()))
        config = (self.config,) if self.config else ()
        return (*config, *weights, *self.tokenizer, *self.sentence, *self.other)

    @property
    def is_gguf(self) -> bool:
        return self.gguf is not None

    @property
    def has_sentence_modules(self) -> bool:
        return MODULES in self.sentence


def inspect_layout(paths: Iterable[str]) -> PackageLayout:
    """Sort a package's files by role; ``unsafe_content`` for pickle weights or code,
    ``invalid_package`` when weights or the config are missing or ambiguous."""
    paths = sorted(paths)
    unsafe = [p for p in paths if p.lower().endswith(PICKLE_SUFFIXES + CODE_SUFFIXES)]
    if unsafe:
        raise InvalidInput(
            "a transformers package may not hold pickle weights or code (they run when "
            f"loaded): {', '.join(unsafe)}; ship weights as safetensors or GGUF",
            code=UNSAFE,
            paths=unsafe,
        )
    safetensors = tuple(p for p in paths if "/" not in p and p.endswith(".safetensors"))
    gguf = [p for p in paths if "/" not in p and p.endswith(".gguf")]
    if len(gguf) > 1:
        raise InvalidInput(
            f"a transformers package holds one GGUF file at most, not {len(gguf)}",
            code=INVALID_PACKAGE,
        )
    if gguf and safetensors:
        raise InvalidInput(
            "a transformers package holds safetensors or a GGUF file, not both",
            code=INVALID_PACKAGE,
        )
    if not gguf and not safetensors:
        raise InvalidInput(
            "a transformers package needs weights: *.safetensors files or one *.gguf file",
            code=INVALID_PACKAGE,
        )
    config = CONFIG if CONFIG in paths else None
    if config is None and not gguf:
        raise InvalidInput(
            "a transformers package with safetensors weights needs a config.json",
            code=INVALID_PACKAGE,
        )
    return PackageLayout(
        config=config,
        safetensors=safetensors,
        gguf=gguf[0] if gguf else None,
        tokenizer=tuple(p for p in paths if p in TOKENIZER_FILES),
        sentence=tuple(p for p in paths if p in SENTENCE_FILES or _POOLING_CONFIG.match(p)),
        other=tuple(p for p in paths if p in OTHER_FILES and p != CONFIG),
    )


def read_json(path: Path, name: str) -> dict[str, Any]:
    """A package's JSON file as an object; ``invalid_package`` when it is not one."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{name} is not readable JSON: {exc}", code=INVALID_PACKAGE) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{name} must hold a JSON object", code=INVALID_PACKAGE)
    return data


def check_no_remote_code(files: Mapping[str, Path], layout: PackageLayout) -> None:
    """Refuse an ``auto_map`` (package code named for ``trust_remote_code``)."""
    for name in (layout.config, TOKENIZER_CONFIG):
        if name is None or name not in files:
            continue
        if "auto_map" in read_json(files[name], name):
            raise InvalidInput(
                f"{name} has an auto_map: it names Python code of the package, which is "
                "never run; only architectures transformers ships are loaded",
                code=UNSAFE,
                paths=[name],
            )


def check_architecture(model_type: str | None, architectures: Iterable[str] | None) -> None:
    """Refuse a model type or architecture transformers does not ship, checked against
    its own auto mappings."""
    from transformers.models.auto import configuration_auto, modeling_auto

    config_names: Mapping[str, str] = getattr(configuration_auto, "CONFIG_MAPPING_NAMES")  # noqa: B009
    if not model_type or model_type not in config_names:
        raise Unprocessable(
            f"model type {model_type!r} is not one transformers ships",
            code=UNSUPPORTED_ARCHITECTURE,
        )
    shipped: set[str] = set()
    for attribute in dir(modeling_auto):
        mapping = getattr(modeling_auto, attribute)
        if attribute.endswith("_MAPPING_NAMES") and isinstance(mapping, Mapping):
            for value in mapping.values():
                shipped.update(value if isinstance(value, tuple | list) else (value,))
    unknown = [a for a in architectures or () if a not in shipped]
    if unknown:
        raise Unprocessable(
            f"architecture(s) {', '.join(unknown)} are not ones transformers ships",
            code=UNSUPPORTED_ARCHITECTURE,
        )


def is_causal_lm(model_type: str, architectures: Iterable[str] | None) -> bool:
    """Whether the model generates text (a causal LM) rather than encodes it."""
    from transformers.models.auto import modeling_auto

    causal = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    names = list(architectures or ())
    if names:
        return any(n.endswith("ForCausalLM") or n == causal.get(model_type) for n in names)
    return model_type in causal and model_type not in modeling_auto.MODEL_MAPPING_NAMES


def check_package(files: Mapping[str, Path]) -> PackageLayout:
    """Every check that needs no model loaded: the layout, remote code, and (from
    ``config.json``) the architecture. A GGUF package's architecture is checked once
    transformers has read its config (``loading``)."""
    layout = inspect_layout(files)
    check_no_remote_code(files, layout)
    if layout.config is not None:
        config = read_json(files[layout.config], layout.config)
        architectures = config.get("architectures")
        if architectures is not None and not (
            isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)
        ):
            raise InvalidInput(
                "config.json: architectures must be a list of names", code=INVALID_PACKAGE
            )
        check_architecture(config.get("model_type"), architectures)
    return layout
