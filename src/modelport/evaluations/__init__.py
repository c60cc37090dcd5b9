"""Evaluations: a model version scored on a dataset split by the platform (verified) or
by its publisher's word (claimed), and the leaderboards that rank them."""
