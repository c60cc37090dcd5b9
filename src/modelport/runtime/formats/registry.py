"""Model formats come from plugins: the ``modelport.formats`` entry point group.

A format is added by installing a package that declares, in its own metadata::

    [project.entry-points."modelport.formats"]
    myformat = "my_package.formats:MyFormat"

modelport declares ``onnx`` the same way. A plugin's class (a ``ModelFormat``) is
imported only when a model of its format is first loaded, and is constructed with that
format's options from the settings. A name in ``UNSAFE_FORMATS`` (pickle and the like,
which execute code when loaded) is refused even when a plugin claims it. Where the
installed distribution's metadata lacks the group (a source checkout not reinstalled
since the group was declared), the built-in ``onnx`` entry stands in for it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points

from modelport.errors import InvalidInput, Unprocessable
from modelport.manifest import UNSAFE_FORMATS
from modelport.runtime.formats.base import ModelFormat

_log = logging.getLogger(__name__)

GROUP = "modelport.formats"
BUILT_IN = (EntryPoint("onnx", "modelport.runtime.formats.onnx:OnnxFormat", GROUP),)


def discover(found: Iterable[EntryPoint] | None = None) -> dict[str, EntryPoint]:
    """The format plugins by name: ``found`` (the installed entry points of the group
    when None), then the built-in ones that none of them names. Unsafe names are left
    out, and of two plugins with one name the first is kept; both are logged."""
    plugins: dict[str, EntryPoint] = {}
    listed = list(entry_points(group=GROUP) if found is None else found)
    for entry in [*listed, *(e for e in BUILT_IN if e.name not in {x.name for x in listed})]:
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
        raise Unprocessable(
            f"no runtime for format '{name}' (known: {', '.join(sorted(known))})",
            code="unsupported_format",
        )
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
