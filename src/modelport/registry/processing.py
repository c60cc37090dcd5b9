"""Publish-time checks of a manifest's ``processing`` section: what can be told from the
manifest alone is refused at publish, before a version number is spent on it.

- at least one of ``preprocess`` and ``postprocess``;
- each is an entry point ``module:function`` (dotted Python identifiers) whose module is
  a ``.py`` file of the package (``text.tokenizer:encode`` is ``text/tokenizer.py``);
- ``model_inputs`` only with ``preprocess``, ``model_outputs`` only with ``postprocess``
  (without the code that maps them, the model's tensors are the caller's), names unique;
- ``data`` lists files of the package.

Errors are ``InvalidInput`` with code ``invalid_processing`` and ``field`` naming the
entry (``manifest.processing.preprocess``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from modelport.errors import InvalidInput
from modelport.manifest import Manifest, TensorSpec

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ENTRY_POINT = re.compile(rf"^({_IDENT}(?:\.{_IDENT})*):({_IDENT})$")


def module_path(entry: str) -> str:
    """The package path of an entry point's module (``a.b:f`` → ``a/b.py``)."""
    return entry.partition(":")[0].replace(".", "/") + ".py"


def check_processing(manifest: Manifest) -> None:
    """Raise ``invalid_processing`` at the first part of the section that cannot work."""
    processing = manifest.processing
    if processing is None:
        return
    files = {f.path for f in manifest.files}
    if processing.preprocess is None and processing.postprocess is None:
        raise _invalid(
            "processing needs a 'preprocess' or a 'postprocess' entry point", "processing"
        )
    for stage in ("preprocess", "postprocess"):
        entry = getattr(processing, stage)
        if entry is None:
            continue
        if not ENTRY_POINT.match(entry):
            raise _invalid(
                f"{stage} entry point {entry!r} is not 'module:function' (dotted Python "
                "identifiers, e.g. 'tokenizer:encode')",
                f"processing.{stage}",
            )
        path = module_path(entry)
        if path not in files:
            raise _invalid(
                f"{stage} entry point {entry!r} needs the file {path!r} in the package's files",
                f"processing.{stage}",
            )
    if processing.model_inputs is not None and processing.preprocess is None:
        raise _invalid(
            "model_inputs differ from the caller's inputs only through a preprocess entry point",
            "processing.model_inputs",
        )
    if processing.model_outputs is not None and processing.postprocess is None:
        raise _invalid(
            "model_outputs differ from the caller's outputs only through a postprocess entry point",
            "processing.model_outputs",
        )
    _unique(processing.model_inputs, "processing.model_inputs")
    _unique(processing.model_outputs, "processing.model_outputs")
    for index, path in enumerate(processing.data):
        if path not in files:
            raise _invalid(
                f"processing data {path!r} is not a file of the package", f"processing.data.{index}"
            )


def _unique(specs: Sequence[TensorSpec] | None, field: str) -> None:
    if specs is None:
        return
    if not specs:
        raise _invalid("must list at least one tensor when given", field)
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _invalid(f"duplicate tensors: {', '.join(dupes)}", field)


def _invalid(message: str, field: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_processing", field=f"manifest.{field}")
