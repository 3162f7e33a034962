"""One libcst scan of a kernel file: where real Triton code sets each launch parameter (`discovery` turns
what it finds into `KnobSite`s; `edits` replaces the very nodes it found).
Long because: one scan follows every launch back through the wrapper, autotune lists, heuristics and grids.

It follows every launch `kernel[grid](...)` (and `kernel.warmup(...)`) back to where each tunable value is
set: a literal or an expression at the launch (keywords, and constexprs passed by position), the wrapper's
local assignment feeding it (`num_warps = min(max(BLOCK_SIZE // 256, 1), 8)`), or a module constant. It reads
`@triton.autotune` config lists (written in place, through a module name, returned by a config function, or
built by a comprehension over lists of values) and keys, `@triton.heuristics` dicts, and grid expressions: the sizes they divide by, floor divisions that
need a size to divide the problem, and a persistent kernel's program count.

Over 400 lines: one scan that keeps every node it found, so that `edits` replaces exactly those nodes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from orchestrator.providers.tune.constraints import Constraint, KernelFacts, kernel_facts
from orchestrator.providers.tune.domains import literal_kind, parameter_kind
from orchestrator.providers.tune.forms import AutotuneConfig, code

# Where a knob is set, in the words a report uses.
SITE_WORDS = {
    "constant": "module constant", "launch": "launch argument", "wrapper": "wrapper assignment",
    "autotune": "triton.autotune config list", "config": "triton.Config entry", "autotune_key": "triton.autotune key",
    "heuristic": "triton.heuristics entry", "grid": "launch grid",
}
LAUNCH_OPTIONS = {"num_warps": "warps", "num_stages": "stages"}
# What Triton's CUDA backend uses for a launch option the launch does not pass (CUDAOptions in Triton 3.x).
TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}
_SHAPE_CALLS = ("numel", "size", "stride")
_PASSING_CALLS = ("list", "tuple", "sorted", "filter")  # calls whose result holds the entries they are given


@dataclass(frozen=True)
class Launch:
    """A launch site as the explanation reports it."""

    kernel: str
    scope: str
    line: int
    arguments: tuple[str, ...]  # `NAME=value` for keywords and constexpr positions, as written
    options: tuple[str, ...]  # launch options it passes (num_warps, num_stages)
    star: bool  # passes `**kwargs` or `*args`, which the discovery cannot follow
    autotuned: bool


@dataclass
class _Binding:
    value: cst.BaseExpression | None  # None: unpacked, a loop target or otherwise not one expression
    default: bool = False  # a parameter's default, evaluated where the function is defined


@dataclass
class Scope:
    name: str
    node: cst.CSTNode
    parent: Scope | None
    parameters: set[str] = field(default_factory=set)
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    dimensions: dict[str, str] = field(default_factory=dict)  # local name -> the shape it reads

    def resolve(self, name: str) -> tuple[Scope, list[_Binding]] | tuple[Scope, None] | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.bindings:
                return scope, scope.bindings[name]
            if name in scope.parameters:
                return scope, None
            scope = scope.parent
        return None


@dataclass
class Found:
    site: str
    name: str
    kind: str
    node: cst.BaseExpression
    scope: Scope | None
    kernel: str
    variable: str = ""
    launch_arguments: dict[str, str] = field(default_factory=dict)
    note: str = ""
    configs: tuple[AutotuneConfig, ...] = ()
    constraints: list[Constraint] = field(default_factory=list)
    scope_name: str = ""
    grid_names: set[str] = field(default_factory=set)  # names and META keys of a grid site's expression
    default: bool = False  # a parameter's default: no table there, the shapes are not in scope yet
    # A launch option the launch does not pass (Triton's default applies): the launch it would be added to.
    # `node` is then an anchor on that launch's line (its `kernel[grid]`, or `kernel` for the second option).
    absent_from: cst.Call | None = None


def _walk(node: cst.CSTNode, *, into_scopes: bool) -> Iterator[cst.CSTNode]:
    """Nodes in source order; without `into_scopes`, nested functions, classes and lambdas are yielded but not
    entered."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if into_scopes or current is node or not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(reversed(current.children))


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _integer(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        value = node.evaluated_value
        return value if isinstance(value, int) else None
    return None


def _names(node: cst.CSTNode) -> set[str]:
    return {sub.value for sub in _walk(node, into_scopes=True) if isinstance(sub, cst.Name)}


def _divisor_of(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """What a grid term divides by: `cdiv(n, BLOCK)` or `n // BLOCK`."""
    if isinstance(node, cst.Call) and _dotted(node.func) == "cdiv" and len(node.args) == 2:
        return [node.args[1].value]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.FloorDivide):
        return [node.right]
    return []


def _first_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class Scan:
    """One parse of a source: its scopes, its kernels, and every knob site with the node that holds its value."""

    def __init__(self, source: str) -> None:
        self.module = cst.parse_module(source)
        self.positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        tree = ast.parse(source)
        self.loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        self.facts: dict[str, KernelFacts] = kernel_facts(tree)
        self.found: list[Found] = []
        self.launches: list[Launch] = []
        self.ignored: list[str] = []
        self.by_node: dict[int, Found] = {}
        self.module_scope = Scope("", self.module, None)
        self.scopes: list[Scope] = []
        self.kernel_nodes: dict[str, cst.FunctionDef] = {}
        self._collect_scopes(self.module, self.module_scope)
        for name, node in self.kernel_nodes.items():
            self._decorators(name, node)
        for scope in [self.module_scope, *self.scopes]:
            self._launches(scope)
        self._module_constants()

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    # ---- scopes ----------------------------------------------------------------------------------

    def _collect_scopes(self, root: cst.CSTNode, scope: Scope) -> None:
        for node in _walk(root, into_scopes=False):
            if node is root:
                continue
            if isinstance(node, cst.FunctionDef):
                if any(_dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) == "jit"
                       for d in node.decorators):
                    self.kernel_nodes[node.name.value] = node
                    continue
                inner = Scope(node.name.value, node, scope)
                params = node.params
                for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                    inner.parameters.add(param.name.value)
                    if isinstance(param.default, cst.Integer):  # `def scale(x, block_size=1024)`: a knob at its default
                        inner.bindings.setdefault(param.name.value, []).append(_Binding(param.default, default=True))
                for star in (params.star_arg, params.star_kwarg):
                    if isinstance(star, cst.Param):
                        inner.parameters.add(star.name.value)
                scope.bindings.setdefault(node.name.value, []).append(_Binding(None))
                self.scopes.append(inner)
                self._collect_scopes(node, inner)
            elif isinstance(node, cst.ClassDef):
                self._collect_scopes(node, Scope(scope.name, node, scope))
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind(scope, target.target, node.value)
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                self._bind(scope, node.target, node.value)
            elif isinstance(node, (cst.For, cst.WithItem, cst.CompFor)):
                target = node.target if not isinstance(node, cst.WithItem) else (node.asname.name if node.asname else None)
                for name in _names(target) if target is not None else ():
                    scope.bindings.setdefault(name, []).append(_Binding(None))
        if isinstance(root, cst.Module):
            self.scopes.sort(key=lambda s: self.line(s.node))

    def _bind(self, scope: Scope, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            scope.bindings.setdefault(target.value, []).append(_Binding(value))
            if isinstance(value, cst.Subscript) and _dotted(value.value) == "shape" or (
                    isinstance(value, cst.Call) and _dotted(value.func) in _SHAPE_CALLS):
                scope.dimensions[target.value] = code(value)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                for element, item in zip(elements, value.elements, strict=True):
                    self._bind(scope, element, item.value)
                return
            for index, element in enumerate(elements):
                if isinstance(element, cst.Name):
                    scope.bindings.setdefault(element.value, []).append(_Binding(None))
                    if _dotted(value) == "shape":
                        scope.dimensions[element.value] = f"{code(value)}[{index}]"

    # ---- recording ---------------------------------------------------------------------------------

    def _record(self, found: Found) -> None:
        existing = self.by_node.get(id(found.node))
        if existing is None:
            self.by_node[id(found.node)] = found
            self.found.append(found)

    def _feed(self, name: str, kind: str, node: cst.BaseExpression, scope: Scope, kernel: str,
              arguments: dict[str, str], site: str = "launch", depth: int = 0) -> None:
        """Follow the value passed for `name` to where it is set, and record that place."""
        if isinstance(node, cst.Name) and depth < 4:
            resolved = scope.resolve(node.value)
            if resolved is not None and resolved[1] is not None:
                where, bindings = resolved
                for binding in bindings:
                    if binding.value is None:
                        continue
                    if isinstance(binding.value, cst.Name):
                        self._feed(name, kind, binding.value, where, kernel, arguments, site, depth + 1)
                        continue
                    self._record(Found("constant" if where is self.module_scope else "wrapper", name, kind,
                                        binding.value, where, kernel, variable=node.value, launch_arguments=arguments,
                                        default=binding.default))
                if any(binding.value is not None for binding in bindings):
                    return
        self._record(Found(site, name, kind, node, scope, kernel, launch_arguments=arguments))

    # ---- launches ----------------------------------------------------------------------------------

    def _callee_kernel(self, node: cst.BaseExpression, scope: Scope) -> str:
        name = _dotted(node)
        if name in self.kernel_nodes:
            return name
        resolved = scope.resolve(name) if isinstance(node, cst.Name) else None
        for binding in (resolved[1] or []) if resolved else []:
            value = binding.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "warmup":
                return _dotted(value.func.value) if _dotted(value.func.value) in self.kernel_nodes else ""
        return ""

    def _launches(self, scope: Scope) -> None:
        root = scope.node
        for node in _walk(root, into_scopes=False):
            if not isinstance(node, cst.Call):
                continue
            if isinstance(node.func, cst.Subscript):
                callee, grid = node.func.value, node.func.slice[0].slice
            elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "warmup":
                callee, grid = node.func.value, next((a.value for a in node.args if a.keyword and a.keyword.value == "grid"), None)
            else:
                continue
            kernel = self._callee_kernel(callee, scope)
            if not kernel and not isinstance(node.func, cst.Subscript):
                continue
            self._launch(node, kernel, scope, grid.value if isinstance(grid, cst.Index) else grid)

    def _unpacked_dict(self, node: cst.BaseExpression,
                       scope: Scope) -> list[tuple[str, cst.BaseExpression, Scope]] | None:
        """The keywords `**META` passes, when META is a dict literal or `dict(...)` call with literal keys (or a
        name bound once to one), each with the scope it is written in; None when they cannot be read."""
        where = scope
        if isinstance(node, cst.Name):
            resolved = scope.resolve(node.value)
            bindings = resolved[1] if resolved is not None and resolved[1] is not None else []
            if len(bindings) != 1 or bindings[0].value is None:
                return None
            node, where = bindings[0].value, resolved[0]  # type: ignore[index]
        if isinstance(node, cst.Dict):
            items = [(_string(e.key), e.value) for e in node.elements if isinstance(e, cst.DictElement)]
            if len(items) != len(node.elements):
                return None
        elif isinstance(node, cst.Call) and _dotted(node.func) == "dict" and all(
                a.keyword is not None and not a.star for a in node.args):
            items = [(a.keyword.value, a.value) for a in node.args]  # type: ignore[union-attr]
        else:
            return None
        if any(key is None for key, _ in items):
            return None
        return [(key, value, where) for key, value in items]  # type: ignore[misc]

    def _launch(self, call: cst.Call, kernel: str, scope: Scope, grid: cst.BaseExpression | None) -> None:
        facts = self.facts.get(kernel)
        parameters = facts.parameters if facts else ()
        passed: list[tuple[str, cst.BaseExpression, Scope]] = []
        star = False
        for index, argument in enumerate(call.args):
            unpacked = self._unpacked_dict(argument.value, scope) if argument.star == "**" else None
            if unpacked is not None:
                passed.extend(unpacked)
            elif argument.star:
                star = True
            elif argument.keyword is not None:
                passed.append((argument.keyword.value, argument.value, scope))
            elif index < len(parameters):
                passed.append((parameters[index], argument.value, scope))
        arguments = {name: code(value) for name, value, _ in passed}
        autotuned = self._autotuned(kernel)
        shown, options = [], []
        for name, value, where in passed:
            kind = LAUNCH_OPTIONS.get(name)
            if kind is None and facts is not None and name in facts.constexprs:
                kind = parameter_kind(name, facts.sizes, facts.uses_dot)
                if kind is None:
                    self.ignored.append(f"{kernel}'s constexpr {name} (not a size, warps, stages or group)")
                shown.append(f"{name}={_first_line(code(value), 40)}")
            elif kind is None and facts is None and name.isupper():
                kind = literal_kind(name, False)
                shown.append(f"{name}={_first_line(code(value), 40)}")
            elif kind is not None:
                options.append(name)
                shown.append(f"{name}={_first_line(code(value), 40)}")
            if kind is not None and name != "grid":
                self._feed(name, kind, value, where, kernel, arguments)
        self.launches.append(Launch(kernel or _dotted(call.func.value if isinstance(call.func, cst.Subscript) else call.func),
                                    scope.name, self.line(call), tuple(shown), tuple(options), star, autotuned))
        if kernel and isinstance(call.func, cst.Subscript) and not star and not autotuned:
            self._absent_options(call, kernel, scope, {name for name, _, _ in passed}, arguments)
        if grid is not None and isinstance(call.func, cst.Subscript):
            self._grid(grid, scope, kernel, arguments)

    def _absent_options(self, call: cst.Call, kernel: str, scope: Scope, passed: set[str],
                        arguments: dict[str, str]) -> None:
        """`num_warps` / `num_stages` that a plain launch leaves to Triton's default: knobs at that default,
        edited by adding the keyword (`kernel[(n_rows,)](y, x, n_cols, BLOCK_SIZE=BLOCK_SIZE)` has no other).
        `num_stages` only for a kernel with a loop: software pipelining has nothing else to overlap."""
        left_alone = {f.name for f in self.found if f.site == "heuristic" and f.kernel == kernel}
        body = self.kernel_nodes[kernel]
        if not any(isinstance(node, (cst.For, cst.While)) for node in _walk(body, into_scopes=True)):
            left_alone.add("num_stages")
        func = call.func
        assert isinstance(func, cst.Subscript)
        anchors = {"num_warps": func, "num_stages": func.value}
        for option, kind in LAUNCH_OPTIONS.items():
            if option in passed or option in left_alone:
                continue
            self._record(Found("launch", option, kind, anchors[option], scope, kernel, launch_arguments=arguments,
                               absent_from=call, note=f"not passed: Triton's default {TRITON_DEFAULTS[option]} applies"))

    def _autotuned(self, kernel: str) -> bool:
        node = self.kernel_nodes.get(kernel)
        return node is not None and any(isinstance(d.decorator, cst.Call) and _dotted(d.decorator.func) == "autotune"
                                        for d in node.decorators)

    def _grid(self, grid: cst.BaseExpression, scope: Scope, kernel: str, arguments: dict[str, str]) -> None:
        """Record the grid and what sets its program count; a persistent kernel's count is itself a knob."""
        written, expression, where = grid, grid, scope  # written: what the launch reads, maybe a name
        if isinstance(grid, cst.Name):
            resolved = scope.resolve(grid.value)
            bindings = [b for b in (resolved[1] or []) if b.value is not None] if resolved else []
            if bindings:
                expression, where = bindings[0].value, resolved[0]  # type: ignore[assignment,index]
            elif resolved and grid.value in {s.name for s in self.scopes}:
                function = next(s for s in self.scopes if s.name == grid.value)
                returns = [n.value for n in _walk(function.node, into_scopes=False)
                           if isinstance(n, cst.Return) and n.value is not None]
                expression = returns[0] if returns else grid
        body = expression.body if isinstance(expression, cst.Lambda) else expression
        facts = self.facts.get(kernel)
        # A persistent axis's programs stride over the work: any count covers it, so the arithmetic behind the
        # count (the tutorial's occupancy, NUM_REGS // (n_regs * WARP_SIZE * num_warps)) constrains nothing.
        elements = body.elements if isinstance(body, cst.Tuple) else ()
        persistent = facts.persistent_axes if facts and elements else frozenset()
        parts = [body]
        if persistent:
            parts = [element.value for axis, element in enumerate(elements) if axis not in persistent]
        divisors, constraints = [], []
        for part in parts:
            part_divisors, part_constraints = self._divisors(part, where)
            divisors += [d for d in part_divisors if d not in divisors]
            constraints += part_constraints
        note = f"work per program set by {', '.join(divisors)}" if divisors else "no size divides it"
        shown = expression if isinstance(expression, (cst.Lambda, cst.Tuple, cst.Call, cst.BinaryOperation)) else written
        found = Found("grid", "grid", "grid", shown, scope, kernel, note=note, launch_arguments=arguments)
        found.constraints.extend(constraints)
        found.grid_names = self._reachable(body, where)
        self._record(found)
        for axis in sorted(persistent):
            if axis < len(elements):
                self._feed("programs", "programs", elements[axis].value, where, kernel, arguments, site="grid")

    def _expanded(self, node: cst.CSTNode, scope: Scope) -> list[tuple[cst.CSTNode, Scope]]:
        """`node` and the values of the names it reads, transitively (`cdiv(n, BLOCK)` behind a `num_blocks`), but
        not the values of the sizes it divides by, whose own arithmetic is no part of the grid."""
        expanded, pending, seen = [], [(node, scope, 0)], set()
        while pending:
            current, where, depth = pending.pop(0)
            expanded.append((current, where))
            divisors = {name for part in _walk(current, into_scopes=True) for divisor in _divisor_of(part)
                        for name in _names(divisor)}
            for name in sorted(_names(current) - divisors) if depth < 4 else ():
                resolved = where.resolve(name)
                for binding in (resolved[1] or []) if resolved else []:
                    if binding.value is not None and id(binding.value) not in seen:
                        seen.add(id(binding.value))
                        pending.append((binding.value, resolved[0], depth + 1))
        return expanded

    def _reachable(self, node: cst.CSTNode, scope: Scope) -> set[str]:
        """Names and string keys the grid reads, directly or through the names it reads."""
        return {name for sub, _ in self._expanded(node, scope) for name in _names(sub)} | {
            key for sub, _ in self._expanded(node, scope) for part in _walk(sub, into_scopes=True)
            if (key := _string(part))}

    def _divisors(self, body: cst.CSTNode, scope: Scope) -> tuple[list[str], list[Constraint]]:
        divisors: list[str] = []
        constraints: list[Constraint] = []
        nodes = [node for part, _ in self._expanded(body, scope) for node in _walk(part, into_scopes=True)]
        for node in nodes:
            for divisor in _divisor_of(node):
                floor_of = node.left if isinstance(node, cst.BinaryOperation) else None
                self._divisor(node, divisor, floor_of, scope, divisors, constraints)
        return divisors, constraints

    def _divisor(self, node: cst.CSTNode, divisor: cst.BaseExpression, floor_of: cst.BaseExpression | None,
                 scope: Scope, divisors: list[str], constraints: list[Constraint]) -> None:
        """Record the sizes one grid term divides by; a floor division also needs them to divide the problem."""
        keys = [key for sub in _walk(divisor, into_scopes=True) if (key := _string(sub)) is not None]
        names = keys or sorted(_names(divisor) - {"triton", "META", "meta"})
        divisors.extend(n for n in names if n not in divisors)
        for name in names if floor_of is not None else ():
            constraints.append(Constraint(
                name, "divides", code(floor_of),
                f"the grid computes {_first_line(code(node), 60)} (line {self.line(node)}), which drops the "
                "remainder: a size that does not divide it leaves elements unprocessed", scope.name, self.line(node)))

    # ---- decorators ---------------------------------------------------------------------------------

    def _decorators(self, kernel: str, node: cst.FunctionDef) -> None:
        facts = self.facts.get(kernel)
        for decorator in node.decorators:
            call = decorator.decorator
            if not isinstance(call, cst.Call):
                continue
            named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            if _dotted(call.func) == "autotune":
                configs = named.get("configs", positional[0] if positional else None)
                key = named.get("key", positional[1] if len(positional) > 1 else None)
                if configs is not None:
                    self._autotune_configs(kernel, configs, facts)
                if key is not None:
                    names = [s for e in key.elements if (s := _string(e.value))] if isinstance(key, cst.List) else []
                    self._record(Found("autotune_key", "key", "key", key, None, kernel, scope_name=kernel,
                                        note=f"re-tunes when {', '.join(names) or code(key)} change"))
            elif _dotted(call.func) == "heuristics":
                values = named.get("values", positional[0] if positional else None)
                for element in values.elements if isinstance(values, cst.Dict) else ():
                    name = _string(element.key) if isinstance(element, cst.DictElement) else None
                    if name is None or not isinstance(element.value, cst.Lambda):
                        continue
                    kind = parameter_kind(name, facts.sizes, facts.uses_dot) if facts else literal_kind(name, False)
                    if kind is None:
                        self.ignored.append(f"the triton.heuristics entry {name} of {kernel} (not a size, warps, "
                                            "stages or group)")
                        continue
                    lambda_node = element.value
                    argument = lambda_node.params.params[0].name.value if lambda_node.params.params else "args"
                    self._record(Found("heuristic", name, kind, lambda_node.body, None, kernel, scope_name=kernel,
                                        variable=argument))

    def _config_list(self, node: cst.BaseExpression, depth: int = 0) -> cst.List | cst.ListComp | None:
        """The list literal or comprehension an autotune `configs=` reaches: itself, a module name, what a
        function returns, or what `list`, `tuple`, `sorted` or `filter(keep, ...)` is given (a filter only
        drops entries, so what it is given holds every one it may keep)."""
        if isinstance(node, (cst.List, cst.ListComp)) or depth > 3:
            return node if isinstance(node, (cst.List, cst.ListComp)) else None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _PASSING_CALLS:
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            given = positional[-1] if node.func.value == "filter" and len(positional) == 2 else (
                positional[0] if len(positional) == 1 else None)
            return self._config_list(given, depth + 1) if given is not None else None
        if isinstance(node, cst.Name):
            resolved = self.module_scope.resolve(node.value)
            for binding in (resolved[1] or []) if resolved else []:
                if binding.value is not None and (found := self._config_list(binding.value, depth + 1)) is not None:
                    return found
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            function = next((s for s in self.scopes if s.name == node.func.value and s.parent is self.module_scope), None)
            for sub in _walk(function.node, into_scopes=False) if function else ():
                if (isinstance(sub, cst.Return) and sub.value is not None
                        and (found := self._config_list(sub.value, depth + 1)) is not None):
                    return found
        return None

    def _autotune_configs(self, kernel: str, configs: cst.BaseExpression, facts: KernelFacts | None) -> None:
        listed = self._config_list(configs)
        if listed is None:
            self._record(Found("autotune", "configs", "configs", configs, None, kernel, scope_name=kernel,
                                note="the config list is built in a way the discovery does not follow"))
            return
        if isinstance(listed, cst.ListComp):
            self._comprehension_configs(kernel, listed, facts)
            return
        entries = []
        for element in listed.elements:
            call = element.value
            if not (isinstance(call, cst.Call) and _dotted(call.func) == "Config"):
                continue
            kwargs: dict[str, int | str] = {}
            options: dict[str, int | None] = {}
            positional = [a.value for a in call.args if a.keyword is None]
            if positional and isinstance(positional[0], cst.Dict):
                for item in positional[0].elements:
                    name = _string(item.key) if isinstance(item, cst.DictElement) else None
                    if name is None:
                        continue
                    value = _integer(item.value)
                    kwargs[name] = value if value is not None else code(item.value)
                    kind = parameter_kind(name, facts.sizes, facts.uses_dot) if facts else literal_kind(name, False)
                    if kind is not None and value is not None:
                        self._record(Found("config", name, kind, item.value, None, kernel, scope_name=kernel))
            for argument in call.args:
                option = argument.keyword.value if argument.keyword else ""
                if option in LAUNCH_OPTIONS:
                    options[option] = _integer(argument.value)
                    if options[option] is not None:
                        self._record(Found("config", option, LAUNCH_OPTIONS[option], argument.value, None, kernel,
                                            scope_name=kernel))
            entries.append(AutotuneConfig.of(kwargs, **options))
        self._record(Found("autotune", "configs", "configs", listed, None, kernel, scope_name=kernel,
                            note=f"{len(entries)} triton.Config entries", configs=tuple(entries)))

    def _comprehension_configs(self, kernel: str, comprehension: cst.ListComp, facts: KernelFacts | None) -> None:
        """`[triton.Config({"BLOCK_M": BM}, num_warps=w) for BM in [64, 128] for w in [4, 8]]`: every value of a
        loop over a literal list is a config site of the parameter the loop variable feeds, so the tuner
        changes the choices autotune has (`for BM in [64, 256]`); a loop over anything else stays as written."""
        call = comprehension.elt
        if not (isinstance(call, cst.Call) and _dotted(call.func) == "Config"):
            self._record(Found("autotune", "configs", "configs", comprehension, None, kernel, scope_name=kernel,
                                note="a comprehension whose entries are not triton.Config(...) calls"))
            return
        feeds: dict[str, str] = {}  # loop variable -> the Config parameter or launch option it sets
        positional = [a.value for a in call.args if a.keyword is None]
        if positional and isinstance(positional[0], cst.Dict):
            for item in positional[0].elements:
                name = _string(item.key) if isinstance(item, cst.DictElement) else None
                if name is not None and isinstance(item.value, cst.Name):
                    feeds[item.value.value] = name
        for argument in call.args:
            option = argument.keyword.value if argument.keyword else ""
            if option in LAUNCH_OPTIONS and isinstance(argument.value, cst.Name):
                feeds[argument.value.value] = option
        followed, left = [], []
        clause: cst.CompFor | None = comprehension.for_in
        while clause is not None:
            parameter = feeds.get(clause.target.value) if isinstance(clause.target, cst.Name) else None
            values = self._module_list(clause.iter)
            if parameter is not None:
                kind = LAUNCH_OPTIONS.get(parameter) or (
                    parameter_kind(parameter, facts.sizes, facts.uses_dot) if facts else literal_kind(parameter, False))
                elements = values.elements if isinstance(values, (cst.List, cst.Tuple)) else ()
                if kind is not None and elements and all(_integer(e.value) is not None for e in elements):
                    for element in elements:
                        self._record(Found("config", parameter, kind, element.value, None, kernel, scope_name=kernel))
                    followed.append(f"{parameter} in {code(values)}")
                else:
                    left.append(f"{parameter} in {code(values)}")
            clause = clause.inner_for_in
        note = f"a comprehension of triton.Config entries over {'; '.join(followed) or 'no literal list'}"
        if left:
            note += f" ({'; '.join(left)} left as written)"
        self._record(Found("autotune", "configs", "configs", comprehension, None, kernel, scope_name=kernel, note=note))

    def _module_list(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """What a module name bound once to a list or tuple literal holds (`NUM_STAGES_OPTIONS = [2, 3, 4]`);
        anything else as it is."""
        if isinstance(node, cst.Name):
            resolved = self.module_scope.resolve(node.value)
            bindings = resolved[1] if resolved else None
            if bindings and len(bindings) == 1 and isinstance(bindings[0].value, (cst.List, cst.Tuple)):
                return bindings[0].value
        return node

    def _module_constants(self) -> None:
        """Module constants as `knobs.find_knobs` reads them: knob-named integer literals the file uses."""
        for name, bindings in self.module_scope.bindings.items():
            kind = literal_kind(name, any(f.uses_dot for f in self.facts.values()))
            for binding in bindings:
                if kind is not None and binding.value is not None and _integer(binding.value) is not None and name in self.loaded:
                    self._record(Found("constant", name, kind, binding.value, self.module_scope, "", variable=name))
