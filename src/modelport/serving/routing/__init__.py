"""Routing: the in-memory snapshot of live deployments, version choice, replicas, shadow."""
