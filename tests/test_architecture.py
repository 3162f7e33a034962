"""The layout's promises, checked from source with `ast` (nothing here imports the code it checks).

- No import cycles among the modules of orchestrator/, protocol/ and sandbox_worker/. Every import is an
  edge: module level, inside a function, and under `if TYPE_CHECKING:` (a cycle hidden there is still a
  cycle for a reader). An edge goes to the module named (`from a.b import c` goes to `a.b.c` when that is
  a module, else to `a.b`); a package's own `__init__` is not an implied edge.
- A module over 400 lines says why in the first lines of its docstring, on a line starting with
  `Long because:` followed by the reason.
- sandbox_worker/ runs inside the sandbox on the standard library only: at module import time it imports
  nothing else (torch, triton, numpy only inside functions; a `TYPE_CHECKING` import counts as module
  level), and it never imports orchestrator/ or protocol/, not even inside a function.
- orchestrator/decision/ is pure policy: no trio, subprocess, os or other I/O module, and no file I/O.

Each check lists every violation it finds, not just the first.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("orchestrator", "protocol", "sandbox_worker")
MAX_LINES = 400
LONG_MARKER = "Long because:"
LONG_MARKER_WITHIN = 5  # docstring lines: the reason sits at the top, not somewhere in the prose
WORKER = "sandbox_worker"
DECISION = "orchestrator.decision"
STANDARD_LIBRARY = frozenset(sys.stdlib_module_names) | {"__future__"}
# trio/subprocess/os are the named ones; the rest are other ways of doing I/O
IMPURE_MODULES = frozenset({"trio", "anyio", "asyncio", "subprocess", "os", "shutil", "tempfile", "io", "pathlib",
                            "glob", "fileinput", "socket", "select", "mmap", "sqlite3", "shelve"})
FILE_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "open", "mkdir", "unlink", "rmdir",
                          "touch", "iterdir", "rglob", "tofile", "fromfile", "loadtxt", "savetxt", "genfromtxt",
                          "savez"})
SERIALIZERS = frozenset({"json", "pickle", "marshal", "np", "numpy", "tomllib"})  # their load/dump/save take files
SERIALIZER_FILE_CALLS = frozenset({"load", "dump", "save"})


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


@dataclass(frozen=True)
class Import:
    module: Module
    target: str  # dotted name as written, resolved for relative imports
    names: tuple[str, ...]  # for `from target import a, b`; empty for `import target`
    line: int
    in_function: bool
    type_checking: bool

    @property
    def top(self) -> str:
        return self.target.split(".")[0]

    @property
    def where(self) -> str:
        return f"{module_file(self.module)}:{self.line}"


def module_file(module: Module) -> str:
    return module.path.relative_to(PROJECT_ROOT).as_posix() if module.path.is_relative_to(PROJECT_ROOT) \
        else module.path.as_posix()


def load_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            source = path.read_text(encoding="utf-8")
            modules[name] = Module(name, path, ast.parse(source, filename=str(path)), len(source.splitlines()))
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _ImportCollector(ast.NodeVisitor):
    """Every import of one module, with whether it sits in a function or under `if TYPE_CHECKING:`."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.imports: list[Import] = []
        self.function_depth = 0
        self.type_checking_depth = 0

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        # decorators and defaults run at import time; only the body waits for a call
        for expr in (*getattr(node, "decorator_list", ()), *node.args.defaults, *node.args.kw_defaults):
            if expr is not None:
                self.visit(expr)
        self.function_depth += 1
        for child in (node.body if isinstance(node.body, list) else [node.body]):
            self.visit(child)
        self.function_depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.type_checking_depth += 1
        for child in node.body:
            self.visit(child)
        self.type_checking_depth -= 1
        for child in node.orelse:
            self.visit(child)

    def _add(self, node: ast.stmt, target: str, names: tuple[str, ...]) -> None:
        self.imports.append(Import(self.module, target, names, node.lineno, self.function_depth > 0,
                                   self.type_checking_depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name, ())

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = node.module or ""
        if node.level:
            package = self.module.name.split(".")
            if not self.module.is_package:
                package = package[:-1]
            base = package[: len(package) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
        self._add(node, target, tuple(alias.name for alias in node.names))


def imports_of(module: Module) -> list[Import]:
    collector = _ImportCollector(module)
    collector.visit(module.tree)
    return collector.imports


def edges_of(imported: Import, modules: dict[str, Module]) -> Iterator[str]:
    """The project modules one import statement points at."""
    if imported.names:
        submodules = [f"{imported.target}.{name}" for name in imported.names]
        yield from (name for name in submodules if name in modules)
        if any(name not in modules for name in submodules):
            yield from edges_of(Import(imported.module, imported.target, (), imported.line, imported.in_function,
                                       imported.type_checking), modules)
        return
    parts = imported.target.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    if parts:
        yield ".".join(parts)


def import_graph(modules: dict[str, Module]) -> dict[str, dict[str, Import]]:
    """module -> {imported module -> the first statement that imports it}."""
    graph: dict[str, dict[str, Import]] = {name: {} for name in modules}
    for name, module in modules.items():
        for imported in imports_of(module):
            for target in edges_of(imported, modules):
                graph[name].setdefault(target, imported)
    return graph


def strongly_connected(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of one module only when it imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        components.append(sorted(component))
    return components


def a_cycle(graph: dict[str, dict[str, Import]], component: list[str]) -> list[str]:
    """The shortest cycle through the component's first module, as a path that ends where it starts."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph[node]):
                if successor not in members:
                    continue
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if successor not in previous:
                    previous[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {component}")


def describe_cycle(graph: dict[str, dict[str, Import]], cycle: list[str]) -> str:
    steps = [f"{a} -> {b} ({describe_import(graph[a][b])})" for a, b in zip(cycle, cycle[1:], strict=False)]
    return "cycle: " + " -> ".join(cycle) + "\n    " + "\n    ".join(steps)


def describe_import(imported: Import) -> str:
    scope = "under TYPE_CHECKING" if imported.type_checking else "in a function" if imported.in_function else ""
    return f"{imported.where}{', ' + scope if scope else ''}"


def cycle_violations(modules: dict[str, Module]) -> list[str]:
    graph = import_graph(modules)
    return [describe_cycle(graph, a_cycle(graph, component)) for component in strongly_connected(graph)]


def long_module_violations(modules: dict[str, Module]) -> list[str]:
    found = []
    for module in modules.values():
        if module.lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(module.tree) or ""
        reasons = [line.removeprefix(LONG_MARKER).strip() for line in docstring.splitlines()[:LONG_MARKER_WITHIN]
                   if line.startswith(LONG_MARKER)]
        if not any(reasons):
            found.append(f"{module_file(module)}: {module.lines} lines and no '{LONG_MARKER} <reason>' line in the "
                         f"first {LONG_MARKER_WITHIN} lines of its docstring")
    return found


def worker_import_violations(modules: dict[str, Module]) -> list[str]:
    found = []
    for module in modules.values():
        if module.name.split(".")[0] != WORKER:
            continue
        for imported in imports_of(module):
            if imported.top in ("orchestrator", "protocol"):
                found.append(f"{describe_import(imported)}: the worker imports {imported.target} "
                             f"(it mirrors protocol.worker by hand and never imports the orchestrator side)")
            elif not imported.in_function and imported.top not in STANDARD_LIBRARY | {WORKER}:
                found.append(f"{describe_import(imported)}: the worker imports {imported.target} at module import "
                             f"time (only the standard library there; import it inside the function that uses it)")
    return found


def _file_io_calls(module: Module) -> Iterator[tuple[ast.Call, str]]:
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id == "open":
            yield node, "open()"
        elif isinstance(function, ast.Attribute) and function.attr in FILE_METHODS:
            yield node, f".{function.attr}()"
        elif (isinstance(function, ast.Attribute) and function.attr in SERIALIZER_FILE_CALLS
              and isinstance(function.value, ast.Name) and function.value.id in SERIALIZERS):
            yield node, f"{function.value.id}.{function.attr}()"


def decision_purity_violations(modules: dict[str, Module]) -> list[str]:
    found = []
    for module in modules.values():
        if module.name != DECISION and not module.name.startswith(DECISION + "."):
            continue
        for imported in imports_of(module):
            if imported.top in IMPURE_MODULES:
                found.append(f"{describe_import(imported)}: the decision package imports {imported.target}")
        for call, what in _file_io_calls(module):
            found.append(f"{module_file(module)}:{call.lineno}: the decision package does file I/O ({what})")
    return found


def _report(what: str, violations: list[str]) -> str:
    return f"{len(violations)} {what}:\n" + "\n".join(f"  {v}" for v in violations)


@pytest.fixture(scope="module")
def project() -> dict[str, Module]:
    return load_modules(PROJECT_ROOT)


def test_the_scan_sees_the_whole_project(project):
    assert {"orchestrator.decision.gates", "protocol.worker", "sandbox_worker.server",
            "sandbox_worker.harness_kit.timing", "orchestrator.run.loop"} <= set(project)
    assert {name.split(".")[0] for name in project} == set(PACKAGES)


def test_no_import_cycles(project):
    violations = cycle_violations(project)
    assert not violations, _report("import cycle(s)", violations)


def test_long_modules_say_why(project):
    violations = long_module_violations(project)
    assert not violations, _report(f"module(s) over {MAX_LINES} lines without a reason", violations)


def test_worker_is_standard_library_only(project):
    violations = worker_import_violations(project)
    assert not violations, _report("worker import(s) outside its rule", violations)


def test_decision_package_is_pure(project):
    violations = decision_purity_violations(project)
    assert not violations, _report("impure use(s) in orchestrator/decision", violations)


# ---- the checks themselves, on a tiny project written for each rule ------------------------------------


def write_project(root: Path, files: dict[str, str]) -> dict[str, Module]:
    """A tiny project of the given files under root, read back as modules (the checks' own tests use it)."""
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return load_modules(root)


def test_a_cycle_through_type_checking_and_a_function_is_found(tmp_path):
    modules = write_project(tmp_path, {
        "protocol/__init__.py": "",
        "protocol/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from protocol.b import B\n",
        "protocol/b.py": "def f():\n    from . import c\n",
        "protocol/c.py": "import protocol.a\n",
        "protocol/d.py": "from protocol import a\n",  # into the cycle, not part of it
    })
    [violation] = cycle_violations(modules)
    assert violation.splitlines()[0] == "cycle: protocol.a -> protocol.b -> protocol.c -> protocol.a"
    assert "under TYPE_CHECKING" in violation and "in a function" in violation


def test_an_init_that_reexports_its_child_is_not_a_cycle(tmp_path):
    modules = write_project(tmp_path, {"protocol/__init__.py": "from protocol.a import A\n",
                                "protocol/a.py": "from protocol.b import B\nA = 1\n", "protocol/b.py": "B = 2\n"})
    assert cycle_violations(modules) == []


def test_long_modules_need_the_marker_at_the_top(tmp_path):
    body = "x = 1\n" * MAX_LINES
    modules = write_project(tmp_path, {
        "protocol/short.py": '"""Short."""\n',
        "protocol/reasoned.py": f'"""Long.\n\n{LONG_MARKER} one table of every syscall.\n"""\n{body}',
        "protocol/buried.py": f'"""Long.\n\n\n\n\n\n{LONG_MARKER} too far down.\n"""\n{body}',
        "protocol/empty_reason.py": f'"""Long.\n{LONG_MARKER}\n"""\n{body}',
    })
    assert [v.split(":")[0] for v in long_module_violations(modules)] == [
        str(tmp_path / "protocol/buried.py"), str(tmp_path / "protocol/empty_reason.py")]


def test_worker_rules(tmp_path):
    modules = write_project(tmp_path, {
        "sandbox_worker/__init__.py": "",
        "sandbox_worker/ok.py": "import os\nfrom . import other\n\ndef f():\n    import torch\n",
        "sandbox_worker/other.py": "try:\n    import numpy\nexcept ImportError:\n    numpy = None\n",
        "sandbox_worker/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import triton\n",
        "sandbox_worker/leak.py": "def f():\n    from protocol.worker import HelloEvent\n",
    })
    violations = worker_import_violations(modules)
    assert [v.split(":")[0].rsplit("/", 1)[-1] for v in violations] == ["leak.py", "other.py", "typed.py"]


def test_decision_rules(tmp_path):
    modules = write_project(tmp_path, {
        "orchestrator/decision/__init__.py": "",
        "orchestrator/decision/pure.py": "import math\nimport json\nx = json.loads('1')\n",
        "orchestrator/decision/shell.py": "def f():\n    import subprocess\n",
        "orchestrator/decision/files.py": "import json\ndef f(p):\n    return json.load(open(p)), p.read_text()\n",
        "orchestrator/run/io.py": "import os\n",  # outside the package: not its business
    })
    violations = decision_purity_violations(modules)
    assert sorted(v.split(": ", 1)[1] for v in violations) == [
        "the decision package does file I/O (.read_text())", "the decision package does file I/O (json.load())",
        "the decision package does file I/O (open())", "the decision package imports subprocess"]
