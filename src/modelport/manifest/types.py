"""Pydantic models of the manifest. ``Manifest.model_json_schema()`` is the published schema."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from modelport.digests import Digest

DATATYPES = (
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
    "FP16", "FP32", "FP64", "BYTES",
)  # fmt: skip
"""Tensor datatypes, named as in the Open Inference Protocol."""

Datatype = Literal[
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
    "FP16", "FP32", "FP64", "BYTES",
]  # fmt: skip

UNSAFE_FORMATS = frozenset({"pickle", "pkl", "joblib", "cloudpickle", "dill", "pytorch-pickle"})
"""Format names whose loading executes code; refused everywhere by name. Names alone
prove nothing: publishing also sniffs every file's contents
(``modelport.registry.content``)."""

EXECUTION_MODES = ("thread", "process")
"""Values of ``runtime.execution`` (``modelport.runtime.types.Execution``)."""
_FORMAT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")
_TENSOR_NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileEntry(_Strict):
    """One file of the package, stored as a blob."""

    path: str = Field(min_length=1, max_length=512, description="Relative POSIX path.")
    digest: Digest
    size: int = Field(ge=0)

    @field_validator("path")
    @classmethod
    def _safe_path(cls, v: str) -> str:
        parts = v.split("/")
        if v.startswith("/") or "\\" in v or any(p in ("", ".", "..") for p in parts):
            raise ValueError("must be a relative path without '.', '..' or empty segments")
        return v


class TensorSpec(_Strict):
    """An input or output: name, OIP datatype and shape (-1 for a variable dimension)."""

    name: str
    datatype: Datatype
    shape: list[int] = Field(max_length=16)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _TENSOR_NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits, '_', '.', ':', '/', '-'")
        return v

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: list[int]) -> list[int]:
        if any(d < -1 for d in v):
            raise ValueError("dimensions are non-negative, or -1 for a variable dimension")
        return v


class LineageParent(_Strict):
    """Another version this one derives from."""

    model: str = Field(description="owner/name of the parent model")
    version: str
    relation: str = Field(
        default="derived-from",
        pattern=r"^[a-z][a-z0-9-]{0,63}$",
        description="e.g. fine-tuned-from, quantized-from, distilled-from",
    )


class LineageRef(_Strict):
    """A dataset or code reference, by digest and/or URI."""

    name: str | None = None
    uri: str | None = Field(default=None, max_length=2048)
    digest: Digest | None = None

    @model_validator(mode="after")
    def _one_of(self) -> LineageRef:
        if self.uri is None and self.digest is None:
            raise ValueError("needs a 'uri' or a 'digest'")
        return self


class Lineage(_Strict):
    parents: list[LineageParent] = Field(default_factory=list)
    datasets: list[LineageRef] = Field(default_factory=list)
    code: list[LineageRef] = Field(default_factory=list)


class Resources(_Strict):
    """Declared resource profile; the runtime measures and may refine it."""

    host_memory_bytes: int | None = Field(default=None, ge=0)
    device_memory_bytes: int | None = Field(default=None, ge=0)
    max_batch_size: int = Field(default=1, ge=1)
    typical_latency_ms: float | None = Field(default=None, ge=0)
    hardware: list[str] = Field(default_factory=list, description="e.g. ['cpu'], ['cuda']")


class ExampleTensor(_Strict):
    """A tensor in Open Inference Protocol JSON form."""

    name: str
    datatype: Datatype
    shape: list[int]
    data: list[Any]


class Tolerance(_Strict):
    atol: float = Field(default=1e-5, ge=0)
    rtol: float = Field(default=1e-4, ge=0)


class Example(_Strict):
    """An input with its expected output; validation and warm-up run it."""

    inputs: list[ExampleTensor] = Field(min_length=1)
    outputs: list[ExampleTensor] = Field(default_factory=list)
    tolerance: Tolerance = Field(default_factory=Tolerance)


class Processing(_Strict):
    """Publisher code run around the model, in the sandbox: ``preprocess`` turns what the
    caller sends into the model's inputs, ``postprocess`` the model's outputs into what
    the caller gets. Each is an entry point ``module:function`` of a ``.py`` file of the
    package (``tokenizer:encode`` is ``tokenizer.py``), restricted to the standard
    library and numpy."""

    preprocess: str | None = Field(default=None, max_length=256)
    postprocess: str | None = Field(default=None, max_length=256)
    model_inputs: list[TensorSpec] | None = Field(
        default=None,
        max_length=256,
        description=(
            "The model's own inputs, which preprocess returns (default: 'inputs', what "
            "callers send)."
        ),
    )
    model_outputs: list[TensorSpec] | None = Field(
        default=None,
        max_length=256,
        description=(
            "The model's own outputs, which postprocess is given (default: 'outputs', "
            "what callers get)."
        ),
    )
    data: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Other package files the code reads (a vocabulary...), by path.",
    )


class Postprocessing(_Strict):
    """What callers' outputs mean, declared (no code: that is ``processing``)."""

    labels: list[str | int] | None = Field(
        default=None,
        max_length=100_000,
        description=(
            "The class of each column of the output, in order: a prediction's answer is "
            "the label of its largest column (prediction log, outcomes, shadow copies), and "
            "a fallback version must declare the same labels."
        ),
    )
    class_labels: dict[str, list[str | int]] | None = Field(
        default=None,
        description=(
            "By output name, the class of each column of a probability output served from "
            "an ONNX ZipMap (recorded by 'modelport push')."
        ),
    )

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only the fields given: the form (and digest) a free-form object had.
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if v is not None}


