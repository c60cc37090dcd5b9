"""The model registry: models, immutable versions, lifecycle, aliases, lineage."""
