"""What a kernel file's entry point does with its parameters, read with `ast` (the kernel is never imported).

Facts, not guesses: what the entry's body does with each parameter (`.shape` unpacked into names,
`.shape[i]`, `.stride(i)`, `.dim() == k`, indexing, `torch.*(x)`, `float(x)`, arithmetic, comparisons,
which kernel parameter it is passed as); whether each `@triton.jit` kernel loads or stores through a
parameter (a pointer) or uses it as a value; which dimensions the body equates (`a.shape[1] ==
b.shape[0]`); and how the returned tensor is allocated. orchestrator/bundle/entry_signature.py reads the
entry's parameters; orchestrator/bundle/starter_plan.py turns these facts into kinds, shapes, scalars and
a reference, and says which of them it guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

POINTER_CALLS = frozenset({"load", "store", "make_block_ptr", "make_tensor_descriptor", "prefetch"})
ALLOCATIONS = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "empty_like", "zeros_like",
                         "ones_like", "full_like"})
SCALAR_FUNCTIONS = frozenset({"float", "int", "bool", "range", "min", "max", "abs", "cdiv", "next_power_of_2"})
Dim = tuple[str, int]  # (parameter, axis): axis < 0 counts from the end, as in Python
Function = ast.FunctionDef | ast.AsyncFunctionDef
KERNEL_DECORATOR_SUFFIXES = ("jit", "autotune", "heuristics")


def dotted_name(node: ast.expr) -> str:
    """`a.b.c` for a name, an attribute chain or a call of one; "" for anything else."""
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    if isinstance(node, ast.Attribute):
        return f"{dotted_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def is_kernel_function(node: Function) -> bool:
    """Decorated with something named like triton.jit / tlx.jit / triton.autotune / triton.heuristics."""
    return any(dotted_name(d).split(".")[-1] in KERNEL_DECORATOR_SUFFIXES for d in node.decorator_list)


@dataclass
class ParameterUse:
    """What the entry's body does with one parameter."""

    # Evidence reads "`code` in function()": uses only a tensor has (`x.shape`, `x[...]`, `torch.f(x)`), uses
    # of a value (`float(x)`, `x * 2`, `x < n`), where the rank comes from.
    tensor: list[str] = field(default_factory=list)
    scalar: list[str] = field(default_factory=list)
    launches: list[tuple[str, str]] = field(default_factory=list)  # (kernel, the kernel's parameter)
    calls: list[str] = field(default_factory=list)  # other functions it is passed to
    rank: int | None = None  # exact, from `A, B = x.shape` or `x.dim() == 2`
    rank_from: str = ""
    min_rank: int = 0  # from `x.shape[i]`, `x.stride(i)`, `x.size(i)`
    min_rank_from: str = ""
    last_axis: bool = False  # `x.shape[-1]`: the entry treats the last axis apart (rows of a last axis)
    dims: tuple[str, ...] = ()  # names bound by `A, B = x.shape`

    @property
    def used(self) -> bool:
        return bool(self.tensor or self.scalar or self.launches or self.calls or self.rank or self.min_rank)


@dataclass
class Allocation:
    """How the tensor the entry returns is made: `torch.empty((M, N), dtype=...)` or `torch.empty_like(x)`."""

    source: str
    like: str | None = None  # `torch.empty_like(x)`: the parameter x
    dims: list[Dim | None] | None = None  # `torch.empty((M, N))`: each size as a parameter's axis, if known
    dtype: str | None = None  # an explicit `dtype=torch.float16`


@dataclass
class EntryFacts:
    uses: dict[str, ParameterUse]
    kernel_parameters: dict[str, dict[str, str]]  # kernel -> parameter -> "pointer" | "constexpr" | "value" | "unused"
    links: list[tuple[Dim, Dim]]  # dimensions the body equates
    returns_tuple: bool
    allocation: Allocation | None


