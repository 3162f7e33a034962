"""A kernel's Triton signature from example arguments, without running the wrapper (pure: `ast` only).

Triton types each launch from the values it is given (triton/runtime/jit.py, the binder and its
`specialize_impl`, identical in 3.6 and 3.9), and the compiled code depends on that typing: a tensor is a
pointer to its dtype (`*fp16`), 16-divisible when its address is; an int is `i32` (or `i64`, `u64` by range),
16-divisible when its value is, and the constant 1 when it equals 1; a float is `fp32`, a bool `u1`, None a
constexpr. Divisibility matters: without it loads are not vectorised, cp.async pipelining does not happen and
shared memory stops growing with `num_stages`. `signature_from_launch` applies the same rules to example
arguments described as JSON (a tensor by dtype and shape, a scalar by its value) and to the kernel's parameter
list as `ast` reads it: `tl.constexpr` parameters take their values, type annotations and
`@triton.jit(do_not_specialize=..., do_not_specialize_on_alignment=...)` are honoured.

Limits: the example must be typical of the real launch. A stride that is 1 in the example becomes the
constant 1, as Triton would specialise it; a real launch with another value compiles a different kernel.
Tensors are assumed 16-byte aligned (what the allocator gives) unless `aligned` is false; views with offsets
are not. Parameters are bound by position and keyword to a module-level `def` only; `*args`, tuples of
tensors, tensor descriptors and constexprs computed by `triton.heuristics` (give them explicitly) are not
modelled. Global `tl.constexpr` values and other module code are the compile child's to see.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter

from orchestrator.compile_ahead.models import CompileTarget, Frozen, KernelSignature, Scalar
from orchestrator.source_digest import normalized_digest

# torch and Triton dtype spellings -> Triton's canonical type names (Triton's type_canonicalisation_dict).
CANONICAL_TYPES: dict[str, str] = {
    "bool": "u1", "int1": "u1", "uint1": "u1", "i1": "u1", "u1": "u1",
    "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv", "fp8e4nv": "fp8e4nv",
    "float8e5": "fp8e5", "float8_e5m2": "fp8e5", "fp8e5": "fp8e5",
    "float8e4b15": "fp8e4b15", "fp8e4b15": "fp8e4b15", "float8e4b8": "fp8e4b8", "float8_e4m3fnuz": "fp8e4b8",
    "fp8e4b8": "fp8e4b8", "float8e5b16": "fp8e5b16", "float8_e5m2fnuz": "fp8e5b16", "fp8e5b16": "fp8e5b16",
    "half": "fp16", "float16": "fp16", "fp16": "fp16", "bfloat16": "bf16", "bf16": "bf16",
    "float": "fp32", "float32": "fp32", "fp32": "fp32", "double": "fp64", "float64": "fp64", "fp64": "fp64",
    "int8": "i8", "i8": "i8", "int16": "i16", "i16": "i16", "int": "i32", "int32": "i32", "i32": "i32",
    "int64": "i64", "i64": "i64", "uint8": "u8", "u8": "u8", "uint16": "u16", "u16": "u16",
    "uint32": "u32", "u32": "u32", "uint64": "u64", "u64": "u64",
}
# Keyword arguments of a launch that are compile options, not parameters (CUDAOptions fields people pass).
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug",
                            "launch_cooperative_grid", "launch_pdl"})
INT32, UINT64 = (-(2**31), 2**31 - 1), (2**63, 2**64 - 1)


class SignatureError(ValueError):
    """The example arguments do not fit the kernel's parameters."""


class TensorArg(Frozen):
    """A tensor argument as JSON: `{"dtype": "float16", "shape": [4096, 4096]}`."""

    dtype: str
    shape: list[int] = []
    aligned: bool = True  # its data pointer is 16-byte aligned


ArgSpec = TensorArg | Scalar
ARG_SPEC = TypeAdapter(ArgSpec)


def _canonical(dtype: str) -> str:
    name = dtype.removeprefix("torch.").removeprefix("tl.").removeprefix("triton.language.")
    if name not in CANONICAL_TYPES:
        raise SignatureError(f"unknown dtype {dtype!r}")
    return CANONICAL_TYPES[name]


