"""Synthetic baseline kernel: one latency per case."""

LATENCY_US = {"rows4096": 100.0, "rows8192": 200.0, "ragged_3001x777": 40.0}


def scale(values):
    return [v * 2.0 for v in values]
