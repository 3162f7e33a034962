"""TLX kernels (Triton Low-level Language Extensions, `triton.language.extra.tlx`, in Meta's Triton build): what
their configuration values mean, which of them the tuner moves, and what it leaves alone.

A TLX kernel allocates its own shared-memory buffers (`tlx.local_alloc(shape, dtype, COUNT)`), waits on them by
hand (`tlx.async_load_wait_group(NUM_STAGES - 2)`, barriers), multiplies with `tlx.async_dot` (wgmma on Hopper)
and, when warp-specialized, splits its warps into tasks (`with tlx.async_tasks(): with tlx.async_task(...)`).
Read from the kernel body, before any style searches (`read`):

- a constexpr counting a `local_alloc`'s buffers is a buffer count (kind `buffers`). Where its value is set (a
  `triton.Config` entry, a constant, a launch argument) becomes this style's place, `TLX buffer count`: at least
  one buffer, and at least k+1 where a wait-group depth reads `COUNT - k` (the pipelined GEMM waits on
  `NUM_STAGES - 2` groups, so it needs two). What more buffers cost in shared memory, compile ahead measures on
  the target before a variant reaches a GPU.
- a constexpr shaping a `local_alloc` buffer (`BM`, `BK`, or `BLOCK_M_SPLIT = BM // NUM_MMA_GROUPS`) is a tile,
  whatever its name says.
- in a warp-specialized kernel, the constexpr every consumer task's `replicate=` reads is the MMA group count: a
  knob, coupled to each tile it splits (`BM // NUM_MMA_GROUPS`): the tile must divide into the groups, each
  part a multiple of 64 rows (one wgmma per warpgroup), and each group must get whole warpgroups of the task's
  warps (`NUM_MMA_WARPS // NUM_MMA_GROUPS` a multiple of 4).

- a boolean constexpr the body reads only as an `if` test, set True or False in a `triton.Config`, chooses
  between two code paths the author wrote (`if EPILOGUE_SUBTILE:` stores the accumulator in two halves): a
  switch (kind `switch`, False or True). Where a branch of it holds synchronization (`if USE_WARP_BARRIER:`
  allocates warp barriers instead of mbarriers), it is a barrier choice, left as written.

Never moved, each with the reason in the explanation: a group count the code fixes (`replicate=2` written as a
literal), the warps and registers of an async task (`num_warps=NUM_MMA_WARPS // ...`: task partitioning),
and a warp-specialized kernel's own `num_warps` and `num_stages` (its default task's warps; Triton's pipelining
does not run inside tasks). Barriers are code, never values the tuner reads; a loop's `num_stages` in a kernel
that allocates its own buffers is left by the loop style (`loop`).
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field

import libcst as cst

from orchestrator.providers.tune.constraints import Constraint, is_kernel
from orchestrator.providers.tune.domains import DOMAINS
from orchestrator.providers.tune.scan import Found, Scan, dotted, integer, string
from orchestrator.providers.tune.styles import autotune, constant, launch, wrapper
from orchestrator.providers.tune.styles.base import SiteStyle

# calls that synchronize (barriers, fences, cluster waits) or partition work (async tasks): a switch whose branch
# holds one chooses how the kernel synchronizes, which the tuner never edits
SYNC_WORDS = ("barrier", "fence", "cluster", "async_task")
ROWS_PER_WARPGROUP = 64  # wgmma's M: each warpgroup of a consumer task multiplies 64 rows at a time
WARPS_PER_WARPGROUP = 4
# the styles whose places a buffer count may be set in (its value written where it is set), by site
CLAIMED_FROM: dict[str, SiteStyle] = {style.site: style for style in (autotune.ENTRY, constant.STYLE, launch.STYLE,
                                                                      wrapper.STYLE)}


def _called(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""


def _names(node: ast.AST) -> set[str]:
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)}


def _keyword(call: ast.Call, name: str, position: int | None = None) -> ast.AST | None:
    found = next((k.value for k in call.keywords if k.arg == name), None)
    if found is None and position is not None and len(call.args) > position:
        found = call.args[position]
    return found


@dataclass
class TlxKernel:
    """What a TLX kernel's body says of its constexprs."""

    name: str
    buffer_counts: dict[str, int] = field(default_factory=dict)  # constexpr -> line of a local_alloc it counts
    lower_bounds: dict[str, list[tuple[int, str, int]]] = field(default_factory=dict)  # (at least, why, line)
    tiles: set[str] = field(default_factory=set)  # constexprs that shape local_alloc buffers
    splits: dict[str, tuple[str, int]] = field(default_factory=dict)  # tile -> (group constexpr, line) of `T // G`
    groups: str = ""  # the constexpr every consumer task's replicate= reads
    fixed_replicas: tuple[int, int] | None = None  # (count, line) of a replicate= written as a literal
    task_options: dict[str, tuple[str, int]] = field(default_factory=dict)  # constexpr -> (option, line)
    task_warps: str = ""  # the constexpr the consumer task's num_warps divides by the group count
    switches: dict[str, int] = field(default_factory=dict)  # boolean constexpr -> line of the `if` it decides
    barrier_switches: dict[str, tuple[str, int]] = field(default_factory=dict)  # -> (sync call, line) in a branch
    warp_specialized: bool = False
    uses_async_dot: bool = False


