"""The inference use case, one service for every surface (``/v2``, endpoints, later
``/v1``, gRPC and jobs): surfaces parse, call it, and encode."""
