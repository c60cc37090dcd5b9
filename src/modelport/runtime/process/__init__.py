"""Model execution in worker processes that a deadline can kill (``runtime.execution:
"process"``): the crash ledger, the shared-memory tensor layout, the worker's main loop,
the parent's handle on one worker, and the ``ProcessExecutor``."""
