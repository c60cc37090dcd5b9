"""The inference use case: one service every surface calls (``InferenceService``)."""