def read_kernel(function: ast.FunctionDef, passed: set[str] = frozenset()) -> TlxKernel | None:  # type: ignore[assignment]
    """The TLX reading of one `@triton.jit` function, or None when it allocates no buffers (no TLX kernel).
    `passed`: the constexprs its launches pass by keyword, the caller's data (`HEAD_DIM=q.shape[-1]`), never
    tiles the tuner chooses."""
    nodes = list(ast.walk(function))
    allocs = [node for node in nodes if _called(node) == "local_alloc"]
    if not allocs:
        return None
    arguments = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    constexprs = {a.arg for a in arguments if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    # constexpr locals (`BLOCK_M_SPLIT: tl.constexpr = BM // NUM_MMA_GROUPS`), followed to the parameters
    local: dict[str, ast.AST] = {}
    for node in nodes:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            local[node.target.id] = node.value
    kernel = TlxKernel(function.name)

    def reached(expression: ast.AST, depth: int = 0) -> set[str]:
        found = _names(expression) & constexprs
        for name in _names(expression) & set(local) if depth < 4 else ():
            found |= reached(local[name], depth + 1)
        return found

    def divisors(expression: ast.AST, depth: int = 0) -> set[str]:
        """What an expression divides by (`BN // EPILOGUE_SUBTILE`): factors of a size, never sizes."""
        found = {name for node in ast.walk(expression) if isinstance(node, ast.BinOp)
                 and isinstance(node.op, (ast.FloorDiv, ast.Div)) for name in _names(node.right)} & constexprs
        for name in _names(expression) & set(local) if depth < 4 else ():
            found |= divisors(local[name], depth + 1)
        return found

    # a ring of buffers is indexed modulo its count (`k % NUM_STAGES`, `get_bufidx_phase(i, NUM_STAGES)`)
    rings = {node.right.id for node in nodes if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
             and isinstance(node.right, ast.Name)}
    rings |= {argument.id for node in nodes if _called(node) == "get_bufidx_phase"
              for argument in node.args[1:2] if isinstance(argument, ast.Name)}  # type: ignore[attr-defined]

    for node in nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and isinstance(node.left, ast.Name) \
                and isinstance(node.right, ast.Name) and node.right.id in constexprs:
            kernel.splits.setdefault(node.left.id, (node.right.id, node.lineno))
        called = _called(node)
        if called == "async_tasks":
            kernel.warp_specialized = True
        elif called == "async_dot":
            kernel.uses_async_dot = True
        elif called == "async_task":
            assert isinstance(node, ast.Call)
            replicate = _keyword(node, "replicate")
            if isinstance(replicate, ast.Name) and replicate.id in constexprs:
                kernel.groups = replicate.id
            elif isinstance(replicate, ast.Constant) and type(replicate.value) is int:
                kernel.fixed_replicas = (replicate.value, node.lineno)
            for option in ("num_warps", "registers"):
                value = _keyword(node, option)
                for name in reached(value) if value is not None else ():
                    kernel.task_options.setdefault(name, (option, node.lineno))
                if option == "num_warps" and isinstance(value, ast.BinOp) and isinstance(value.left, ast.Name):
                    kernel.task_warps = value.left.id
        elif called == "async_load_wait_group" or (isinstance(node, ast.keyword) and node.arg == "loop_unroll_factor"):
            depth = node.args[0] if isinstance(node, ast.Call) and node.args else getattr(node, "value", None)
            if isinstance(depth, ast.BinOp) and isinstance(depth.op, ast.Sub) and isinstance(depth.left, ast.Name) \
                    and isinstance(depth.right, ast.Constant) and type(depth.right.value) is int:
                least = depth.right.value + (1 if isinstance(node, ast.keyword) else 0)
                what = ("a loop unroll factor must be at least 1" if isinstance(node, ast.keyword)
                        else "a wait-group depth cannot be negative")
                line = getattr(node, "lineno", getattr(depth, "lineno", function.lineno))
                kernel.lower_bounds.setdefault(depth.left.id, []).append(
                    (least, f"{ast.unparse(depth)} at line {line}: {what}", line))
    group_names = {kernel.groups} | {group for group, _ in kernel.splits.values()}
    kernel.task_options = {name: option for name, option in kernel.task_options.items() if name not in group_names}
    for alloc in allocs:
        assert isinstance(alloc, ast.Call)
        shape = _keyword(alloc, "shape", 0)
        if shape is not None:
            kernel.tiles |= reached(shape) - divisors(shape) - group_names - set(passed)
        count = _keyword(alloc, "num", 2)
        for name in (reached(count) if count is not None else set()) - group_names - kernel.tiles:
            if name in rings or name in kernel.lower_bounds:
                kernel.buffer_counts.setdefault(name, alloc.lineno)
    kernel.splits = {tile: split for tile, split in kernel.splits.items() if tile in kernel.tiles}
    _read_switches(nodes, constexprs - set(passed) - group_names - kernel.tiles - set(kernel.buffer_counts), kernel)
    return kernel


def _read_switches(nodes: list[ast.AST], candidates: set[str], kernel: TlxKernel) -> None:
    """The constexprs the body reads only as `if NAME:` / `if not NAME:` tests: switches, or barrier choices
    where a branch they decide calls anything that synchronizes (`SYNC_WORDS`)."""
    tests: dict[int, ast.If] = {}
    for node in nodes:
        if isinstance(node, ast.If):
            test = node.test.operand if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not) \
                else node.test
            if isinstance(test, ast.Name):
                tests[id(test)] = node
    decided: dict[str, list[ast.If]] = {}
    read_elsewhere: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in candidates:
            if id(node) in tests:
                decided.setdefault(node.id, []).append(tests[id(node)])
            else:
                read_elsewhere.add(node.id)
    for name, branches in decided.items():
        if name in read_elsewhere:
            continue
        sync = next(((called, call.lineno) for branch in branches for statement in [*branch.body, *branch.orelse]
                     for call in ast.walk(statement) if (called := _called(call))
                     and any(word in called for word in SYNC_WORDS)), None)
        if sync is not None:
            kernel.barrier_switches[name] = sync
        else:
            kernel.switches[name] = branches[0].lineno