def kernel_parameter_roles(kernel: Function) -> dict[str, str]:
    """Each parameter of a `@triton.jit` kernel: "pointer" when loads or stores go through it (directly,
    `x_ptr + offsets`, or through a name derived from it, `row = x_ptr + i * stride`), "constexpr" when
    annotated so, "value" when used otherwise, "unused"."""
    bases: dict[str, str] = {}  # `row = x_ptr + ...` -> row: x_ptr
    through: set[str] = set()
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            base = _base_name(node.value)
            if base is not None:
                bases[node.targets[0].id] = base
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in POINTER_CALLS or name.startswith("atomic_"):
                pointer = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg in ("pointer", "ptr", "base")), None)
                base = _base_name(pointer) if pointer is not None else None
                if base is not None:
                    through.add(base)
    pending = list(through)
    while pending:
        name = pending.pop()
        base = bases.get(name)
        if base is not None and base not in through:
            through.add(base)
            pending.append(base)
    used = {node.id for node in ast.walk(kernel) if isinstance(node, ast.Name)}
    roles: dict[str, str] = {}
    arguments = kernel.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        name = argument.arg
        if name in through or name.lower().endswith(("ptr", "ptrs")):
            roles[name] = "pointer"
        elif argument.annotation is not None and "constexpr" in ast.unparse(argument.annotation):
            roles[name] = "constexpr"
        else:
            roles[name] = "value" if name in used else "unused"
    return roles


def _base_name(node: ast.expr) -> str | None:
    """The leftmost name of a sum: `x_ptr + row * stride + cols` -> x_ptr (the pointer a load goes through)."""
    while isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        node = node.left
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to":
        return _base_name(node.func.value)  # `(x_ptr + offs).to(tl.pointer_type(...))`
    return node.id if isinstance(node, ast.Name) else None


def _constant_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant_int(node.operand)
        return None if inner is None else -inner
    return None


