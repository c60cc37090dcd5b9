"""Print the part of ``requirements/lock.txt`` that one install needs: modelport's own
dependencies and those of the extras named, with everything they pull in, each pin with
its hashes as locked (so ``pip install --require-hashes`` checks them).

The lock is compiled with every extra (dev tools included); the container image wants
the runtime's share only. pip-compile writes, under each pin, which packages required it
(``# via``): a pin belongs to the share when pyproject.toml names it for the chosen
extras, or when one of the packages it came through does. Standard library only: the
image's build stage runs it before anything is installed.

    python scripts/lock_subset.py requirements/lock.txt pyproject.toml llm,otel > share.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
SELF = "modelport"


def canonical(name: str) -> str:
    """PEP 503's normal form: ``Foo_Bar.baz`` and ``foo-bar-baz`` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def roots(pyproject: str, extras: list[str]) -> set[str]:
    """The projects pyproject.toml requires directly, with the ``extras`` named."""
    project = tomllib.loads(pyproject)["project"]
    known = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in known]
    if unknown:
        raise SystemExit(f"lock_subset: no extra {', '.join(unknown)} in pyproject.toml")
    texts = list(project["dependencies"])
    for extra in extras:
        texts.extend(known[extra])
    names = set()
    for text in texts:
        match = NAME.match(text)
        if match:
            names.add(canonical(match.group(1)))
    return names


def blocks(lock: str) -> list[tuple[str, list[str], set[str]]]:
    """The lock's pins: (name, the pin's lines, the names it came through)."""
    found: list[tuple[str, list[str], set[str]]] = []
    for line in lock.splitlines():
        match = PIN.match(line)
        if match:
            found.append((canonical(match.group(1)), [line], set()))
            continue
        if not found or not line.startswith(" "):
            continue  # the header, blank lines, and the "unsafe" section's comment
        _, lines, parents = found[-1]
        text = line.strip()
        if text.startswith("--hash="):
            lines.append(line)
        elif text.startswith("#"):
            # "# via x" or, one per line after "# via", "#   x"; "-r file" names no parent
            parent = text.lstrip("#").strip().removeprefix("via").strip()
            if parent and not parent.startswith("-r "):
                parents.add(canonical(parent.split(" ")[0]))
    return found


def subset(lock: str, pyproject: str, extras: list[str]) -> str:
    """The pins that an install of modelport with ``extras`` needs, in the lock's order."""
    pins = blocks(lock)
    locked = {name for name, _, _ in pins}
    wanted = roots(pyproject, extras)
    missing = sorted(wanted - locked)
    if missing:
        raise SystemExit(f"lock_subset: not in the lock: {', '.join(missing)}")
    # A fixed point: each pass adds what came through a package already chosen.
    chosen = set(wanted)
    grew = True
    while grew:
        grew = False
        for name, _, parents in pins:
            if name not in chosen and (parents - {SELF}) & chosen:
                chosen.add(name)
                grew = True
    return "".join("\n".join(lines) + "\n" for name, lines, _ in pins if name in chosen)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    extras = [extra.strip() for extra in (argv[2] if len(argv) == 3 else "").split(",")]
    text = subset(Path(argv[0]).read_text(), Path(argv[1]).read_text(), [e for e in extras if e])
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
