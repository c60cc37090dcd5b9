"""``.modelportignore``: the files of a package folder that ``push`` leaves out.

Patterns as in ``.gitignore``, one a line: ``#`` starts a comment, ``!`` re-includes
what an earlier pattern left out, a trailing ``/`` matches folders only, a pattern with
another ``/`` is anchored at the package's root (otherwise it matches a name at any
depth), ``*`` and ``?`` match within a name, ``**`` across folders, ``[...]`` a
character class. The last pattern that matches decides. A folder left out is not
entered, so nothing under it can be re-included (as with git).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

IGNORE_FILE = ".modelportignore"


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    folders_only: bool


class IgnoreRules:
    """The rules of one ignore file (none: nothing is left out)."""

    def __init__(self, lines: list[str] | None = None) -> None:
        self._rules = [rule for line in lines or [] if (rule := _parse(line)) is not None]

    @classmethod
    def of(cls, root: Path) -> IgnoreRules:
        """The rules of ``root/.modelportignore``, if there is one."""
        path = root / IGNORE_FILE
        return cls(path.read_text().splitlines() if path.is_file() else None)

    def ignored(self, relative: str, *, folder: bool = False) -> bool:
        """Whether ``relative`` (a POSIX path under the root) is left out."""
        verdict = False
        for rule in self._rules:
            if rule.folders_only and not folder:
                continue
            if rule.regex.fullmatch(relative):
                verdict = not rule.negated
        return verdict


def _parse(line: str) -> _Rule | None:
    line = line.rstrip("\n")
    if line.endswith(" ") and not line.endswith("\\ "):
        line = line.rstrip(" ")
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated or line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    folders_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _translate(line)
    prefix = "" if anchored else "(?:.*/)?"
    return _Rule(re.compile(prefix + body), negated, folders_only)


def _translate(pattern: str) -> str:
    """A gitignore glob as a regular expression over a POSIX relative path."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            inner = pattern[i + 1 : end]
            if inner.startswith("!"):
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)
