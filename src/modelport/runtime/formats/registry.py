"""Model formats come from plugins: the ``modelport.formats`` entry point group.

A format is added by installing a package that declares, in its own metadata::

    [project.entry-points."modelport.formats"]
    myformat = "my_package.formats:MyFormat"

modelport declares ``onnx``, ``transformers`` (embedding models; it needs the
``modelport[llm]`` extra) and the tree formats ``xgboost``, ``lightgbm`` and ``sklearn``
(the ``modelport[trees]`` extra) the same way. A plugin's class (a ``ModelFormat``) is
imported only when a model of its format is first loaded, and is constructed with that
format's options from the settings. A name in ``UNSAFE_FORMATS`` (pickle and the like,
which execute code when loaded) is refused even when a plugin claims it. Where the
installed distribution's metadata lacks the group (a source checkout not reinstalled
since the group was declared), the built-in entries stand in for it: ``onnx``, and
the others whose extra is installed.

Generative plugins (``GenerativeFormat``) are built in: ``generative_formats`` answers
those whose requirements are installed (``transformers`` with ``modelport[llm]``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points

from modelport.errors import InvalidInput, Unprocessable
from modelport.manifest import UNSAFE_FORMATS
from modelport.runtime.formats.base import GenerativeFormat, ModelFormat
from modelport.runtime.formats.transformers.availability import LLM_EXTRA, llm_installed
from modelport.runtime.formats.trees.availability import TREES_EXTRA, tree_installed

_log = logging.getLogger(__name__)

GROUP = "modelport.formats"
ONNX_ENTRY = EntryPoint("onnx", "modelport.runtime.formats.onnx:OnnxFormat", GROUP)
TRANSFORMERS_ENTRY = EntryPoint(
    "transformers",
    "modelport.runtime.formats.transformers.embedding:TransformersEmbeddingFormat",
    GROUP,
)
TREE_ENTRIES = {
    library: EntryPoint(library, f"modelport.runtime.formats.trees.format:{cls}", GROUP)
    for library, cls in (
        ("xgboost", "XGBoostFormat"),
        ("lightgbm", "LightGBMFormat"),
        ("sklearn", "SklearnFormat"),
    )
}
EXTRAS = {"transformers": LLM_EXTRA, **dict.fromkeys(TREE_ENTRIES, TREES_EXTRA)}
"""Formats of modelport's own that need an extra installed, and which."""


def built_in() -> tuple[EntryPoint, ...]:
    """modelport's own tensor plugins whose requirements are installed."""
    trees = tuple(entry for name, entry in TREE_ENTRIES.items() if tree_installed(name))
    return (ONNX_ENTRY, *((TRANSFORMERS_ENTRY,) if llm_installed() else ()), *trees)


BUILT_IN = (ONNX_ENTRY, TRANSFORMERS_ENTRY, *TREE_ENTRIES.values())
"""Every tensor plugin modelport ships (``built_in``: those that can load)."""


def missing_runtime(name: str, known: Iterable[str]) -> str:
    """Why no runtime serves format ``name``: the extra to install, or what is known."""
    if name in EXTRAS and name not in known:
        return f"no runtime for format '{name}': install {EXTRAS[name]}"
    return f"no runtime for format '{name}' (known: {', '.join(sorted(known))})"


def discover(found: Iterable[EntryPoint] | None = None) -> dict[str, EntryPoint]:
    """The format plugins by name: ``found`` (the installed entry points of the group
    when None), then the built-in ones that none of them names. Unsafe names are left
    out, and of two plugins with one name the first is kept; both are logged."""
    plugins: dict[str, EntryPoint] = {}
    listed = list(entry_points(group=GROUP) if found is None else found)
    names = {x.name for x in listed}
    for entry in [*listed, *(e for e in built_in() if e.name not in names)]:
        if entry.name in UNSAFE_FORMATS:
            _log.warning("format plugin %s=%s ignored: an unsafe format", entry.name, entry.value)
        elif entry.name in plugins:
            _log.warning(
                "format plugin %s=%s ignored: %s came first",
                entry.name,
                entry.value,
                plugins[entry.name].value,
            )
        else:
            plugins[entry.name] = entry
    return plugins


@functools.cache
def installed_formats() -> Mapping[str, EntryPoint]:
    """The installed format plugins (read once per process)."""
    return discover()


def known_formats() -> frozenset[str]:
    """Names of the installed formats (no plugin is imported to answer)."""
    return frozenset(installed_formats())


def get_format(
    name: str,
    options: Mapping[str, object] | None = None,
    *,
    plugins: Mapping[str, EntryPoint] | None = None,
) -> ModelFormat:
    """The format ``name`` (of ``plugins``, the installed ones by default), constructed
    with ``options``; raises ``unsafe_format`` or ``unsupported_format``."""
    if name in UNSAFE_FORMATS:
        raise InvalidInput(
            f"format '{name}' executes code when loaded and is refused", code="unsafe_format"
        )
    known = installed_formats() if plugins is None else plugins
    entry = known.get(name)
    if entry is None:
        raise Unprocessable(missing_runtime(name, known), code="unsupported_format")
    try:
        plugin = entry.load()
    except Exception as exc:  # a broken plugin fails its own format, not the process
        raise Unprocessable(
            f"the plugin for format '{name}' ({entry.value}) could not be loaded: {exc}",
            code="unsupported_format",
        ) from exc
    instance: ModelFormat = plugin(**(options or {}))
    return instance


class FormatRegistry:
    """Format plugins with per-format options (from settings), one instance per format.
    ``plugins`` replaces the installed ones (tests register a format this way)."""

    def __init__(
        self,
        options: dict[str, dict[str, object]] | None = None,
        *,
        plugins: Mapping[str, EntryPoint] | None = None,
    ) -> None:
        self._options = options or {}
        self._plugins = plugins
        self._instances: dict[str, ModelFormat] = {}

    @property
    def names(self) -> frozenset[str]:
        """The formats this registry can load."""
        return frozenset(installed_formats() if self._plugins is None else self._plugins)

    def __call__(self, name: str) -> ModelFormat:
        """The plugin for ``name``; raises ``unsafe_format`` / ``unsupported_format``."""
        if name not in self._instances:
            self._instances[name] = get_format(name, self._options.get(name), plugins=self._plugins)
        return self._instances[name]

    def spec(self, name: str) -> tuple[str, Mapping[str, object]]:
        """Where ``name``'s plugin lives (``module:Class``) and its options: what a worker
        process needs to construct the same plugin. Raises as ``__call__`` does."""
        self(name)
        plugins = installed_formats() if self._plugins is None else self._plugins
        return plugins[name].value, dict(self._options.get(name) or {})


GENERATIVE = {
    "transformers": (
        "modelport.runtime.formats.transformers.generative:TransformersGenerativeFormat",
        llm_installed,
    ),
}
"""modelport's generative plugins: where each lives, and whether it can load here."""


def generative_formats(
    options: Mapping[str, Mapping[str, object]] | None = None,
) -> dict[str, GenerativeFormat]:
    """The generative plugins whose requirements are installed, constructed with their
    options (by format name); none is imported otherwise."""
    plugins: dict[str, GenerativeFormat] = {}
    for name, (value, installed) in GENERATIVE.items():
        if installed():
            cls = EntryPoint(name, value, "modelport.generative_formats").load()
            plugins[name] = cls(**dict((options or {}).get(name, {})))
    return plugins