SCHEMA_VERSION = 1
"""The manifest schema this code defines (``schema_version``)."""

RETIRED_FIELDS = ("preprocessing",)
"""Top-level fields a manifest once had and may no longer have: a stored version keeps
them (``stored_manifest``), so that its digest stays what it was."""


class Manifest(_Strict):
    """What a model version is. Its canonical digest is the version's identity.

    Every object of a manifest refuses a field it does not define (a later
    ``schema_version`` may define more), except ``runtime``, the format's own options."""

    _retired: dict[str, Any] = PrivateAttr(default_factory=dict)
    """Fields of a stored version that the schema has retired, as they were stored."""

    schema_version: Literal[1] = 1
    format: str = Field(
        description=(
            "Model format, e.g. 'onnx'. The platform runs 'onnx' and, with the "
            "modelport[llm] extra, 'transformers'; a version of another "
            "format is stored and checked, and can be approved only once a platform admin "
            "has accepted that format. Files are refused for code-bearing contents "
            "(pickles...) whatever the format."
        )
    )
    files: list[FileEntry] = Field(min_length=1)
    inputs: list[TensorSpec] = Field(min_length=1)
    outputs: list[TensorSpec] = Field(min_length=1)
    license: str = Field(description="SPDX license identifier or expression.")
    lineage: Lineage = Field(default_factory=Lineage)
    resources: Resources = Field(default_factory=Resources)
    examples: list[Example] = Field(default_factory=list, max_length=16)
    runtime: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Runtime requirements and options, e.g. opset; 'execution': 'thread' (the "
            "default: on threads of the serving process) or 'process' (in worker processes "
            "that a deadline can kill); 'deterministic' (a boolean, default false): the "
            "same input always gives the same answer, so answers may be cached; for "
            "'transformers': task, context_length, parameters, quantization, kv_cache_bytes, "
            "engine ('llama.cpp' or 'transformers': pins the generative engine)."
        ),
    )
    postprocessing: Postprocessing | None = Field(
        default=None,
        description="Declarations about the outputs (no code: publisher code is 'processing').",
    )
    processing: Processing | None = Field(
        default=None,
        description=(
            "Publisher pre- and post-processing code. With it, 'inputs' and 'outputs' "
            "(and the examples) are what callers send and get."
        ),
    )
    description: str = Field(default="", max_length=10_000)
    tags: list[str] = Field(default_factory=list, max_length=64)

    @field_validator("runtime")
    @classmethod
    def _runtime(cls, v: dict[str, Any]) -> dict[str, Any]:
        execution = v.get("execution", "thread")
        if execution not in EXECUTION_MODES:
            raise ValueError(
                f"execution must be one of {', '.join(EXECUTION_MODES)}, not {execution!r}"
            )
        if "deterministic" in v and not isinstance(v["deterministic"], bool):
            raise ValueError("deterministic must be true or false")
        return v

    @field_validator("format")
    @classmethod
    def _format(cls, v: str) -> str:
        if not _FORMAT_RE.match(v):
            raise ValueError("must be a lowercase identifier such as 'onnx'")
        return v

    @property
    def retired_fields(self) -> dict[str, Any]:
        """Fields of a stored version the schema has since retired (``stored_manifest``)."""
        return dict(self._retired)

    @property
    def deterministic(self) -> bool:
        """Declared deterministic (``runtime.deterministic``): its answers may be cached."""
        return self.runtime.get("deterministic") is True

    @model_validator(mode="after")
    def _unique(self) -> Manifest:
        for label, names in (
            ("files", [f.path for f in self.files]),
            ("inputs", [t.name for t in self.inputs]),
            ("outputs", [t.name for t in self.outputs]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {label}: {', '.join(dupes)}")
        return self

    def for_runtime(self) -> Manifest:
        """The manifest as the model itself sees it: with processing, the model's own
        tensors and no examples (those are the caller's, run through the processing by
        validation). Without processing, this manifest."""
        if self.processing is None:
            return self
        return self.model_copy(
            update={
                "inputs": self.processing.model_inputs or self.inputs,
                "outputs": self.processing.model_outputs or self.outputs,
                "examples": [],
                "processing": None,
            }
        )


def stored_manifest(raw: str | bytes) -> Manifest:
    """A manifest as the registry stored it (its canonical JSON). One published before a
    field was retired (``RETIRED_FIELDS``, or a ``postprocessing`` the schema now refuses)
    keeps that field aside, unread but still in its canonical form, so its digest and
    signatures hold."""
    data = json.loads(raw)
    retired = {k: data.pop(k) for k in RETIRED_FIELDS if k in data}
    post = data.get("postprocessing")
    if post is not None:
        try:
            Postprocessing.model_validate(post)
        except ValidationError:
            retired["postprocessing"] = data.pop("postprocessing")
    manifest = Manifest.model_validate(data)
    manifest._retired = {k: v for k, v in retired.items() if v is not None}
    return manifest
