"""SQLite databases at the head revision for tests' own homes, copied from one database
migrated per test process: a migration from nothing costs about half a second a test."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

from modelport.store import upgrade

_lock = threading.Lock()
_template: list[Path] = []


def migrated_template() -> Path:
    """This process's migrated SQLite database (made on first use, removed at exit)."""
    with _lock:
        if not _template:
            folder = Path(tempfile.mkdtemp(prefix="modelport-sqlite-template-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "template.db"
            upgrade(f"sqlite:///{path}")
            _template.append(path)
        return _template[0]


def migrated_sqlite(path: Path) -> str:
    """The URL of a SQLite database at ``path`` at the head revision: a copy of the
    template unless a database is there already (a later process's services on the same
    home share it)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(migrated_template(), path)
    return f"sqlite:///{path}"
