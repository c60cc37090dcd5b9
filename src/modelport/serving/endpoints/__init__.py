"""Endpoints and deployments: the serving control plane (specs, validation, controller)."""