def find_kernel(tree: ast.Module, kernel_name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel_name:
            return node
    raise SignatureError(f"no module-level function {kernel_name!r}")


def _jit_keywords(node: ast.FunctionDef) -> dict[str, Any]:
    """Literal keyword arguments of a `@triton.jit(...)` / `@jit(...)` decorator."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).split(".")[-1] == "jit":
            found = {}
            for keyword in decorator.keywords:
                try:
                    found[keyword.arg] = ast.literal_eval(keyword.value)
                except ValueError:
                    continue
            return found
    return {}


def _annotation(node: ast.arg) -> str:
    if node.annotation is None:
        return ""
    if isinstance(node.annotation, ast.Constant) and isinstance(node.annotation.value, str):
        return node.annotation.value
    return ast.unparse(node.annotation)


def _annotated_type(annotation: str) -> str | None:
    """The Triton type an annotation pins (`tl.int64`, `"i32"`), None for none or `constexpr`."""
    name = annotation.split(".")[-1]
    return CANONICAL_TYPES.get(name)


def _int_type(value: int) -> str:
    if INT32[0] <= value <= INT32[1]:
        return "i32"
    return "u64" if UINT64[0] <= value <= UINT64[1] else "i64"


def _typed(name: str, value: Any, annotation: str, *, specialize: bool, align: bool
           ) -> tuple[str, Scalar, bool]:
    """(Triton type, constexpr value when the type is "constexpr", 16-divisible) for one argument."""
    pinned = _annotated_type(annotation)
    if isinstance(value, TensorArg):
        prefix = "*k" if "const" in annotation else "*"
        return prefix + _canonical(value.dtype), None, value.aligned and align
    if value is None:
        return "constexpr", None, False
    if isinstance(value, bool):
        return pinned or "u1", None, False
    if isinstance(value, int):
        if pinned is not None and (pinned == "u1" or pinned.startswith(("fp", "bf"))):
            return pinned, None, False
        if value == 1 and specialize:
            return (pinned, None, False) if pinned else ("constexpr", 1, False)
        return pinned or _int_type(value), None, specialize and align and value % 16 == 0
    if isinstance(value, float):
        return pinned or "fp32", None, False
    raise SignatureError(f"parameter {name!r} is not constexpr, so it cannot take {value!r}")


def _bind(node: ast.FunctionDef, args: Sequence[Any], kwargs: Mapping[str, Any]
          ) -> tuple[list[ast.arg], dict[str, Any], dict[str, Scalar], list[str]]:
    """Parameters, their values (examples, then literal defaults), the launch options, and notes."""
    if node.args.vararg or node.args.kwarg:
        raise SignatureError(f"{node.name} takes *args or **kwargs, which signature_from_launch does not bind")
    params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    names = [param.arg for param in params]
    if len(args) > len(names):
        raise SignatureError(f"{len(args)} positional arguments for {len(names)} parameters of {node.name}")
    values: dict[str, Any] = dict(zip(names, args, strict=False))  # fewer args than names: checked above
    options: dict[str, Scalar] = {}
    for name, value in kwargs.items():
        if name in names:
            if name in values:
                raise SignatureError(f"{name!r} given by position and by keyword")
            values[name] = value
        elif name in LAUNCH_OPTIONS:
            options[name] = value
        else:
            raise SignatureError(f"{node.name} has no parameter {name!r} and it is not a launch option")
    positional = [param.arg for param in [*node.args.posonlyargs, *node.args.args]]
    with_default = positional[len(positional) - len(node.args.defaults):]
    defaults = dict(zip(with_default, node.args.defaults, strict=True))
    defaults.update({param.arg: default for param, default in zip(node.args.kwonlyargs, node.args.kw_defaults,
                                                                  strict=True) if default is not None})
    notes: list[str] = []
    for name in names:
        if name in values:
            continue
        if name not in defaults:
            raise SignatureError(f"no example value for parameter {name!r} of {node.name}")
        try:
            values[name] = ast.literal_eval(defaults[name])
        except ValueError:
            raise SignatureError(f"the default of {name!r} is not a literal; give it explicitly") from None
        notes.append(f"{name} = {values[name]!r} from its default")
    return params, values, options, notes


def signature_from_launch(kernel_source: str, kernel_name: str, example_args: Sequence[Any],
                          example_kwargs: Mapping[str, Any] | None = None) -> KernelSignature:
    """The signature Triton would compile `kernel_name` with for a launch with these arguments.

    `example_args` / `example_kwargs`: JSON-like values, a dict `{"dtype", "shape", "aligned"}` for a tensor,
    a number, bool, string or None for a scalar; launch options (`num_warps=`, ...) may sit in the kwargs.
    Raises SignatureError naming the parameter that does not fit."""
    try:
        tree = ast.parse(kernel_source)
    except SyntaxError as exc:
        raise SignatureError(f"the kernel source does not parse: {exc}") from None
    node = find_kernel(tree, kernel_name)
    jit = _jit_keywords(node)
    params, raw_values, options, notes = _bind(node, list(example_args), dict(example_kwargs or {}))
    index_of = {param.arg: position for position, param in enumerate(params)}

    def listed(key: str) -> set[str]:
        return {item if isinstance(item, str) else params[item].arg for item in jit.get(key, ())
                if isinstance(item, str) or 0 <= item < len(params)}

    no_specialize, no_align = listed("do_not_specialize"), listed("do_not_specialize_on_alignment")
    types: dict[str, str] = {}
    constexprs: dict[str, Scalar] = {}
    divisible: list[str] = []
    for param in params:
        name, annotation = param.arg, _annotation(param)
        value = ARG_SPEC.validate_python(raw_values[name])
        if annotation.split(".")[-1] == "constexpr":
            if isinstance(value, TensorArg):
                raise SignatureError(f"constexpr parameter {name!r} cannot take a tensor")
            types[name], constexprs[name] = "constexpr", value
            continue
        kind, constant, aligned = _typed(name, value, annotation, specialize=name not in no_specialize,
                                         align=name not in no_align)
        types[name] = kind
        if kind == "constexpr":
            constexprs[name] = constant
        elif aligned:
            divisible.append(name)
    return KernelSignature(kernel_name=kernel_name, parameters=sorted(types, key=index_of.__getitem__),
                           types=types, constexprs=constexprs, divisible_by_16=divisible, launch_options=options,
                           notes=notes)


def kernel_scope(kernel_source: str, kernel_name: str, target: CompileTarget) -> str:
    """What an infeasible config is remembered under: the kernel function's own text (decorators included,
    comments and blank lines ignored) and the target. Knob edits elsewhere in the file keep the scope."""
    node = find_kernel(ast.parse(kernel_source), kernel_name)
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    lines = kernel_source.splitlines()[first - 1: node.end_lineno]
    return f"{kernel_name}:{normalized_digest(chr(10).join(lines))[:16]}:{target.name}"
