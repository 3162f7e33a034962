"""Wrapper assignments: the wrapper function's local value a launch argument reads (`num_warps = 8`,
`BLOCK_SIZE = triton.next_power_of_2(n_cols)`, `num_warps = min(max(BLOCK_SIZE // 256, 1), 8)`, a parameter's
default). The launch style follows each argument here; a literal is replaced, an expression scaled, and either
may become a per-shape table keyed on a shape the wrapper reads. The wrapper's own checks (`if N > BLOCK_SIZE:
raise`) are its constraints (`constraints.wrapper_constraints`)."""

from __future__ import annotations

from orchestrator.providers.tune.styles.base import SiteStyle


class WrapperStyle(SiteStyle):
    site = "wrapper"
    word = "wrapper assignment"
    category = "wrapper assignments"
    looks_for = ("the wrapper's local assignments feeding those arguments (num_warps = 8, "
                 "BLOCK_SIZE = triton.next_power_of_2(n_cols))")


STYLE = WrapperStyle()
