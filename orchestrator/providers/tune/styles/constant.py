"""Module constants: `BLOCK_SIZE = 1024` at module level, passed to a launch or named like a knob
(BLOCK, TILE, GROUP, WARPS, STAGES) and used by the file. Edited in place: one value for every shape."""

from __future__ import annotations

from orchestrator.providers.tune.domains import literal_kind
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
        for name, bindings in scan.module_scope.bindings.items():
            kind = literal_kind(name, any(f.uses_dot for f in scan.facts.values()))
            for binding in bindings:
                if (kind is not None and binding.value is not None and integer(binding.value) is not None
                        and name in scan.loaded):
                    scan.record(Found(self.site, name, kind, binding.value, scan.module_scope, "", variable=name))


STYLE = ConstantStyle()
