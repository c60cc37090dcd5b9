"""What the marketplace's assets beside models share (datasets, prompt templates): a
name in a tenant's namespace with a visibility, immutable versions whose manifest's
canonical digest is their identity, and the models' access rule on their own facts.

``manifests`` parses and digests a version's manifest, ``access`` decides who may do
what to an asset, ``queries`` reads and writes an asset's rows and its versions'.
"""
