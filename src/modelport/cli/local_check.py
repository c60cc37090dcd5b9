"""``push --dry-run``: what publishing and validation would check, done here, with no
request to the server and no version number spent.

In order: the manifest against the registry's own rules (schema, safe format, SPDX
license, examples that agree with the declared tensors: ``registry.service.parse_manifest``);
every file's contents for code-bearing data (pickles and the like:
``registry.content``); then, for a format this machine runs, the validation itself: the
model is loaded by its format plugin and every example is run and compared within its
tolerance, on the declared outputs in their declared datatypes. What needs the server
(blobs it holds, lineage parents, the owner's tenant, names already taken) is not
checked. The first failure raises ``InvalidInput`` with the code the server would use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelport.client.transfer import LocalFile
from modelport.errors import InvalidInput, ModelportError
from modelport.manifest import Manifest
from modelport.registry import content
from modelport.registry.service import parse_manifest, unsafe_content
from modelport.runtime.examples import run_example
from modelport.runtime.formats import get_format, known_formats
from modelport.runtime.outputs import DeclaredOutputs


def check_locally(manifest_data: dict[str, Any], files: list[LocalFile]) -> list[str]:
    """Run the local checks; one line per check that passed."""
    manifest = parse_manifest(manifest_data)
    done = ["manifest: schema, format, license and examples are valid"]
    for index, file in enumerate(files):
        found = content.sniff_path(file.source)
        if found is not None:
            raise unsafe_content(file.path, found, field=f"manifest.files.{index}")
    done.append(f"files: {len(files)} checked, no code-bearing contents")
    if manifest.format not in known_formats():
        done.append(
            f"format '{manifest.format}' is not run by the platform: validation checks its "
            "files only, and approval needs a platform admin's decision (docs/manifest.md)"
        )
        return done
    if not manifest.examples:
        raise InvalidInput(
            f"format '{manifest.format}' is executable, so validation needs at least one "
            "example: pass --example-input FILE (or list examples in manifest.json)",
            code="no_examples",
        )
    done.append(_run_examples(manifest, {f.path: f.source for f in files}))
    return done


def _run_examples(manifest: Manifest, paths: dict[str, Path]) -> str:
    runtime = manifest.for_runtime()  # with processing: the model's own tensors
    try:
        loaded = get_format(manifest.format).load(paths, runtime)
    except ModelportError as exc:
        raise InvalidInput(f"the model does not load: {exc.message}", code="load_failed") from None
    if manifest.processing is not None:
        # The examples are the caller's: only the server's validation runs them, through
        # the processing code, in its sandbox.
        loaded.unload()
        return (
            "validation: the model loads; its examples go through its processing code, "
            "which the server's validation runs"
        )
    model = DeclaredOutputs(loaded, manifest.outputs)
    try:
        for index, example in enumerate(manifest.examples):
            try:
                result = run_example(model, example, index)
            except ModelportError as exc:
                problems = [exc.message]
            except Exception as exc:  # the model's own library refused the example
                problems = [str(exc)]
            else:
                problems = result.problems
            if problems:
                raise InvalidInput(
                    f"example {index} fails validation: " + "; ".join(problems),
                    code="validation_failed",
                    problems=problems,
                )
    finally:
        model.unload()
    return f"validation: the model loads and its {len(manifest.examples)} example(s) pass"
