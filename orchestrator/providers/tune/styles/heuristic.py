"""`@triton.heuristics`: a dict of lambdas computing a constexpr, `num_warps` or `num_stages` from the kernel's
arguments (`lambda args: min(triton.next_power_of_2(args["n_cols"]), 1024)`). The lambda's body is the knob: a
literal replaces it, a scale wraps it, and a table keys on the arguments it reads (`args["n_cols"]`)."""

from __future__ import annotations

import libcst as cst

from orchestrator.providers.tune.domains import literal_kind
from orchestrator.providers.tune.scan import Found, Scan, string, subtree
from orchestrator.providers.tune.styles.base import SiteStyle


class HeuristicStyle(SiteStyle):
    site = "heuristic"
    word = "triton.heuristics entry"
    category = "triton.heuristics"
    looks_for = "entries that set a size, num_warps or num_stages"

    def find(self, scan: Scan) -> None:
        for kernel, named, positional in scan.decorator_calls("heuristics"):
            facts = scan.facts.get(kernel)
            values = named.get("values", positional[0] if positional else None)
            for element in values.elements if isinstance(values, cst.Dict) else ():
                name = string(element.key) if isinstance(element, cst.DictElement) else None
                if name is None or not isinstance(element.value, cst.Lambda):
                    continue
                kind = facts.kind_of(name) if facts else literal_kind(name, False)
                if kind is None:
                    scan.ignored.append(f"the triton.heuristics entry {name} of {kernel} (not a size, warps, "
                                        "stages or group)")
                    continue
                lambda_node = element.value
                argument = lambda_node.params.params[0].name.value if lambda_node.params.params else "args"
                scan.record(Found(self.site, name, kind, lambda_node.body, None, kernel, scope_name=kernel,
                                  variable=argument))

    def takes_tables(self, found: Found) -> bool:
        return not found.default  # the lambda sees the kernel's arguments, the shapes among them

    def table_keys(self, found: Found, bounds: list[str]) -> tuple[str, ...] | None:
        keys = [f'{found.variable}["{sub.value[1:-1]}"]' for sub in subtree(found.node)
                if isinstance(sub, cst.SimpleString)]
        return tuple(dict.fromkeys([*keys, *bounds]))

    def sees(self, found: Found, names: set[str]) -> bool:
        return names <= {found.variable}

    def assigned(self, found: Found) -> str:
        return ""  # `variable` holds the lambda's parameter (`args`), no assignment

    def bound_at_launch(self, found: Found, bound: str) -> str:
        return f'{found.variable}["{bound}"]'


STYLE = HeuristicStyle()
