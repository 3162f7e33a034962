"""What the code itself says a knob must satisfy, read (never run) from the kernel body and its wrapper.

A `tl.arange(0, B)` size must be a power of two. A kernel that indexes `tl.arange(0, B)` with neither a loop over
B nor a program offset (`pid * B`) covers the whole dimension in one tile: with a mask `cols < n_cols` it needs
`B >= n_cols` (the wrapper usually computes `triton.next_power_of_2(n_cols)`), without a mask B must equal the
extent it indexes. A wrapper check `if N > BLOCK_SIZE: raise ...` says the same in the wrapper's words. Launch
options have fixed ranges (`num_warps` a power of two up to 32).
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from orchestrator.providers.tune.domains import parameter_kind

WARPS_RANGE = "1, 2, 4, 8, 16, 32"


@dataclass(frozen=True)
class Constraint:
    """One relation a knob must keep, with the code that demands it.

    relation: power_of_two | at_least | greater_than | at_most | divides | one_of | pinned. `bound` is the other
    side in the scope's own names (a kernel parameter for kernel constraints, a wrapper expression for wrapper
    ones); `at_launch` is what the launch passes for a kernel parameter bound, when the discovery knows it.
    """

    parameter: str
    relation: str
    bound: str
    reason: str
    scope: str  # the kernel or wrapper function whose code demands it
    line: int
    at_launch: str = ""

    def text(self) -> str:
        bound = self.at_launch or self.bound
        relations = {"power_of_two": f"{self.parameter} is a power of two",
                     "at_least": f"{self.parameter} >= {bound}", "greater_than": f"{self.parameter} > {bound}",
                     "at_most": f"{self.parameter} <= {bound}", "divides": f"{self.parameter} divides {bound}",
                     "one_of": f"{self.parameter} in {{{bound}}}", "pinned": f"{self.parameter} stays as written"}
        return f"{relations[self.relation]}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Coupling:
    """A relation two knob sites must keep together, each value depending on the other's (a TLX tile and the
    number of MMA groups it is split across): `holds(first, second)` with the sites' values, in `sites` order."""

    sites: tuple[str, str]  # site keys
    holds: Callable[[int, int], bool]
    text: str  # the relation in words, and why

    def broken(self, values: dict[str, int]) -> str:
        """Why `values` (by site key) break the relation; "" when they keep it or do not name both sites."""
        first, second = (values.get(key) for key in self.sites)
        if first is None or second is None or self.holds(first, second):
            return ""
        return f"{self.sites[0]} = {first} with {self.sites[1]} = {second} breaks: {self.text}"


@dataclass(frozen=True)
class KernelFacts:
    """One `@triton.jit` kernel as the tuner needs it: parameters, which constexprs size tiles, and constraints."""

    name: str
    line: int
    parameters: tuple[str, ...]
    constexprs: frozenset[str]
    sizes: frozenset[str]  # constexprs used as a tl.arange size or a loop step: block or tile knobs
    tiled: frozenset[str]  # sizes that offset programs (`pid * BLOCK`): the grid must divide by them
    uses_dot: bool
    persistent_axes: frozenset[int]  # axes whose programs stride by tl.num_programs: any program count works
    constraints: tuple[Constraint, ...]
    program_axes: frozenset[int] = frozenset()  # the axes of every tl.program_id the kernel reads
    # axes whose programs stride by kernel parameters (`tile += NUM_SM`): the count must equal the stride, so it
    # is no knob of its own, but no size has to divide it either
    strided_axes: frozenset[int] = frozenset()
    # kinds a style read from what a constexpr does in the body rather than from its name (TLX: `BM` shapes
    # a shared-memory buffer, so it is a tile; `NUM_BUFFERS` counts buffers), by name
    named_kinds: tuple[tuple[str, str], ...] = ()
    reads: frozenset[str] = frozenset()  # every name the body loads (a parameter it never reads changes nothing)

    def kind_of(self, name: str) -> str | None:
        """The kind of a launch parameter of this kernel: what a style read it does, else what `domains`
        reads from its name and its use as a tl.arange size or loop step."""
        return dict(self.named_kinds).get(name) or parameter_kind(name, self.sizes, self.uses_dot)

    @property
    def persistent(self) -> bool:
        """Every program id the kernel reads strides over the work (a persistent kernel): its tiles are loop
        indices, and the program count no size has to divide."""
        return bool(self.program_axes) and self.program_axes <= self.persistent_axes | self.strided_axes


