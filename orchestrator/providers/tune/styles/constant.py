"""Module constants: `BLOCK_SIZE = 1024` at module level, passed to a launch or named like a knob
(BLOCK, TILE, GROUP, WARPS, STAGES) and used by the file. Edited in place: one value for every shape. Passed by
name at a wrapper's launch and read nowhere else, a constant takes per-shape tables at that launch argument
(`Scan.feed`); once every read of it is such a table's fallback, it only sets the shapes outside the tables,
which no case measures, and is left as written."""

from __future__ import annotations

import libcst as cst

from orchestrator.providers.tune.domains import literal_kind
from orchestrator.providers.tune.forms import read_table
from orchestrator.providers.tune.scan import Found, Scan, integer
from orchestrator.providers.tune.styles.base import SiteStyle


class ConstantStyle(SiteStyle):
    site = "constant"
    word = "module constant"
    category = "module constants"
    looks_for = ("module-level integer constants named with BLOCK, TILE, GROUP, WARPS or STAGES, and any module name "
                 "a launch passes")

    def find(self, scan: Scan) -> None:
        """Knob-named integer literals at module level that the file uses (the ones a launch passes are recorded
        when the launch style follows its arguments, first)."""
        fallbacks = _table_fallbacks(scan)
        for name, bindings in scan.module_scope.bindings.items():
            kind = literal_kind(name, any(f.uses_dot for f in scan.facts.values()))
            for binding in bindings:
                if (kind is not None and binding.value is not None and integer(binding.value) is not None
                        and name in scan.loaded):
                    scan.record(Found(self.site, name, kind, binding.value, scan.module_scope, "", variable=name))
                found = scan.by_node.get(id(binding.value))
                if found is not None and found.site == self.site and fallbacks.get(name, 0) == scan.module_reads[name]:
                    found.pinned = (f"{name} is read only as the fallback of per-shape tables (shapes outside "
                                    "them, which no case measures); the tables' entries are the knobs")


def _table_fallbacks(scan: Scan) -> dict[str, int]:
    """How often each name is the fallback of a per-shape table (`{...}.get(n_cols, NAME)`)."""
    counts: dict[str, int] = {}
    for node in scan.calls:
        table = read_table(node)
        if table is not None and isinstance(table.fallback, cst.Name):
            counts[table.fallback.value] = counts.get(table.fallback.value, 0) + 1
    return counts


STYLE = ConstantStyle()
