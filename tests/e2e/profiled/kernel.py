"""Synthetic baseline kernel for loop tests."""

LATENCY_US = 100.0


def scale(values):
    return [v * 2.0 for v in values]