def _passed_at_launches(tree: ast.Module) -> dict[str, set[str]]:
    """Kernel name -> the keywords its `kernel[grid](...)` launches pass, but for `True` / `False` written there:
    a flag set as a literal is the author's choice (a switch), not the caller's data."""
    passed: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            callee = node.func.value
            name = callee.id if isinstance(callee, ast.Name) else callee.value.id if (
                isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name)) else ""
            passed.setdefault(name, set()).update(
                k.arg for k in node.keywords if k.arg and not (isinstance(k.value, ast.Constant)
                                                               and isinstance(k.value.value, bool)))
    return passed


def tlx_kernels(scan: Scan) -> dict[str, TlxKernel]:
    kernels = {}
    passed = _passed_at_launches(scan.tree)
    for function in ast.walk(scan.tree):
        if is_kernel(function):
            assert isinstance(function, ast.FunctionDef)
            read = read_kernel(function, passed.get(function.name, set()))
            if read is not None:
                kernels[function.name] = read
    return kernels


def _config_value(scan: Scan, found: Found, name: str) -> int | None:
    """The integer `name` is set to in the same triton.Config as `found` (its dict or its options)."""
    call = next((node for node in _config_calls(scan) if id(node) == found.group), None)
    if call is None:
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    if positional and isinstance(positional[0], cst.Dict):
        for element in positional[0].elements:
            if isinstance(element, cst.DictElement) and string(element.key) == name:
                return integer(element.value)
    return next((integer(a.value) for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _config_calls(scan: Scan) -> list[cst.Call]:
    return [node for node in scan.calls if dotted(node.func) == "Config"]


def _groups_of(tile: int, groups: int) -> bool:
    return groups >= 1 and tile % groups == 0 and (tile // groups) % ROWS_PER_WARPGROUP == 0


def _warpgroups_of(warps: int, groups: int) -> bool:
    return groups >= 1 and warps % groups == 0 and (warps // groups) % WARPS_PER_WARPGROUP == 0


class TlxBufferStyle(SiteStyle):
    site = "tlx_buffers"
    word = "TLX buffer count"
    category = "triton.autotune"

    def read(self, scan: Scan) -> None:
        """Kinds from what each TLX kernel's constexprs do: tiles shape buffers, buffer counts count them."""
        scan.readings[self.site] = tlx_kernels(scan)
        for name, kernel in scan.readings[self.site].items():
            facts = scan.facts.get(name)
            if facts is None:
                continue
            kinds = {**dict.fromkeys(kernel.tiles, "tile"), **dict.fromkeys(kernel.buffer_counts, "buffers"),
                     **dict.fromkeys([*kernel.switches, *kernel.barrier_switches], "switch")}
            if kernel.groups:
                kinds[kernel.groups] = "group"
            scan.facts[name] = dataclasses.replace(facts, named_kinds=tuple(sorted(kinds.items())),
                                                   uses_dot=facts.uses_dot or kernel.uses_async_dot)

    def find(self, scan: Scan) -> None:
        """Claim the places that set buffer counts, pin what the tuner must not move, and couple each split tile
        to its group count."""
        kernels: dict[str, TlxKernel] = scan.readings.get(self.site, {})
        by_group: dict[tuple[int, str], Found] = {}
        for found in scan.found:
            if found.kernel in kernels:
                by_group.setdefault((found.group, found.name), found)
        for found in list(scan.found):  # first what each place is: a buffer count, or left as written
            kernel = kernels.get(found.kernel)
            if kernel is None or found.pinned:
                continue
            name = found.name
            if name in kernel.buffer_counts and found.site in CLAIMED_FROM and found.absent_from is None:
                found.via, found.site = found.site, self.site
                found.constraints.append(Constraint(
                    name, "at_least", "1", f"{name} counts the buffers tlx.local_alloc makes (line "
                    f"{kernel.buffer_counts[name]})", kernel.name, kernel.buffer_counts[name]))
                for least, why, line in kernel.lower_bounds.get(name, ()):
                    found.constraints.append(Constraint(name, "at_least", str(least), why, kernel.name, line))
            elif name in kernel.barrier_switches:
                called, line = kernel.barrier_switches[name]
                found.pinned = (f"{name} chooses how {kernel.name} synchronizes (a branch of it calls {called}, line "
                                f"{line}): barriers, which the tuner never edits; left as written")
            elif name in kernel.task_options:
                option, line = kernel.task_options[name]
                found.pinned = (f"{name} sets the {option} of an async task (line {line}): task partitioning, "
                                "which the tuner never edits")
            elif name in ("num_warps", "num_stages") and kernel.warp_specialized:
                found.pinned = (f"{kernel.name} is warp-specialized (tlx.async_tasks): its {name} is its "
                                "default task's" if name == "num_warps" else
                                f"{kernel.name} is warp-specialized (tlx.async_tasks): Triton's pipelining does "
                                "not run inside its tasks, which pipeline by hand") + "; left as written"
            elif kernel.groups and name == kernel.groups:
                self._group_constraints(scan, found, kernel)
            elif found.kind == "group" and kernel.fixed_replicas and name in {g for g, _ in kernel.splits.values()}:
                count, line = kernel.fixed_replicas
                found.pinned = (f"{name} is the number of consumer tasks, replicate={count} as written (line {line}): "
                                "task partitioning, which the tuner never edits")
        for found in list(scan.found):  # then the tiles split across the groups, knob or not
            kernel = kernels.get(found.kernel)
            if kernel is not None and not found.pinned and found.name in kernel.splits:
                self._split_constraints(scan, found, kernel, by_group)

    def _split_constraints(self, scan: Scan, found: Found, kernel: TlxKernel,
                           by_group: dict[tuple[int, str], Found]) -> None:
        """A tile split across the MMA groups: coupled to the group count where that is a knob in the same
        config, else held to the multiples the written count allows."""
        group_name, line = kernel.splits[found.name]
        partner = by_group.get((found.group, group_name)) if found.group else None
        text = (f"{found.name} // {group_name} (line {line}) is a whole multiple of {ROWS_PER_WARPGROUP} rows: "
                f"each of the {group_name} consumer groups multiplies its part with wgmma, "
                f"{ROWS_PER_WARPGROUP} rows per warpgroup")
        if partner is not None and not partner.pinned and kernel.groups == group_name:
            scan.couplings.append((found, partner, _groups_of, text))  # both move: checked together (knobs.py)
            return
        groups = _config_value(scan, found, group_name) if found.group else None
        if groups is None and kernel.fixed_replicas is not None:
            groups = kernel.fixed_replicas[0]
        if groups is None:
            return
        allowed = [v for v in DOMAINS["tile"] if _groups_of(v, groups)]
        found.constraints.append(Constraint(found.name, "one_of", ", ".join(map(str, allowed)) or "none",
                                            f"{text}; {group_name} is {groups} here", kernel.name, line))

    def _group_constraints(self, scan: Scan, found: Found, kernel: TlxKernel) -> None:
        """The MMA group count: whole warpgroups of the consumer task's warps per group (those warps are task
        partitioning, so their written value bounds the count); left as written when only its value fits."""
        if not kernel.task_warps or not found.group:
            return
        warps = _config_value(scan, found, kernel.task_warps)
        if warps is None:
            return
        allowed = [v for v in DOMAINS["group"] if _warpgroups_of(warps, v)]
        reason = (f"each of the {found.name} consumer tasks gets {kernel.task_warps} // {found.name} warps, whole "
                  f"warpgroups of {WARPS_PER_WARPGROUP}, and {kernel.task_warps} is {warps} here")
        if allowed == [integer(found.node)]:
            found.pinned = f"{found.name} stays {allowed[0]}: {reason}"
            return
        found.constraints.append(Constraint(found.name, "one_of", ", ".join(map(str, allowed)) or "none", reason,
                                            kernel.name, scan.line(found.node)))

    def edits(self, found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str] | None:
        return _via(found).edits(found, constraints)

    def takes_tables(self, found: Found) -> bool:
        return _via(found).takes_tables(found)

    def category_of(self, found: Found) -> str:
        return _via(found).category_of(found)


def _via(found: Found) -> SiteStyle:
    """The style that found the place this style claimed: its edits, tables and category stay that style's."""
    return CLAIMED_FROM[found.via]


STYLE = TlxBufferStyle()

__all__ = ["STYLE", "TlxKernel", "read_kernel", "tlx_kernels"]
