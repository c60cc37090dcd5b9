"""The runtime layer: load a version's files as described by its manifest, and execute.

It never imports the registry, the store or the HTTP layer: it is handed files and
a manifest.
"""
