"""What a starter bundle holds for one entry point: its kind, each argument's shape or scalar type, the
preallocated outputs' shapes, the dtype and the reference, and the evidence behind each.

Whatever neither a flag nor an annotation states is a guess and is recorded as a `Guess`, with how to
check it: init-bundle prints each one, returns them in its JSON and lists them at the top of the harness.
The kinds and their tensors, in the case's dimensions (cases.json):
  elementwise  every tensor (n,)
  rowwise      every tensor (rows, cols), one the entry treats as 1-D (cols,)
  norm         x (rows, cols); weight, bias and other per-column vectors (cols,); output like x
  reduction    x (rows, cols); output (rows,), one value per row
  gemm         a (m, k), b (k, n); output (m, n)
  bmm          a (batch, m, k), b (batch, k, n); output (batch, m, n)
The facts come from orchestrator/bundle/entry_signature.py and entry_facts.py; the rendering is
orchestrator/bundle/init_bundle.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from orchestrator.bundle.entry_facts import ParameterUse
from orchestrator.bundle.entry_signature import EntrySignature
from protocol.bundle import BundleError

KINDS = ("elementwise", "rowwise", "norm", "reduction", "gemm", "bmm")
Spec = tuple[str, ...] | str  # a tensor's case dimensions, or a scalar (see INPUTS in templates/harness.py)
DIMENSION_NAMES = {  # kind -> case dimension -> the int parameter names that mean it
    "elementwise": {"n": ("n", "n_elements", "numel", "num_elements", "size", "length")},
    "rowwise": {"rows": ("rows", "n_rows", "num_rows", "m"), "cols": ("cols", "n_cols", "num_cols", "n")},
    "gemm": {"m": ("m",), "n": ("n",), "k": ("k",)},
    "bmm": {"batch": ("batch", "batch_size", "b"), "m": ("m",), "n": ("n",), "k": ("k",)},
}
DIMENSION_NAMES["norm"] = DIMENSION_NAMES["reduction"] = DIMENSION_NAMES["rowwise"]
PER_COLUMN = frozenset({"weight", "bias", "gamma", "beta", "w", "b", "scale", "shift"})
PER_ROW = frozenset({"mean", "rstd", "var", "invstd", "rms", "mu", "sigma", "lse"})
WEIGHTS, BIASES, EPSILONS = frozenset({"weight", "w", "gamma", "scale"}), frozenset({"bias", "b", "beta", "shift"}), \
    frozenset({"eps", "epsilon"})
GEMM_WORDS = frozenset({"matmul", "gemm", "mm", "bmm", "matmult"})
NORM_WORDS = frozenset({"norm", "layernorm", "rmsnorm"})
REDUCTIONS = {"sum": "row_sum", "mean": "row_mean", "avg": "row_mean", "max": "row_max", "amax": "row_max",
              "min": "row_min", "amin": "row_min"}
COLUMN_WORDS = frozenset({"col", "cols", "column", "columns"})
STANDARD = {  # reference function (templates/references.py) -> what it computes, for the guesses and docstring
    "layer_norm": "torch.nn.functional.layer_norm over the last axis", "rms_norm": "RMS norm over the last axis",
    "row_sum": "the sum of each row", "row_mean": "the mean of each row", "row_max": "the max of each row",
    "row_min": "the min of each row", "matmul": "the matrix product a @ b", "bmm": "the batched product a @ b",
}
CHECK_KIND = "pass --kind (" + ", ".join(KINDS) + ") if the kernel is another kind"
CHECK_SHAPE = "the entry must take this shape; otherwise edit INPUTS in harness.py (and cases.json's dimensions)"


@dataclass(frozen=True)
class Guess:
    subject: str  # "kind", an argument's name, "dtype", "reference"
    guess: str
    evidence: str
    check: str

    def line(self) -> str:
        return f"{self.subject}: {self.guess} ({self.evidence}); check: {self.check}"


@dataclass
class StarterPlan:
    kind: str
    kind_source: str  # "--kind" or "inferred"
    inputs: dict[str, Spec]  # what the harness passes, in the entry's order
    outputs: dict[str, tuple[str, ...]]
    dtype: str
    reference: str  # "kernel" (the untouched kernel), "todo", or a function of templates/references.py
    reference_arguments: dict[str, str]  # the reference function's parameter -> the entry's name or a literal
    reference_reason: str  # why this reference (for "todo": what init-bundle could not tell)
    compare: dict[str, object] = field(default_factory=dict)
    guesses: list[Guess] = field(default_factory=list)

    @property
    def scalars(self) -> dict[str, str]:
        return {name: spec for name, spec in self.inputs.items() if isinstance(spec, str)}

    @property
    def shapes(self) -> dict[str, tuple[str, ...]]:
        return {**{name: spec for name, spec in self.inputs.items() if isinstance(spec, tuple)}, **self.outputs}


def words(name: str) -> set[str]:
    return set(re.findall(r"[a-z]+", name.lower()))


def _classify(signature: EntrySignature, name: str) -> tuple[str, str]:
    """("tensor" | "float" | "int" | "bool" | "shape" | "none", the evidence)."""
    annotation = signature.annotations.get(name)
    if annotation in ("float", "int", "bool"):
        return annotation, f"annotated `{annotation}`"
    if annotation == "Tensor":
        return "tensor", "annotated `torch.Tensor`"
    use = signature.facts.uses[name]
    roles = signature.facts.kernel_parameters
    pointers = [(kernel, p) for kernel, p in use.launches if roles[kernel].get(p) == "pointer"]
    values = [(kernel, p) for kernel, p in use.launches if roles[kernel].get(p) in ("value", "constexpr")]
    if use.tensor:
        return "tensor", use.rank_from or use.tensor[0]
    if pointers:
        return "tensor", f"passed to {pointers[0][0]} as {pointers[0][1]}, which the kernel loads or stores through"
    if values:
        kernel, parameter = values[0]
        return _scalar_type(name, use, roles[kernel][parameter]), \
            f"passed to {kernel} as {parameter}, which the kernel uses as a value"
    if use.scalar:
        return _scalar_type(name, use, None), f"used only as a value: {use.scalar[0]}"
    if name == "normalized_shape":
        return "shape", "named like torch's layer_norm argument"
    if not use.used:
        return "none", f"{signature.name}() never uses it"
    where = f"passes it on to {use.calls[0]}()" if use.calls else \
        f"passes it to {use.launches[0][0]} as {use.launches[0][1]}, which the kernel does not use"
    return "tensor", f"{signature.name}() only {where}: assumed a tensor"


def _scalar_type(name: str, use: ParameterUse, kernel_role: str | None) -> str:
    sized = name.lower() in {alias for table in DIMENSION_NAMES.values() for aliases in table.values()
                             for alias in aliases} or name.lower().startswith(("n_", "num_", "stride"))
    counted = any(re.search(r"\b(range|cdiv|next_power_of_2)\(", text) for text in use.scalar)
    return "int" if sized or counted or kernel_role == "constexpr" else "float"


def _infer_kind(signature: EntrySignature, tensors: list[str]) -> tuple[str, str]:
    uses = signature.facts.uses
    ranks = [uses[t].rank or max(uses[t].min_rank, 2 if uses[t].last_axis else 0) for t in tensors]
    name_words = words(signature.name)
    allocation = signature.facts.allocation
    dims = (allocation.dims if allocation is not None else None) or []
    if len(tensors) >= 2:
        a, b = tensors[:2]
        if ranks[:2] == [3, 3]:
            return "bmm", f"{a} and {b} are 3-D: {uses[a].rank_from}, {uses[b].rank_from}"
        if "bmm" in name_words or (name_words & GEMM_WORDS and name_words & {"batch", "batched"}):
            return "bmm", "its name says a batched matrix product"
        if name_words & GEMM_WORDS:
            return "gemm", f"`{'`, `'.join(sorted(name_words & GEMM_WORDS))}` in its name"
        linked = next((f"{a}.shape[{x[1]}] == {b}.shape[{y[1]}]" for x, y in signature.facts.links
                       if {x[0], y[0]} == {a, b}), None)
        if min(ranks[:2]) == 2 and (linked or dims == [(a, 0), (b, 1)]):
            return "gemm", f"{a} and {b} are 2-D and " + (linked or f"it returns `{allocation.source}`")  # type: ignore[union-attr]
    x = tensors[0]
    if len(dims) == 1 and dims[0] is not None and dims[0][1] == 0 and dims[0][0] in tensors \
            and ranks[tensors.index(dims[0][0])] >= 2:
        return "reduction", f"it returns `{allocation.source}`: one value per row of a 2-D input"  # type: ignore[union-attr]
    if name_words & set(REDUCTIONS) and len(tensors) == 1 and ranks[0] != 1:
        return "reduction", f"`{'`, `'.join(sorted(name_words & set(REDUCTIONS)))}` in its name"
    if name_words & NORM_WORDS:
        return "norm", f"`{'`, `'.join(sorted(name_words & NORM_WORDS))}` in its name"
    vectors = [t for t in tensors[1:] if uses[t].rank == 1 or t.lower() in PER_COLUMN]
    if ranks[0] >= 2 and vectors:
        return "norm", f"{x} is 2-D and {', '.join(vectors)} look like per-column vectors"
    wide = [t for t, rank in zip(tensors, ranks, strict=True) if rank >= 2]
    if wide:
        use = uses[wide[0]]
        return "rowwise", f"{wide[0]} is at least 2-D: {use.rank_from or use.min_rank_from}"
    return "elementwise", "no input is used as more than 1-D"


def _tensor_shape(kind: str, index: int, name: str, use: ParameterUse, transposed: bool) -> tuple[tuple[str, ...], str]:
    if kind == "elementwise":
        return ("n",), "elementwise: every tensor is 1-D"
    if kind in ("rowwise", "norm", "reduction"):
        if index == 0:
            return ("rows", "cols"), f"{kind}: the first tensor is (rows, cols)"
        if use.rank == 1 or (use.rank is None and kind == "norm" and name.lower() in PER_COLUMN):
            return ("cols",), "a per-column vector" + (f": {use.rank_from}" if use.rank == 1 else " by its name")
        return ("rows", "cols"), "like the first tensor"
    batch = ("batch",) if kind == "bmm" else ()
    if index == 0:
        return (*batch, "m", "k"), f"{kind}: a is (..., m, k)"
    if index == 1:
        if transposed:
            return (*batch, "n", "k"), f"b's last axis equals a's last axis ({use.rank_from}): b is transposed"
        return (*batch, "k", "n"), f"{kind}: b is (..., k, n)"
    if use.rank == 1 or (use.rank is None and name.lower() in PER_COLUMN):
        return ("n",), "a per-column vector"
    return (*batch, "m", "n"), "like the output"


def output_shape(kind: str, name: str) -> tuple[str, ...]:
    if kind in ("norm", "rowwise") and name.lower().removeprefix("out_").removesuffix("_out") in PER_ROW:
        return ("rows",)
    return {"elementwise": ("n",), "rowwise": ("rows", "cols"), "norm": ("rows", "cols"), "reduction": ("rows",),
            "gemm": ("m", "n"), "bmm": ("batch", "m", "n")}[kind]


def _transposed(signature: EntrySignature, a: str, b: str) -> bool:
    """b is (n, k): its last axis is named like a's last axis (`M, K = a.shape; N, K = b.shape`) or equated to it."""
    a_dims, b_dims = signature.facts.uses[a].dims, signature.facts.uses[b].dims
    if len(a_dims) == len(b_dims) >= 2 and a_dims[-1] == b_dims[-1] != "_" and b_dims[-2] != a_dims[-1]:
        return True
    last = max(len(a_dims), 2) - 1
    return any({x, y} == {(a, last), (b, last)} for x, y in signature.facts.links)


