"""Fixtures of the client tests (shared with the CLI's: see ``platform``)."""

from tests.client.platform import platform

__all__ = ["platform"]
