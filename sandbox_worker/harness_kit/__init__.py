"""Helpers for harness authors: candidate loading, evaluation context, timing, checks, profiling.

Everything here runs inside the sandboxed worker. Modules import torch/triton lazily so that the
worker stays importable without them.
"""
