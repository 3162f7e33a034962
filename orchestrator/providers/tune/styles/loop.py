"""Loop options: `for k in tl.range(0, n, BLOCK, num_stages=3)` sets the software pipelining of one loop. A literal
of one or more is a knob (`stages`). Left as written, and said why: `num_stages=0`, which turns Triton's
pipelining off on purpose, and any value in a kernel that allocates its own stage buffers
(`tlx.local_alloc`): such a kernel pipelines by hand, and its loop must stay as its author wrote it."""

from __future__ import annotations

import libcst as cst

from orchestrator.providers.tune.scan import Found, Scan, dotted, integer
from orchestrator.providers.tune.styles.base import SiteStyle

LOOP_CALLS = ("range", "static_range")


class LoopStyle(SiteStyle):
    site = "loop"
    word = "loop option"
    category = "launch arguments"

    def find(self, scan: Scan) -> None:
        for kernel, node in scan.kernel_nodes.items():
            calls = [call for call in scan.walk(node, into_scopes=True) if isinstance(call, cst.Call)]
            by_hand = any(dotted(call.func) == "local_alloc" for call in calls)
            for call in calls:
                if dotted(call.func) not in LOOP_CALLS:
                    continue
                for argument in call.args:
                    value = integer(argument.value)
                    if argument.keyword is None or argument.keyword.value != "num_stages" or value is None:
                        continue
                    line = scan.line(argument.value)
                    pinned = ""
                    if by_hand:
                        pinned = (f"the loop's num_stages={value} (line {line}) stays: {kernel} allocates its own "
                                  "stage buffers (tlx.local_alloc) and pipelines by hand")
                    elif value < 1:
                        pinned = (f"the loop's num_stages={value} (line {line}) stays: it turns Triton's software "
                                  "pipelining off on purpose")
                    scan.record(Found(self.site, "num_stages", "stages", argument.value, None, kernel,
                                      scope_name=kernel, pinned=pinned, note=pinned))


STYLE = LoopStyle()
