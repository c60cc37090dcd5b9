"""The published manifest JSON Schema (docs/manifest.schema.json) matches the code.

To regenerate after changing ``modelport.manifest``::

    MODELPORT_TEST_REGENERATE_DOCS=1 pytest tests/registry/test_manifest_docs.py
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from modelport.manifest import parse_manifest
from modelport.manifest.types import Manifest

DOCS = Path(__file__).resolve().parents[2] / "docs"
SCHEMA = DOCS / "manifest.schema.json"


def render_schema() -> str:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://modelport.dev/schemas/manifest.schema.json",
        **Manifest.model_json_schema(),
    }
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def test_committed_schema_is_current() -> None:
    current = render_schema()
    if os.environ.get("MODELPORT_TEST_REGENERATE_DOCS"):
        SCHEMA.write_text(current)
    assert SCHEMA.read_text() == current, (
        "docs/manifest.schema.json is stale: regenerate it (see this test's docstring)"
    )


def test_the_example_in_the_manifest_doc_is_valid() -> None:
    text = (DOCS / "manifest.md").read_text()
    block = re.search(r"```json\n(.*?)```", text, re.S)
    assert block is not None
    manifest = parse_manifest(json.loads(block.group(1)))
    assert manifest.format == "onnx"
    for field in Manifest.model_fields:
        assert f"`{field}`" in text, f"docs/manifest.md does not describe {field}"
