"""Drift and quality of what an endpoint's versions answer, over the prediction log.

``drift`` and ``quality`` are pure statistics; ``columns`` turns logged tensors into
per-feature samples; ``types`` holds the monitor policy and the report;
``repository`` reads the log and stores policies; ``service`` computes reports and,
on a schedule, exports them as metrics, raises alerts and halts canaries.
"""