def is_call(node: ast.AST, *names: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    called = function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""
    return called in names


def _names(node: ast.AST) -> set[str]:
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)}


def decorator_name(decorator: ast.expr) -> str:
    """`triton.jit`, `jit`, `triton.autotune(...)`: the last name, "jit" or "autotune"."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""


def is_kernel(function: ast.AST) -> bool:
    return isinstance(function, ast.FunctionDef) and any(decorator_name(d) == "jit" for d in function.decorator_list)


def _own_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """The function's nodes, not descending into nested functions, lambdas or classes."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))


def _derived(function: ast.FunctionDef, seed: Callable[[ast.AST], bool]) -> set[str]:
    """Names whose value (an assignment, or a for loop's target) involves a seed node or another such name."""
    flows: list[tuple[set[str], ast.AST]] = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            flows.append(({n for target in node.targets for n in _names(target)}, node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            flows.append((_names(node.target), node.value))
        elif isinstance(node, ast.For):
            flows.append((_names(node.target), node.iter))
    seeded = [(targets, any(seed(sub) for sub in ast.walk(value)), _names(value)) for targets, value in flows]
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for targets, has_seed, used in seeded:
            if (has_seed or used & derived) and not targets <= derived:
                derived |= targets
                changed = True
    return derived


def _compares(function: ast.FunctionDef) -> Iterator[tuple[ast.AST, ast.AST, ast.Compare]]:
    """(smaller side, larger side, node) of every one-operator `<`, `<=`, `>`, `>=` comparison, in source order."""
    for node in sorted(_own_nodes(function), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if isinstance(node.ops[0], (ast.Lt, ast.LtE)):
                yield left, right, node
            elif isinstance(node.ops[0], (ast.Gt, ast.GtE)):
                yield right, left, node


def _size_facts(function: ast.FunctionDef, size: str, parameters: set[str], constexprs: set[str],
                program_derived: set[str]) -> tuple[list[Constraint], bool]:
    """The constraints one tl.arange size parameter carries in this kernel, and whether it offsets programs."""
    name = function.name
    aranges = [node for node in _own_nodes(function) if is_call(node, "arange") and size in _names(node)]
    first = min(node.lineno for node in aranges)
    found = [Constraint(size, "power_of_two", "", f"tl.arange(0, {size}) at line {first} takes a power of two",
                        name, first)]
    in_arange = _derived(function, lambda node: is_call(node, "arange") and size in _names(node))
    looped = any(
        (isinstance(node, ast.For) and size in _names(node.iter)) or (isinstance(node, ast.While) and size in _names(node.test))
        or (isinstance(node, (ast.For, ast.While)) and any(
            isinstance(sub, ast.AugAssign) and size in _names(sub.value) for sub in ast.walk(node)))
        for node in _own_nodes(function))
    tiled = any(
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and any(
            size in _names(one) and (_names(other) & program_derived or any(is_call(s, "program_id") for s in ast.walk(other)))
            for one, other in ((node.left, node.right), (node.right, node.left)))
        for node in _own_nodes(function))
    if looped or tiled:
        return found, tiled
    for smaller, larger, node in _compares(function):
        indexes = _names(smaller) & in_arange or any(is_call(s, "arange") and size in _names(s) for s in ast.walk(smaller))
        bounds = (_names(larger) & parameters) - constexprs
        if indexes and bounds and not _names(larger) & in_arange:
            bound = ast.unparse(larger)
            found.append(Constraint(
                size, "at_least", bound,
                f"{name} loads tl.arange(0, {size}) masked by {ast.unparse(smaller)} < {bound} (line {node.lineno}) with "
                f"no loop over it and no program offset: one program covers all {bound} in one tile", name, node.lineno))
            return found, False
    found.append(Constraint(
        size, "pinned", "",
        f"{name} indexes tl.arange(0, {size}) (line {first}) with no mask, loop or program offset, so {size} must "
        "equal the extent it covers", name, first))
    return found, False


def kernel_facts(tree: ast.Module) -> dict[str, KernelFacts]:
    """Facts of every `@triton.jit` function in the module, by name."""
    facts: dict[str, KernelFacts] = {}
    for function in ast.walk(tree):
        if not is_kernel(function):
            continue
        assert isinstance(function, ast.FunctionDef)
        arguments = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
        constexprs = {a.arg for a in arguments if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
        parameters = {a.arg for a in arguments}
        sizes = {name for node in _own_nodes(function) if is_call(node, "arange")
                 for name in _names(node) & constexprs}
        steps = {name for node in _own_nodes(function) if isinstance(node, ast.For) and is_call(node.iter, "range")
                 for argument in node.iter.args[2:3] for name in _names(argument) & constexprs}  # type: ignore[attr-defined]
        program_derived = _derived(function, lambda node: is_call(node, "program_id"))
        per_size = {size: _size_facts(function, size, parameters, constexprs, program_derived) for size in sorted(sizes)}
        axes = {_axis(node) for node in _own_nodes(function) if is_call(node, "num_programs")}
        facts[function.name] = KernelFacts(
            name=function.name, line=function.lineno, parameters=tuple(a.arg for a in arguments),
            constexprs=frozenset(constexprs), sizes=frozenset(sizes | steps),
            uses_dot=any(is_call(node, "dot") for node in _own_nodes(function)),
            tiled=frozenset(size for size, (_, tiled) in per_size.items() if tiled),
            persistent_axes=frozenset(axes),
            constraints=tuple(c for found, _ in per_size.values() for c in found) + tuple(_static_asserts(function,
                                                                                                       constexprs)),
            program_axes=frozenset(_axis(node) for node in _own_nodes(function) if is_call(node, "program_id")),
            strided_axes=frozenset(_strided_axes(function, parameters)),
            reads=frozenset(node.id for statement in function.body for node in ast.walk(statement)
                            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)))
    return facts


def _static_asserts(function: ast.FunctionDef, constexprs: set[str]) -> list[Constraint]:
    """`tl.static_assert(BLOCK_N <= HEAD_DIM)`: the compile refuses any other value, so the tuner never tries one."""
    found = []
    for node in _own_nodes(function):
        test = node.args[0] if is_call(node, "static_assert") and node.args else None  # type: ignore[attr-defined]
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            continue
        for side, variable, other in (("left", test.left, test.comparators[0]), ("right", test.comparators[0], test.left)):
            relation = _relation(side, type(test.ops[0]))
            if isinstance(variable, ast.Name) and variable.id in constexprs and relation:
                found.append(Constraint(variable.id, relation, ast.unparse(other),
                                        f"{function.name} asserts {ast.unparse(test)} at compile time (line "
                                        f"{node.lineno})", function.name, node.lineno))
    return found


def _strided_axes(function: ast.FunctionDef, parameters: set[str]) -> set[int]:
    """Axes whose program id starts a loop that strides by kernel parameters, as tl.num_programs strides do:
    `for tile in tl.range(pid, num_tiles, NUM_SMS)` (Triton's persistent matmul) or `tile_idx += NUM_SM` in a
    `while` over the tiles (its grouped GEMM), with the grid launching NUM_SM(S) programs."""
    starts: dict[str, int] = {}  # `pid = tl.program_id(axis)`, maybe `.to(tl.int64)`: name -> axis
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to":
                value = value.func.value
            if is_call(value, "program_id"):
                starts.update({target.id: _axis(value) for target in node.targets if isinstance(target, ast.Name)})

    def by_parameters(stride: ast.AST) -> bool:
        return bool(_names(stride)) and _names(stride) <= parameters

    axes = set()
    for node in _own_nodes(function):
        if isinstance(node, ast.For) and is_call(node.iter, "range") and len(node.iter.args) == 3:  # type: ignore[attr-defined]
            start, _, step = node.iter.args  # type: ignore[attr-defined]
            if isinstance(start, ast.Name) and start.id in starts and by_parameters(step):
                axes.add(starts[start.id])
        if isinstance(node, (ast.For, ast.While)):  # also a 3-argument range loop: `pid += STEP` inside it
            for sub in ast.walk(node):
                if (isinstance(sub, ast.AugAssign) and isinstance(sub.op, ast.Add) and isinstance(sub.target, ast.Name)
                        and sub.target.id in starts and by_parameters(sub.value)):
                    axes.add(starts[sub.target.id])
    return axes


def _axis(call: ast.AST) -> int:
    assert isinstance(call, ast.Call)
    argument = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    return argument.value if isinstance(argument, ast.Constant) and isinstance(argument.value, int) else 0


_REQUIRED_WHEN_RAISED = {ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Lt: ast.GtE, ast.LtE: ast.Gt}


def _relation(variable_side: str, operator: type[ast.cmpop]) -> str | None:
    """The relation of the variable to the other side when `variable OP other` (left) or `other OP variable` must hold."""
    as_left = {ast.GtE: "at_least", ast.Gt: "greater_than", ast.LtE: "at_most", ast.Lt: "at_most"}
    as_right = {ast.LtE: "at_least", ast.Lt: "greater_than", ast.GtE: "at_most", ast.Gt: "at_most"}
    return (as_left if variable_side == "left" else as_right).get(operator)


def wrapper_constraints(tree: ast.Module, variables: dict[str, set[str]]) -> list[Constraint]:
    """`if N > BLOCK_SIZE: raise ...` and `assert BLOCK_SIZE >= N` in wrappers, for the variables that feed a
    launch (`variables`: function name -> names)."""
    found: list[Constraint] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name not in variables:
            continue
        for node in _own_nodes(function):
            if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
                test, negate = node.test, True
            elif isinstance(node, ast.Assert):
                test, negate = node.test, False
            else:
                continue
            if not isinstance(test, ast.Compare) or len(test.ops) != 1:
                continue
            operator = type(test.ops[0])
            if negate:
                operator = _REQUIRED_WHEN_RAISED.get(operator)  # type: ignore[assignment]
                if operator is None:
                    continue
            left, right = test.left, test.comparators[0]
            for side, variable_node, other in (("left", left, right), ("right", right, left)):
                if isinstance(variable_node, ast.Name) and variable_node.id in variables[function.name]:
                    relation = _relation(side, operator)
                    if relation:
                        check = "raises unless" if negate else "asserts"
                        found.append(Constraint(
                            variable_node.id, relation, ast.unparse(other),
                            f"{function.name}() {check} {ast.unparse(test) if not negate else _required_text(left, operator, right)} "
                            f"(line {node.lineno})", function.name, node.lineno))
    return found


def _required_text(left: ast.AST, operator: type[ast.cmpop], right: ast.AST) -> str:
    symbols = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}
    return f"{ast.unparse(left)} {symbols[operator]} {ast.unparse(right)}"


def launch_option_constraints(option: str, scope: str, line: int) -> list[Constraint]:
    """The fixed ranges of `num_warps` and `num_stages`."""
    if option == "warps":
        return [Constraint("num_warps", "one_of", WARPS_RANGE,
                           "a program has a power-of-two number of warps, at most 32 (1024 threads)", scope, line)]
    if option == "stages":
        return [Constraint("num_stages", "at_least", "1", "software pipelining needs at least one stage", scope, line)]
    return []