class _EntryReader(ast.NodeVisitor):
    """One pass over the entry's body, recording each parameter's uses (see `ParameterUse`)."""

    def __init__(self, where: str, parameters: list[str], kernels: dict[str, dict[str, str]]) -> None:
        self.where = where
        self.uses = {name: ParameterUse() for name in parameters}
        self.kernels = kernels
        self.parents: dict[ast.AST, ast.AST] = {}
        self.dim_names: dict[str, Dim] = {}  # `M, K = a.shape` -> M: (a, 0), K: (a, 1)
        self.links: list[tuple[Dim, Dim]] = []
        self.assigned: dict[str, ast.expr] = {}
        self.returns: list[ast.expr] = []

    def said(self, code: ast.AST | str) -> str:
        return f"`{code if isinstance(code, str) else ast.unparse(code)}` in {self.where}()"

    def read(self, function: Function) -> None:
        for parent in ast.walk(function):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        for statement in function.body:
            self.visit(statement)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # a nested helper or grid lambda is not the entry
        return

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.returns.append(node.value)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0] if len(node.targets) == 1 else None
        shape_of = self._shape_owner(node.value)
        if isinstance(target, ast.Tuple) and shape_of is not None:
            use = self.uses[shape_of]
            names = tuple(e.id if isinstance(e, ast.Name) else "_" for e in target.elts)
            if any(isinstance(e, ast.Starred) for e in target.elts):  # `*batch, M, K = a.shape`: at least
                use.min_rank, use.min_rank_from = len(names) - 1, self.said(node)
                return self.generic_visit(node)
            use.rank, use.rank_from, use.dims = len(names), self.said(node), names
            for axis, name in enumerate(names):
                self.dim_names.setdefault(name, (shape_of, axis))
        elif isinstance(target, ast.Name):
            self.assigned[target.id] = node.value
            dim = self._dim(node.value)
            if dim is not None:
                self.dim_names.setdefault(target.id, dim)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            left, right = node.left, node.comparators[0]
            for side, other in ((left, right), (right, left)):
                rank, owner = _constant_int(other), self._rank_owner(side)
                if rank is not None and owner is not None and self.uses[owner].rank is None:
                    self.uses[owner].rank, self.uses[owner].rank_from = rank, self.said(node)
            if isinstance(node.ops[0], ast.Eq) or self._in_raise_test(node):
                a, b = self._dim(left), self._dim(right)
                if a is not None and b is not None and a[0] != b[0]:
                    self.links.append((a, b))
        self.generic_visit(node)

    def _in_raise_test(self, node: ast.AST) -> bool:
        """`if a.shape[1] != b.shape[0]: raise ...` states the same equality as an assert of `==`."""
        parent = self.parents.get(node)
        while isinstance(parent, ast.BoolOp):
            parent = self.parents.get(parent)
        return isinstance(parent, ast.If) and any(isinstance(s, ast.Raise) for s in parent.body)

    def visit_Name(self, node: ast.Name) -> None:
        use = self.uses.get(node.id)
        if use is None or not isinstance(node.ctx, ast.Load):
            return
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute):
            use.tensor.append(self.said(f"{node.id}.{parent.attr}"))
            self._axis_use(node.id, parent)
        elif isinstance(parent, ast.Subscript) and parent.value is node:
            use.tensor.append(self.said(f"{node.id}[...]"))
        elif isinstance(parent, ast.Call) and parent.func is not node:
            self._argument(node.id, parent, node)
        elif isinstance(parent, ast.keyword):
            call = self.parents.get(parent)
            if isinstance(call, ast.Call):
                self._argument(node.id, call, node, keyword=parent.arg)
        elif isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult):
            use.tensor.append(self.said(parent))
        elif isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)):
            use.scalar.append(self.said(parent))

    def _axis_use(self, name: str, attribute: ast.Attribute) -> None:
        """`x.shape[i]`, `x.size(i)`, `x.stride(i)` need at least |i| + 1 (or |i|, from the end) axes."""
        holder = self.parents.get(attribute)
        index = None
        if attribute.attr == "shape" and isinstance(holder, ast.Subscript) and holder.value is attribute:
            index = _constant_int(holder.slice)
        elif attribute.attr in ("size", "stride") and isinstance(holder, ast.Call) and holder.args:
            index = _constant_int(holder.args[0])
        if index is not None:
            needed = index + 1 if index >= 0 else -index
            use = self.uses[name]
            use.last_axis = use.last_axis or index == -1
            if needed > use.min_rank:
                use.min_rank, use.min_rank_from = needed, self.said(holder)  # type: ignore[arg-type]

    def _argument(self, name: str, call: ast.Call, node: ast.expr, keyword: str | None = None) -> None:
        use = self.uses[name]
        function = call.func
        if isinstance(function, ast.Subscript) and isinstance(function.value, ast.Name) \
                and function.value.id in self.kernels:  # kernel[grid](...)
            kernel = function.value.id
            parameters = list(self.kernels[kernel])
            if keyword is not None:
                use.launches.append((kernel, keyword))
            elif node in call.args and call.args.index(node) < len(parameters):
                use.launches.append((kernel, parameters[call.args.index(node)]))
            return
        dotted = ast.unparse(function)
        short = dotted.split(".")[-1]
        if dotted.startswith("torch.") or short in ALLOCATIONS:
            use.tensor.append(self.said(f"{dotted}({name})"))
        elif short in SCALAR_FUNCTIONS:
            use.scalar.append(self.said(f"{dotted}({name})"))
        elif short == "len":
            use.tensor.append(self.said(f"len({name})"))
        else:
            use.calls.append(dotted)

    def _shape_owner(self, node: ast.expr) -> str | None:
        """x for `x.shape` and `x.size()`."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and not node.args:
            node = node.func
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "size") and isinstance(node.value, ast.Name) \
                and node.value.id in self.uses:
            return node.value.id
        return None

    def _rank_owner(self, node: ast.expr) -> str | None:
        """x for `x.dim()`, `x.ndim`, `len(x.shape)`."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("dim", "ndimension"):
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr == "ndim":
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
            return self._shape_owner(node.args[0])
        else:
            return None
        return node.id if isinstance(node, ast.Name) and node.id in self.uses else None

    def _dim(self, node: ast.expr) -> Dim | None:
        """The parameter axis an expression names: `a.shape[1]`, `a.size(1)`, or a name bound to one."""
        if isinstance(node, ast.Name):
            return self.dim_names.get(node.id)
        if isinstance(node, ast.Subscript):
            owner, index = self._shape_owner(node.value), _constant_int(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and node.args:
            owner, index = self._shape_owner(node.func), _constant_int(node.args[0])
        else:
            return None
        return (owner, index) if owner is not None and index is not None else None

    def allocation(self) -> Allocation | None:
        """How the returned tensor is made, when the entry returns one name assigned from `torch.<alloc>(...)`."""
        names = [value.id for value in self.returns if isinstance(value, ast.Name)]
        value = self.assigned.get(names[0]) if len(set(names)) == 1 and len(names) == len(self.returns) else None
        if not (isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ALLOCATIONS):
            return None
        found = Allocation(source=ast.unparse(value))
        for keyword in value.keywords:
            if keyword.arg == "dtype" and isinstance(keyword.value, ast.Attribute) \
                    and ast.unparse(keyword.value).startswith("torch."):
                found.dtype = keyword.value.attr
        if ast.unparse(value.func).endswith("_like"):
            first = value.args[0] if value.args else None
            found.like = first.id if isinstance(first, ast.Name) and first.id in self.uses else None
            return found
        sizes = list(value.args)
        if len(sizes) == 1 and isinstance(sizes[0], (ast.Tuple, ast.List)):
            sizes = list(sizes[0].elts)
        found.dims = [self._dim(size) for size in sizes] if sizes else None
        return found


def read_entry_facts(function: Function, parameters: list[str], kernels: dict[str, Function],
                     helpers: dict[str, Function], depth: int = 0) -> EntryFacts:
    """The facts above for `function`'s `parameters`, given the file's kernels and other functions by name.
    What a parameter passed on to another function of the file (a wrapper calling the real entry) does there
    counts as its use here, two calls deep."""
    roles = {name: kernel_parameter_roles(node) for name, node in kernels.items()}
    reader = _EntryReader(function.name, parameters, roles)
    reader.read(function)
    facts = EntryFacts(uses=reader.uses, kernel_parameters=roles, links=reader.links,
                       returns_tuple=any(isinstance(value, ast.Tuple) for value in reader.returns),
                       allocation=reader.allocation())
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id in helpers and node.func.id != function.name]
    for call in calls if depth < 2 else []:
        _follow(facts, call, helpers[call.func.id], kernels, helpers, depth,  # type: ignore[union-attr]
                returned=any(value is call for value in reader.returns))
    return facts


