"""Write docs/settings.md, one table per section of ``modelport.config.Settings``, from
the fields themselves (flat name, default, docstring): ``python scripts/settings_doc.py``.
``tests/test_config.py`` fails while the file differs from what this renders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from modelport.config import SECTIONS, Section, Settings, default_home

DOC = Path(__file__).resolve().parent.parent / "docs" / "settings.md"

HEADER = """\
# Settings

Written by `scripts/settings_doc.py` from `modelport.config`: do not edit by hand.

Every setting is an environment variable `MODELPORT_<NAME>`, read once when a process
starts. In code the settings are grouped by concern: `settings.<section>.<field>`
(`settings.runtime.max_batch_size` is `MODELPORT_RUNTIME_MAX_BATCH_SIZE`). The names
of the environment are flat, as they always were: no section prefix is added, and
`Settings(...)` takes the same names, lower-cased, as keywords
(`Settings(home=..., admin_key=...)`) beside whole sections.

Two settings describe the process itself and belong to no section:

| setting | field | default | meaning |
|---|---|---|---|
"""


def _text(info: FieldInfo) -> str:
    """The field's docstring on one line, in Markdown."""
    text = " ".join((info.description or "").split())
    return text.replace("``", "`").replace("|", "\\|")


def _size(value: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value >> shift} {unit}"
    return str(value)


def _default(name: str, info: FieldInfo) -> str:
    if info.default_factory is default_home:
        return "the user's data folder (`platformdirs`)"
    value: Any = info.get_default(call_default_factory=True)
    if value is PydanticUndefined or value is None:
        return "unset"
    if hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and name.endswith("_bytes"):
        return _size(value)
    if value in ("", (), {}):
        return "empty"
    return f"`{getattr(value, 'value', value)}`"


def _row(flat: str, field: str, name: str, info: FieldInfo) -> str:
    return f"| `MODELPORT_{flat.upper()}` | `{field}` | {_default(name, info)} | {_text(info)} |"


def render() -> str:
    lines = [HEADER.rstrip("\n")]
    for name, info in Settings.model_fields.items():
        if name not in SECTIONS:
            lines.append(_row(name, name, name, info))
    for section, model in SECTIONS.items():
        lines += ["", f"## `{section}`", "", _section_doc(model), ""]
        lines += ["| setting | field | default | meaning |", "|---|---|---|---|"]
        for flat, field in model.flat_names().items():
            info = model.model_fields[field]
            lines.append(_row(flat, f"{section}.{field}", field, info))
    return "\n".join(lines) + "\n"


def _section_doc(model: type[Section]) -> str:
    return re.sub(r"\s+", " ", (model.__doc__ or "").strip()).replace("``", "`")


def main() -> None:
    DOC.write_text(render())


if __name__ == "__main__":
    main()
