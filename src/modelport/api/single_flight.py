"""Moved to ``modelport.single_flight`` (the inference service uses it, and a service
must not import the HTTP layer); kept here for existing imports."""

from modelport.single_flight import SingleFlight, retrieve_failure

__all__ = ["SingleFlight", "retrieve_failure"]
