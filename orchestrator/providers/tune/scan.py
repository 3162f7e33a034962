"""One read of a kernel file: the libcst tree (with positions), the ast the kernel analyses read, its scopes and
bindings, and the record of every place a knob's value is set (`Found`), filled by the site styles
(`styles/`). `discovery` turns what they found into `KnobSite`s; `edits` rewrites the very nodes they found.

The source is parsed once per text (libcst for the nodes an edit replaces, ast once for the kernel facts of
`constraints` and the grid counts of `grid`), and the scan is cached by `discovery.locate`.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from orchestrator.providers.tune.constraints import Constraint, KernelFacts, kernel_facts
from orchestrator.providers.tune.forms import AutotuneConfig, code

LAUNCH_OPTIONS = {"num_warps": "warps", "num_stages": "stages"}
# What Triton's CUDA backend uses for a launch option the launch does not pass (CUDAOptions in Triton 3.x).
TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}
_SHAPE_CALLS = ("numel", "size", "stride")


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
class Binding:
    value: cst.BaseExpression | None  # None: unpacked, a loop target or otherwise not one expression
    default: bool = False  # a parameter's default, evaluated where the function is defined


@dataclass
class Scope:
    name: str
    node: cst.CSTNode
    parent: Scope | None
    parameters: set[str] = field(default_factory=set)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    dimensions: dict[str, str] = field(default_factory=dict)  # local name -> the shape it reads

    def resolve(self, name: str) -> tuple[Scope, list[Binding]] | tuple[Scope, None] | None:
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
    """One place a knob's value is set, as a style found it: the node that holds the value and its context."""

    site: str  # the style's site name (styles/)
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
    group: int = 0  # the id of the triton.Config call an entry belongs to (0 elsewhere): entries set together
    pinned: str = ""  # why a style leaves this place as written, however legal another value would be
    via: str = ""  # the style that found the place, when another claimed it (a TLX buffer count in a config)
    # A module constant a wrapper's launch passes by name (`BLOCK_SIZE=BLOCK_SIZE`): that launch argument, where a
    # per-shape table for it goes (the module cannot see the shapes); set on the constant's place by `feed`.
    table_place: Found | None = None
    table_only: bool = False  # this place is such a launch argument: a table may go here, nothing else

    @property
    def scope_label(self) -> str:
        return self.scope.name if self.scope is not None else self.scope_name


def walk(node: cst.CSTNode, *, into_scopes: bool) -> Iterator[cst.CSTNode]:
    """Nodes in source order; without `into_scopes`, nested functions, classes and lambdas are yielded but not
    entered."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if into_scopes or current is node or not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(reversed(current.children))


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""


def string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def integer(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        value = node.evaluated_value
        return value if isinstance(value, int) else None
    return None


def switch(node: cst.BaseExpression) -> int | None:
    """A `True` / `False` literal as 1 / 0, the value of a switch knob (domains.py); None for anything else."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return int(node.value == "True")
    return None


def literal(node: cst.BaseExpression, kind: str | None) -> int | None:
    """The value of a literal a knob of `kind` may sit on: True / False for a switch, an integer otherwise."""
    return switch(node) if kind == "switch" else integer(node)


def names(node: cst.CSTNode) -> set[str]:
    return {sub.value for sub in walk(node, into_scopes=True) if isinstance(sub, cst.Name)}


def first_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class _Children(cst.CSTVisitor):
    """Every node's children in one visit (libcst computes `node.children` by visiting, node by node)."""

    def __init__(self) -> None:
        super().__init__()
        self.children: dict[int, list[cst.CSTNode]] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.children.setdefault(id(self.stack[-1]), []).append(node)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


