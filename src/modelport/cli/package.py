"""A model package on disk: its files, and the manifest ``push`` completes or builds.

If the folder has a ``manifest.json`` it is used, with its ``files`` list rewritten from
what is on disk; otherwise one is built from options and what the files say (for ONNX,
the graph's inputs and outputs; for a ``transformers`` model folder, its task, tensors,
context length, parameter count, quantization and an example computed locally as
validation will run it). The ``manifest.json`` itself is not a model file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from modelport.cli.ignore import IGNORE_FILE, IgnoreRules
from modelport.client.transfer import LocalFile
from modelport.errors import InvalidInput
from modelport.registry.service import parse_manifest
from modelport.runtime.formats.onnx_graph import Signature, signature
from modelport.runtime.formats.trees.availability import TREE_FORMATS, tree_installed

MANIFEST_NAME = "manifest.json"
TRANSFORMERS = "transformers"


def package_files(root: Path) -> list[tuple[str, Path]]:
    """The model files under ``root`` as (manifest path, file), sorted.

    Hidden files and folders (a leading ``.``), the top-level ``manifest.json`` and what
    ``root/.modelportignore`` names (``cli.ignore``) are left out; symbolic links are
    followed.
    """
    if not root.is_dir():
        raise InvalidInput(f"{root} is not a folder", code="not_a_folder")
    rules = IgnoreRules.of(root)
    found: list[tuple[str, Path]] = []
    for folder, dirs, names in os.walk(root, followlinks=True):
        here = Path(folder).relative_to(root)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and not rules.ignored((here / d).as_posix(), folder=True)
        )
        for name in names:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if name.startswith(".") or relative == MANIFEST_NAME or not path.is_file():
                continue
            if rules.ignored(relative):
                continue
            found.append((relative, path))
    if not found:
        raise InvalidInput(
            f"{root} has no model files (after {IGNORE_FILE})"
            if (root / IGNORE_FILE).is_file()
            else f"{root} has no model files",
            code="empty_package",
        )
    return sorted(found)


def read_manifest(root: Path) -> dict[str, Any] | None:
    path = root / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not valid JSON: {exc}", code="invalid_manifest") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold a JSON object", code="invalid_manifest")
    return data


def complete_manifest(
    root: Path,
    files: list[LocalFile],
    *,
    fmt: str | None = None,
    license: str | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """The manifest to publish: ``root/manifest.json`` (or a new one) with ``files`` from
    disk and the given options applied over it, validated."""
    manifest = read_manifest(root) or {}
    manifest["files"] = [{"path": f.path, "digest": f.digest, "size": f.size} for f in files]
    if fmt:
        manifest["format"] = fmt
    elif "format" not in manifest:
        manifest["format"] = _infer_format(files)
    if license:
        manifest["license"] = license
    elif "license" not in manifest:
        raise InvalidInput(
            "the package needs a license: pass --license with an SPDX identifier",
            code="missing_license",
        )
    if description:
        manifest["description"] = description
    if manifest["format"] == "onnx" and not ("inputs" in manifest and "outputs" in manifest):
        graph = _onnx_entrypoint(manifest, files)
        found = onnx_signature(graph.source)
        manifest.setdefault("inputs", found.inputs)
        if "outputs" not in manifest:
            manifest["outputs"] = found.outputs
            if found.class_labels:
                # The runtime serves a ZipMap's probabilities as a tensor; its columns
                # are these classes, in this order.
                post = manifest.setdefault("postprocessing", {}) or {}
                post.setdefault("class_labels", found.class_labels)
                manifest["postprocessing"] = post
    if manifest["format"] == TRANSFORMERS and not ("inputs" in manifest and "outputs" in manifest):
        _describe_transformers(manifest, files)
    if manifest["format"] in TREE_FORMATS and not ("inputs" in manifest and "outputs" in manifest):
        _describe_tree(manifest, files)
    parse_manifest(manifest)  # refuse a bad manifest before any bytes are sent
    return manifest


def _infer_format(files: list[LocalFile]) -> str:
    onnx_files = [f for f in files if f.path.endswith(".onnx")]
    if len(onnx_files) == 1:
        return "onnx"
    top = {f.path for f in files if "/" not in f.path}
    trees = {_sniff_tree(f.source) for f in files if f.path in top} - {None}
    if len(trees) == 1:
        return str(trees.pop())
    if any(p.endswith(".gguf") for p in top) or (
        "config.json" in top and any(p.endswith(".safetensors") for p in top)
    ):
        return TRANSFORMERS
    raise InvalidInput(
        "cannot tell the model format from the files: pass --format or write a manifest.json",
        code="unknown_format",
    )


def _describe_transformers(manifest: dict[str, Any], files: list[LocalFile]) -> None:
    """Fill what a ``transformers`` model folder says about itself; what the
    ``manifest.json`` already holds is kept (its ``runtime`` keys too)."""
    from modelport.runtime.formats.transformers.availability import require_llm

    require_llm()
    from modelport.runtime.formats.transformers.describe import describe_package

    described = describe_package({f.path: f.source for f in files})
    manifest.setdefault("inputs", described["inputs"])
    manifest.setdefault("outputs", described["outputs"])
    manifest["runtime"] = {**described["runtime"], **(manifest.get("runtime") or {})}
    if described.get("resources"):
        manifest["resources"] = {**described["resources"], **(manifest.get("resources") or {})}
    if not manifest.get("examples"):
        manifest["examples"] = described["examples"]


def _sniff_tree(path: Path) -> str | None:
    if path.suffix not in (".ubj", ".skops", ".json", ".txt"):
        return None
    from modelport.runtime.formats.trees.describe import sniff_format

    return sniff_format(path)


def _describe_tree(manifest: dict[str, Any], files: list[LocalFile]) -> None:
    """Fill ``inputs`` and ``outputs`` from the tree model file (read by its library)."""
    fmt = manifest["format"]
    if not tree_installed(fmt):
        raise InvalidInput(
            f"reading a {fmt} model needs its library: install modelport[trees], or list "
            "inputs and outputs in manifest.json",
            code="unsupported_format",
        )
    from modelport.runtime.formats.trees.describe import describe

    entry = (manifest.get("runtime") or {}).get("entrypoint")
    suffixes = TREE_FORMATS[fmt]
    found = [f for f in files if (f.path == entry if entry else f.path.endswith(suffixes))]
    if len(found) != 1:
        raise InvalidInput(
            f"cannot find the {fmt} model file: keep one {' or '.join(suffixes)} file, set "
            "runtime.entrypoint, or list inputs and outputs in manifest.json",
            code="unknown_entrypoint",
        )
    described = describe(fmt, found[0].source)
    manifest.setdefault("inputs", described["inputs"])
    manifest.setdefault("outputs", described["outputs"])


def _onnx_entrypoint(manifest: dict[str, Any], files: list[LocalFile]) -> LocalFile:
    entry = (manifest.get("runtime") or {}).get("entrypoint")
    candidates = [f for f in files if (f.path == entry if entry else f.path.endswith(".onnx"))]
    if len(candidates) != 1:
        raise InvalidInput(
            "cannot find the ONNX graph to read inputs and outputs from: keep one .onnx file, "
            "set runtime.entrypoint, or list inputs and outputs in manifest.json",
            code="unknown_entrypoint",
        )
    return candidates[0]


def onnx_signature(path: Path) -> Signature:
    """Inputs and outputs of an ONNX graph as manifest tensor specs (-1 for a free dim),
    a ZipMap output as its ``FP32 [-1, classes]`` tensor (``onnx_graph``)."""
    import onnx

    try:
        model = onnx.load(os.fspath(path), load_external_data=False)
    except Exception as exc:  # protobuf raises its own error types
        raise InvalidInput(
            f"{path.name} is not a readable ONNX model: {exc}", code="bad_onnx"
        ) from None
    return signature(model, path.name)
