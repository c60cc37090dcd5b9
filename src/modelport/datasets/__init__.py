"""Datasets as assets: named, versioned, content-addressed packages of split files."""