def shape_text(shape: tuple[str, ...]) -> str:
    return f"({', '.join(shape)}{',' * (len(shape) == 1)})"


def plan_starter(signature: EntrySignature, *, kind: str | None, dtype: str | None, backend: str) -> StarterPlan:
    classes = {name: _classify(signature, name) for name in signature.inputs}
    tensors = [name for name, (what, _) in classes.items() if what == "tensor"]
    if not tensors:
        found = ", ".join(f"{name}: {what}" for name, (what, _) in classes.items())
        raise BundleError(f"{signature.name}() takes no input tensor ({found}); nothing to generate inputs for")
    guesses: list[Guess] = []
    kind_source = "--kind" if kind else "inferred"
    if kind is None:
        kind, why = _infer_kind(signature, tensors)
        guesses.append(Guess("kind", kind, why, CHECK_KIND))
    if kind in ("gemm", "bmm") and len(tensors) < 2:
        raise BundleError(f"--kind {kind} needs two input tensors (a, b); {signature.name}() takes {', '.join(tensors)}")
    transposed = kind in ("gemm", "bmm") and _transposed(signature, tensors[0], tensors[1])
    inputs = {name: _argument(kind, name, what, evidence, signature, tensors, transposed, guesses)
              for name, (what, evidence) in classes.items()}
    for name, value in signature.defaults.items():
        guesses.append(Guess(name, f"not passed: keeps its default {value!r}", "a parameter with a default",
                             "to test other values, add it to INPUTS (and to reference())"))
    outputs = {name: output_shape(kind, name) for name in signature.outputs}
    for name, shape in outputs.items():
        guesses.append(Guess(name, f"a preallocated output of shape {shape_text(shape)}",
                             f"named like an output; a {kind} output", CHECK_SHAPE))
    allocation = signature.facts.allocation
    if dtype is None:
        dtype = "float32"
        if allocation is not None and allocation.dtype in ("float32", "float16", "bfloat16"):
            dtype = allocation.dtype
            guesses.append(Guess("dtype", dtype, f"{signature.name}() returns `{allocation.source}`",
                                 "pass --dtype for other inputs"))
    compare: dict[str, object] = {}
    if kind in ("gemm", "bmm") and backend == "cuda" and dtype == "float32":
        compare["base"] = (1e-2, 1e-2)
        guesses.append(Guess("tolerance", "1e-2 of the output's magnitude", "tl.dot multiplies fp32 in TF32 unless "
                             "told otherwise", "tighten COMPARE in harness.py if the kernel uses input_precision='ieee'"))
    plan = StarterPlan(kind=kind, kind_source=kind_source, inputs=inputs, outputs=outputs, dtype=dtype,
                       reference="kernel", reference_arguments={}, reference_reason="", compare=compare,
                       guesses=guesses)
    _choose_reference(plan, signature, tensors, transposed)
    return plan