class Scan:
    """One parse of a source: its scopes, its kernels, and every knob site with the node that holds its value."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.module = cst.parse_module(source)
        self.positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        collected = _Children()
        self.module.visit(collected)
        self._children = collected.children
        self.tree = ast.parse(source)
        self.facts: dict[str, KernelFacts] = kernel_facts(self.tree)
        self.found: list[Found] = []
        self.launches: list[Launch] = []
        self.ignored: list[str] = []
        self.by_node: dict[int, Found] = {}
        self.loaded = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        self.module_reads = module_reads(self.tree)
        self.module_scope = Scope("", self.module, None)
        self.scopes: list[Scope] = []
        self.kernel_nodes: dict[str, cst.FunctionDef] = {}
        self.readings: dict[str, Any] = {}  # what a style read of the kernels before searching, by its site
        # pairs of places whose values must keep a relation together (a tile split across TLX's MMA groups)
        self.couplings: list[tuple[Found, Found, Callable[[int, int], bool], str]] = []
        self._collect_scopes(self.module, self.module_scope)

    def walk(self, node: cst.CSTNode, *, into_scopes: bool) -> Iterator[cst.CSTNode]:
        """`walk` over this scan's tree, with the children read in one visit."""
        stack = [node]
        while stack:
            current = stack.pop()
            yield current
            if into_scopes or current is node or not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                stack.extend(reversed(self._children.get(id(current), ())))

    @functools.cached_property
    def calls(self) -> tuple[cst.Call, ...]:
        """Every call in the file, in source order."""
        return tuple(node for node in self.walk(self.module, into_scopes=True) if isinstance(node, cst.Call))

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def start(self, node: cst.CSTNode) -> tuple[int, int]:
        position = self.positions[node].start
        return position.line, position.column

    # ---- scopes ----------------------------------------------------------------------------------

    def _collect_scopes(self, root: cst.CSTNode, scope: Scope) -> None:
        for node in self.walk(root, into_scopes=False):
            if node is root:
                continue
            if isinstance(node, cst.FunctionDef):
                if any(dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) == "jit"
                       for d in node.decorators):
                    self.kernel_nodes[node.name.value] = node
                    continue
                inner = Scope(node.name.value, node, scope)
                params = node.params
                for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                    inner.parameters.add(param.name.value)
                    if isinstance(param.default, cst.Integer):  # `def scale(x, block_size=1024)`: a knob at its default
                        inner.bindings.setdefault(param.name.value, []).append(Binding(param.default, default=True))
                for star in (params.star_arg, params.star_kwarg):
                    if isinstance(star, cst.Param):
                        inner.parameters.add(star.name.value)
                scope.bindings.setdefault(node.name.value, []).append(Binding(None))
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
                for name in names(target) if target is not None else ():
                    scope.bindings.setdefault(name, []).append(Binding(None))
        if isinstance(root, cst.Module):
            self.scopes.sort(key=lambda s: self.line(s.node))

    def _bind(self, scope: Scope, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            scope.bindings.setdefault(target.value, []).append(Binding(value))
            if isinstance(value, cst.Subscript) and dotted(value.value) == "shape" or (
                    isinstance(value, cst.Call) and dotted(value.func) in _SHAPE_CALLS):
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
                    scope.bindings.setdefault(element.value, []).append(Binding(None))
                    if dotted(value) == "shape":
                        scope.dimensions[element.value] = f"{code(value)}[{index}]"

    def scope_named(self, name: str) -> Scope | None:
        """A function defined at module level, by name."""
        return next((s for s in self.scopes if s.name == name and s.parent is self.module_scope), None)

    # ---- recording ---------------------------------------------------------------------------------

    def record(self, found: Found) -> None:
        """Keep `found` unless a style already recorded its node (the first to find a place describes it)."""
        existing = self.by_node.get(id(found.node))
        if existing is None:
            self.by_node[id(found.node)] = found
            self.found.append(found)

    def feed(self, name: str, kind: str, node: cst.BaseExpression, scope: Scope, kernel: str,
             arguments: dict[str, str], site: str = "launch", depth: int = 0) -> None:
        """Follow the value passed for `name` to where it is set, and record that place: the wrapper's
        assignment (`wrapper`), a module constant (`constant`), or the expression where it is passed (`site`)."""
        if isinstance(node, cst.Name) and depth < 4:
            resolved = scope.resolve(node.value)
            if resolved is not None and resolved[1] is not None:
                where, bindings = resolved
                for binding in bindings:
                    if binding.value is None:
                        continue
                    if isinstance(binding.value, cst.Name):
                        self.feed(name, kind, binding.value, where, kernel, arguments, site, depth + 1)
                        continue
                    constant = where is self.module_scope
                    self.record(Found("constant" if constant else "wrapper", name, kind,
                                      binding.value, where, kernel, variable=node.value, launch_arguments=arguments,
                                      default=binding.default))
                    if constant and site == "launch" and depth == 0 and len(bindings) == 1 and scope.parent:
                        self._table_place(self.by_node[id(binding.value)],
                                          Found(site, name, kind, node, scope, kernel, variable=node.value,
                                                launch_arguments=arguments, table_only=True))
                if any(binding.value is not None for binding in bindings):
                    return
        self.record(Found(site, name, kind, node, scope, kernel, launch_arguments=arguments))

    def _table_place(self, constant: Found, place: Found) -> None:
        """Where a per-shape table for a module constant goes: the launch argument in a wrapper that passes it by
        name, when that is the file's only read of it. Read anywhere else too (a grid's `cdiv(n, BLOCK_SIZE)`,
        a second launch), a table at the launch would part from the other reads."""
        if constant.site == "constant" and self.module_reads[place.variable] == 1:
            self.record(place)
            constant.table_place = place

    def autotuned(self, kernel: str) -> bool:
        node = self.kernel_nodes.get(kernel)
        return node is not None and any(isinstance(d.decorator, cst.Call) and dotted(d.decorator.func) == "autotune"
                                        for d in node.decorators)

    def decorator_calls(self, decorator: str) -> Iterator[tuple[str, dict[str, cst.BaseExpression],
                                                               list[cst.BaseExpression]]]:
        """(kernel, keyword arguments, positional arguments) of every `@...decorator(...)` on a kernel, in
        source order."""
        for kernel, node in self.kernel_nodes.items():
            for written in node.decorators:
                call = written.decorator
                if isinstance(call, cst.Call) and dotted(call.func) == decorator:
                    yield (kernel, {a.keyword.value: a.value for a in call.args if a.keyword is not None},
                           [a.value for a in call.args if a.keyword is None and not a.star])


def module_reads(tree: ast.Module) -> Counter[str]:
    """How often each module-level name is read: loads in the module and in functions that do not bind the name
    themselves (a kernel's `BLOCK_SIZE` parameter is its own, not the module constant of the same name)."""
    reads: Counter[str] = Counter()

    def visit(node: ast.AST, shadowed: frozenset[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                arguments = child.args
                bound = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                         *filter(None, (arguments.vararg, arguments.kwarg))]}
                bound |= {n.id for n in ast.walk(child) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                visit(child, shadowed | bound)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) and child.id not in shadowed:
                reads[child.id] += 1
            else:
                visit(child, shadowed)

    visit(tree, frozenset())
    return reads


def subtree(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node` and every node below it, depth first, the last child first (the order table keys are read in)."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.children)
    return found
