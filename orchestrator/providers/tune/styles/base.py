"""What a site style is: one kind of place where real Triton code sets a launch parameter's value.

A style finds its places in a `Scan` (or is handed them by another style that follows a value there), states
what its code demands of a value (`constraints`), says which edits it takes (`edits`: a literal, a per-shape
table, a scaled expression, a new autotune list) and names itself in a report's words (`word`, `category`).
Every hook has the behaviour most styles share; a style overrides only where it differs. The registry is
`styles/__init__.py`; `discovery` asks it, `edits` writes through it.
"""

from __future__ import annotations

import libcst as cst

from orchestrator.providers.tune.constraints import Constraint
from orchestrator.providers.tune.scan import Found, Scan


class SiteStyle:
    site = ""  # the `site` of the KnobSites it makes, and the head of their keys (`wrapper:softmax.num_warps#0`)
    word = ""  # where such a knob is, in a report's words ("wrapper assignment")
    category = ""  # the heading the no-knob explanation files its places under
    looks_for = ""  # what the discovery looks for under that heading ("" where another style of it says)
    own_constraints_only = False  # its places carry all their constraints (a grid's), none from the kernel

    def read(self, scan: Scan) -> None:
        """Learn what the kernels' code says before any style searches (a kind a constexpr's use gives it)."""

    def find(self, scan: Scan) -> None:
        """Record the places of this style in `scan` (`scan.record`). Styles whose places are reached by
        following a launch argument (wrapper assignments, grids) are recorded by the launch style instead."""

    def constraints(self, found: Found, scan: Scan) -> list[Constraint]:
        """What the code demands of this place beyond what the kernel and the wrapper say of its parameter."""
        return []

    def edits(self, found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str] | None:
        """The edits this place takes and why not, when the style decides; None: the common rules decide
        (pinned: none; a literal: literal; an expression: literal or scaled; a table where `takes_tables`)."""
        return None

    def takes_tables(self, found: Found) -> bool:
        """Whether a per-shape table may replace the value: only inside a wrapper function, where the shapes are
        in scope (a parameter's default is evaluated before they are)."""
        return not found.default and found.scope is not None and found.scope.parent is not None

    def table_keys(self, found: Found, bounds: list[str]) -> tuple[str, ...] | None:
        """What a table at this place may be keyed on, when the style says; None: the shapes its scope reads."""
        return None

    def sees(self, found: Found, names: set[str]) -> bool:
        """Whether a table key reading `names` can be written at this place."""
        return found.scope is not None and all(found.scope.resolve(name) is not None for name in names)

    def bound_at_launch(self, found: Found, bound: str) -> str:
        """What the launch passes for the kernel parameter `bound` (a lower bound's other side), if known."""
        return found.launch_arguments.get(bound, "")

    def assigned(self, found: Found) -> str:
        """The name the value is assigned to, when it is not the launch parameter (`width` feeding `BLOCK=width`)."""
        return found.variable if found.variable != found.name else ""

    def category_of(self, found: Found) -> str:
        return self.category

    def spliced(self, found: Found) -> bool:
        """Whether an edit here is the value's own text replaced (in the author's parentheses), so that a
        one-line value may be spliced into the source by position instead of rewriting the tree."""
        return True

    def target(self, found: Found) -> cst.CSTNode:
        """The node an edit of this place rewrites: the value's own node."""
        return found.node

    def written(self, found: Found, updated: cst.CSTNode, text: str) -> cst.CSTNode:
        """What takes the place of `updated` (the tree's `target`, its children already rewritten) when the value
        becomes `text`: the new expression, in the author's parentheses."""
        new = cst.parse_expression(text)
        if found.node.lpar and not new.lpar:  # keep the author's parentheses around the value
            new = new.with_changes(lpar=found.node.lpar, rpar=found.node.rpar)
        return new