def _argument(kind: str, name: str, what: str, evidence: str, signature: EntrySignature, tensors: list[str],
              transposed: bool, guesses: list[Guess]) -> Spec:
    """How the harness draws one argument (see INPUTS in templates/harness.py); its guess goes to `guesses`."""
    use = signature.facts.uses[name]
    aliases = {alias: dimension for dimension, names in DIMENSION_NAMES[kind].items() for alias in names}
    if what == "tensor":
        shape, why = _tensor_shape(kind, tensors.index(name), name, use, transposed)
        if use.rank is not None and use.rank != len(shape):
            why += f"; but the entry expects {use.rank} axes ({use.rank_from}): {CHECK_KIND}"
        guesses.append(Guess(name, f"a tensor of shape {shape_text(shape)}", f"{evidence}; {why}", CHECK_SHAPE))
        return shape
    if what == "int" and name.lower() in aliases:
        dimension = aliases[name.lower()]
        guesses.append(Guess(name, f"an int, the case's {dimension}", f"{evidence}; named like that dimension",
                             'the entry must take it as that size; otherwise make it "int" in INPUTS'))
        return f"dim:{dimension}"
    if what in ("float", "int", "bool"):
        drawn = {"float": "in [0.5, 2)", "int": "in [1, 8]", "bool": "True or False"}[what]
        guesses.append(Guess(name, f"a Python {what} drawn {drawn} for every call", evidence,
                             "the kernel must be correct for any such value; otherwise change how _draw draws it "
                             "in harness.py"))
        return what
    if what == "shape":
        guesses.append(Guess(name, "the tuple (cols,)", evidence, "the entry must take the normalized shape"))
        return "shape:cols"
    guesses.append(Guess(name, "None", evidence, "give it a value in INPUTS if the entry needs one"))
    return "none"


