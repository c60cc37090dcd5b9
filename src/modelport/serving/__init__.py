"""The abstraction layer: endpoints, deployments, traffic, backends, health, fallback."""
