"""``modelport migrate`` in a process that stops itself at a chosen point.

``python -m tests.migrate_process STOP SIGNAL`` counts every statement the process
sends to the database and every commit it asks for; at the ``STOP``-th it sends
itself ``SIGNAL`` (``KILL``, ``TERM`` or ``INT``, the last one like Ctrl-C). ``STOP``
0 never stops: the process then prints how many points it passed. The database is
the one ``MODELPORT_DATABASE_URL`` / ``MODELPORT_HOME`` name, as for the real command.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from sqlalchemy import Engine, event


def main() -> None:
    stop, signame = int(sys.argv[1]), sys.argv[2]
    # A process started from a background job inherits SIGINT ignored: Ctrl-C's
    # KeyboardInterrupt is what this process must see, however it was started.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    seen = 0

    def point(*_args: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == stop:
            os.kill(os.getpid(), getattr(signal, f"SIG{signame}"))

    event.listen(Engine, "after_cursor_execute", point)
    event.listen(Engine, "commit", point)  # before the COMMIT is sent

    from modelport.cli import modelport

    try:
        modelport.main(["migrate"], standalone_mode=False)
    finally:
        print(f"points={seen}", file=sys.stderr)


if __name__ == "__main__":
    main()
