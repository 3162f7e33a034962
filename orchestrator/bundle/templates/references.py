"""References `tlx-agent init-bundle` puts in a starter harness in place of the untouched kernel.

Each function is the standard math of one kind, computed in fp64 (no TF32 or reduced-precision setting a
candidate could flip applies) and rounded once to the input's dtype. render_harness
(orchestrator/bundle/init_bundle.py) copies one of them into the harness as `reference`, with the entry's
parameters as its own and the names below renamed to the entry's (or, for a scalar the harness does not
pass, to the entry's default). It picks one only when the entry's name and signature say which; otherwise
it copies `todo`, and the harness's verify fails with REFERENCE_TODO until someone writes the reference.
"""

from __future__ import annotations

import torch

REFERENCE_TODO = "example: the message verify fails with"


def layer_norm(x, weight, bias, eps):
    """Layer norm over the last axis (torch.nn.functional.layer_norm) in fp64, rounded once to x's dtype."""
    return torch.nn.functional.layer_norm(x.double(), x.shape[-1:], weight.double(), bias.double(), eps).to(x.dtype)


def rms_norm(x, weight, eps):
    """RMS norm over the last axis, x / sqrt(mean(x**2) + eps) * weight, in fp64, rounded once to x's dtype."""
    wide = x.double()
    return (wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()).to(x.dtype)


def row_sum(x):
    """The sum over the last axis (one value per row) in fp64, rounded once to x's dtype."""
    return x.double().sum(dim=-1).to(x.dtype)


def row_mean(x):
    """The mean over the last axis (one value per row) in fp64, rounded once to x's dtype."""
    return x.double().mean(dim=-1).to(x.dtype)


def row_max(x):
    """The largest value of each row (exact in any dtype)."""
    return x.amax(dim=-1)


def row_min(x):
    """The smallest value of each row (exact in any dtype)."""
    return x.amin(dim=-1)


def matmul(a, b):
    """a @ b for a (m, k) and b (k, n) in fp64, rounded once to a's dtype."""
    return torch.matmul(a.double(), b.double()).to(a.dtype)


def bmm(a, b):
    """a @ b per batch for a (batch, m, k) and b (batch, k, n) in fp64, rounded once to a's dtype."""
    return torch.bmm(a.double(), b.double()).to(a.dtype)


def todo(*inputs):
    """TODO: return what the entry point computes for these inputs, in PyTorch, then set REFERENCE_TODO = None."""
    raise NotImplementedError(REFERENCE_TODO)
