"""Which knobs set the launch grid, and what a move does to the number of programs, in words.

A knob sets the grid when its name (a variable, or a `META["NAME"]` key) appears in the grid expression of a
`kernel[grid](...)` launch, followed through the file's assignments and functions (`grid = (...)`,
`def grid(meta): ...`). Such a size divides the problem, `cdiv(n, BLOCK_SIZE)`, so growing it from `old` to
`new` divides that dimension's program count by `new / old` wherever it spans many blocks. A knob the grid does not mention (softmax's
column tile under a one-program-per-row grid, `BLOCK_K`, `num_warps`) leaves the program count unchanged.
"""

from __future__ import annotations

import ast
from collections import Counter


def _bindings(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """Values assigned to plain names, and functions defined, directly in one scope (a module or a function
    body, through if/for/with/try blocks but not into nested functions, lambdas or classes)."""
    found: dict[str, list[ast.AST]] = {}
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, []).append(node)
            continue
        if isinstance(node, (ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found.setdefault(node.target.id, []).append(node.value)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _visible(tree: ast.Module, launch: ast.Call) -> dict[str, list[ast.AST]]:
    """What each name means at the launch: the module's bindings, shadowed by those of each enclosing function
    (a parameter shadows with nothing: its value is not in the file)."""
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    enclosing: list[ast.AST] = []
    node: ast.AST = launch
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            enclosing.append(node)
    visible = _bindings(tree)
    for function in reversed(enclosing):  # outermost first, so inner scopes win
        arguments = function.args  # type: ignore[attr-defined]
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                         arguments.vararg, arguments.kwarg):
            if argument is not None:
                visible[argument.arg] = []
        visible.update(_bindings(function))
    return visible


def _uses(node: ast.AST, definitions: dict[str, list[ast.AST]], followed: frozenset[str]) -> Counter[str]:
    """How often each name or string key occurs in `node`, following names to their definitions (the most
    occurrences over a name's alternative definitions)."""
    counts: Counter[str] = Counter()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            counts[sub.id] += 1
            if sub.id in definitions and sub.id not in followed:
                most: Counter[str] = Counter()
                for definition in definitions[sub.id]:
                    most |= _uses(definition, definitions, followed | {sub.id})  # | keeps the larger count
                counts += most
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            counts[sub.value] += 1
    return counts


def grid_uses(tree: ast.Module) -> Counter[str] | None:
    """Names and `META` keys of the launch grids with their occurrence counts (the most over launches);
    None when the file launches no kernel (`kernel[grid](...)`), so nothing can be said about the grid."""
    launches = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)]
    if not launches:
        return None
    counts: Counter[str] = Counter()
    for launch in launches:
        counts |= _uses(launch.func.slice, _visible(tree, launch), frozenset())  # type: ignore[attr-defined]
    return counts


def scaling_words(factor: float, noun: str) -> str:
    """How `noun` changes by `factor`: halves it, quarters it, divides it by 8; doubles, quadruples, multiplies."""
    if factor == 1:
        return f"keeps {noun}"
    shrink = factor < 1
    ratio = 1 / factor if shrink else factor
    named = {2: "halves", 4: "quarters"} if shrink else {2: "doubles", 4: "quadruples"}
    if ratio in named:
        return f"{named[ratio]} {noun}"
    amount = f"{ratio:g}" if ratio == int(ratio) else f"about {ratio:.3g}"
    return f"{'divides' if shrink else 'multiplies'} {noun} by {amount}"


def programs_phrase(name: str, kind: str, old: float, new: float, uses: int | None, largest: str = "") -> str:
    """What moving a knob from `old` to `new` does to the number of programs, or "" when nothing is known.

    Only block and tile sizes divide the grid; a name the grid mentions `uses` times scales the program
    count by (old / new) ** uses on problems much larger than the block. Other kinds, or sizes the grid does
    not mention, leave it unchanged. `largest` names the larger size in words when the values are not sizes
    (a scaled expression's factors)."""
    if uses is None:
        return ""
    if uses and kind in ("block", "tile"):
        # cdiv(n, size) scales by old / new only where n spans many blocks: at n = 4096, 4096 -> 8192 keeps 1
        larger = largest or str(int(max(old, new)))
        try:
            factor = (old / new) ** uses
        except (ZeroDivisionError, OverflowError):
            return ""
        if not 0 < factor < float("inf"):  # a count past any real grid's (a name read through many helpers)
            return ""
        return f"{scaling_words(factor, 'the number of programs')} on sizes much larger than {larger}"
    if uses:
        return ""  # a warps, stages or group knob inside a grid expression: no known arithmetic
    if kind in ("block", "tile"):
        return f"keeps the number of programs ({name} is not in the launch grid)"
    return "keeps the number of programs"