def _choose_reference(plan: StarterPlan, signature: EntrySignature, tensors: list[str], transposed: bool) -> None:
    """The kind's standard math where the entry's name and signature say which, else a TODO (see the module doc)."""
    entry, kind = signature.name, plan.kind
    if kind in ("elementwise", "rowwise"):
        plan.reference_reason = f"init-bundle cannot know what {'an' if kind == 'elementwise' else 'a'} {kind} kernel computes"
        plan.guesses.append(Guess("reference", "the untouched kernel, embedded in harness.py", plan.reference_reason,
                                  "a reference that shares the kernel's code shares its bugs: replace reference() "
                                  "with the PyTorch math when you can"))
        return
    name_words, problems = words(entry), []
    arguments: dict[str, str] = {}
    function = None
    if kind == "norm":
        function = "layer_norm" if {"layer", "norm"} <= name_words or "layernorm" in name_words else \
            "rms_norm" if "rms" in name_words or "rmsnorm" in name_words else None
        roles = {"layer_norm": ("x", "weight", "bias"), "rms_norm": ("x", "weight")}.get(function or "", ())
        names_fit = len(tensors) == len(roles) and all(
            tensor.lower() in {"weight": WEIGHTS, "bias": BIASES}[role]
            for role, tensor in zip(roles[1:], tensors[1:], strict=True))
        if function is None:
            problems.append(f"its name `{entry}` says neither layer norm nor RMS norm")
        elif not names_fit:
            problems.append(f"{function} takes ({', '.join(roles)}) but {entry}() takes tensors ({', '.join(tensors)})")
        arguments = dict(zip(roles, tensors, strict=False))
        eps = [n for n in plan.inputs if n.lower() in EPSILONS and plan.inputs[n] == "float"]
        defaulted = [n for n, v in signature.defaults.items() if n.lower() in EPSILONS and isinstance(v, float)]
        if eps or defaulted:
            arguments["eps"] = eps[0] if eps else repr(signature.defaults[defaulted[0]])
        else:
            problems.append(f"{entry}() has no eps parameter, so the kernel's epsilon is unknown")
    elif kind == "reduction":
        found = {REDUCTIONS[w] for w in name_words & set(REDUCTIONS)}
        function = found.pop() if len(found) == 1 else None
        if function is None:
            problems.append(f"its name `{entry}` does not say which reduction (sum, mean, max, min)")
        if name_words & COLUMN_WORDS:
            problems.append(f"its name `{entry}` names columns, not rows")
        if len(tensors) != 1:
            problems.append(f"it takes {len(tensors)} tensors ({', '.join(tensors)}), not one")
        arguments = {"x": tensors[0]}
    else:
        function = {"gemm": "matmul", "bmm": "bmm"}[kind] if name_words & GEMM_WORDS else None
        if function is None:
            problems.append(f"its name `{entry}` does not say matmul, gemm, mm or bmm")
        if len(tensors) != 2:
            problems.append(f"it takes {len(tensors)} tensors ({', '.join(tensors)}), not (a, b)")
        if transposed:
            problems.append("b is (n, k): whether the kernel computes a @ b.T is for you to say")
        arguments = {"a": tensors[0], "b": tensors[1]}
    used = {*arguments.values(), *tensors}
    extra = [n for n, spec in plan.inputs.items() if spec in ("float", "int", "bool") and n not in used]
    if extra:
        problems.append(f"it takes scalar(s) {', '.join(extra)} the standard math has no place for")
    if signature.facts.returns_tuple:
        problems.append(f"{entry}() returns a tuple")
    if len(plan.outputs) > 1:
        problems.append(f"it writes {len(plan.outputs)} outputs ({', '.join(plan.outputs)})")
    if problems or function is None:
        plan.reference, plan.reference_reason = "todo", "; ".join(problems)
        plan.guesses.append(Guess("reference", "none: a TODO that fails verify until you write it",
                                  plan.reference_reason, "write reference() in harness.py and set REFERENCE_TODO = None"))
        return
    plan.reference, plan.reference_arguments = function, arguments
    renamed = ", ".join(f"{role}={value}" for role, value in arguments.items() if role != value)
    said = f"{STANDARD[function]} ({renamed})" if renamed else STANDARD[function]
    plan.reference_reason = f"{said}, from the entry's name `{entry}` and its arguments"
    plan.guesses.append(Guess("reference", said,
                              f"the entry's name `{entry}` and its arguments", "if the kernel computes something else, "
                              "validate fails on verify: rewrite reference() in harness.py"))
