"""The background primitives: work that runs beside the request path, in threads or tasks.

``group_thread`` (a worker thread that takes queued jobs a batch at a time),
``single_flight`` (one read per key for concurrent callers), ``loops`` (the periodic-task
primitive: a step repeated, with backoff, in a daemon thread or an asyncio task),
``pools`` (the process's shared thread pools), ``subscription`` (a Redis pub/sub channel
that resubscribes after a lost connection). Each depends on nothing else in modelport
but ``modelport.clock``, so every layer may use them.
"""