def _follow(facts: EntryFacts, call: ast.Call, callee: Function, kernels: dict[str, Function],
            helpers: dict[str, Function], depth: int, returned: bool) -> None:
    arguments = callee.args
    names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    mapping = {names[index]: value.id for index, value in enumerate(call.args[:len(names)])
               if isinstance(value, ast.Name) and value.id in facts.uses}  # the callee's parameter -> ours
    mapping.update({k.arg: k.value.id for k in call.keywords
                    if k.arg and isinstance(k.value, ast.Name) and k.value.id in facts.uses})
    if not mapping:
        return
    inner = read_entry_facts(callee, [*names, *(a.arg for a in arguments.kwonlyargs)], kernels, helpers, depth + 1)
    for theirs, ours in mapping.items():
        use, found = facts.uses[ours], inner.uses[theirs]
        use.tensor += found.tensor
        use.scalar += found.scalar
        use.launches += found.launches
        use.calls = [name for name in use.calls if name != callee.name] + found.calls
        if use.rank is None and found.rank is not None:
            use.rank, use.rank_from, use.dims = found.rank, found.rank_from, found.dims
        if found.min_rank > use.min_rank:
            use.min_rank, use.min_rank_from = found.min_rank, found.min_rank_from
        use.last_axis = use.last_axis or found.last_axis
    facts.links += [((mapping[x[0]], x[1]), (mapping[y[0]], y[1])) for x, y in inner.links
                    if x[0] in mapping and y[0] in mapping]
    if returned and facts.allocation is None and inner.allocation is not None:
        found_allocation = inner.allocation
        facts.allocation = Allocation(
            source=found_allocation.source, like=mapping.get(found_allocation.like or ""), dtype=found_allocation.dtype,
            dims=None if found_allocation.dims is None else [
                (mapping[d[0]], d[1]) if d is not None and d[0] in mapping else None for d in found_allocation.dims])
        facts.returns_tuple = facts.returns_tuple or inner.returns_tuple
