"""HTTP surfaces. Thin: parse, authenticate, call one service, encode."""

from modelport.api.app import create_app

__all__ = ["create_app"]
