"""Loading and freezing the user's inputs.

`load_inputs` checks everything before any worker starts (files, JSON, types, harness functions) and
raises `BundleError` with one line naming the file and field. `freeze_bundle` copies the inputs into
`<output>/bundle/` read-only and hashes them; `check_frozen` re-hashes before every worker start.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from protocol.bundle import (
    BundleError,
    Case,
    Target,
    load_budget_file,
    load_cases_file,
    load_target_file,
)

REQUIRED_HARNESS_FUNCTIONS = ("build", "verify", "benchmark")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_text(path: Path, what: str) -> str:
    if not path.exists():
        raise BundleError(f"{what} file {path} does not exist; pass an existing path")
    if path.is_dir():
        raise BundleError(f"{what} path {path} is a directory; pass the file itself")
    try:
        # bytes-exact (no newline translation): the commit step compares this with the file on disk
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"{what} file {path} cannot be read ({exc}); check its permissions and encoding") from None


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def parse_python(path: Path, what: str) -> tuple[str, ast.Module]:
    source = _read_text(path, what)
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise BundleError(f"{what} file {path} is not valid Python (line {exc.lineno}: {exc.msg}); fix it") from None
    return source, tree


def check_harness(path: Path) -> list[str]:
    _source, tree = parse_python(path, "harness")
    names = _top_level_names(tree)
    missing = [name for name in REQUIRED_HARNESS_FUNCTIONS if name not in names]
    if missing:
        raise BundleError(f"harness {path} does not define {', '.join(missing)}; the harness must export "
                          "build(kernel_source, target), verify(artifact, case) and benchmark(artifact, case, repetitions)")
    return [name for name in (*REQUIRED_HARNESS_FUNCTIONS, "profile") if name in names]


@dataclass
class Inputs:
    kernel_path: Path
    harness_path: Path
    cases_path: Path
    target_path: Path
    budget_path: Path | None
    reference_kernel_path: Path | None
    kernel_source: str
    cases: list[Case]
    target: Target
    budget_overrides: dict[str, object] = field(default_factory=dict)
    harness_functions: list[str] = field(default_factory=list)
    reference_kernel_source: str | None = None

    def paths_by_role(self) -> dict[str, Path]:
        """Role -> path of every file the run depends on (budget and reference kernel when given)."""
        paths = {"kernel": self.kernel_path, "harness": self.harness_path, "cases": self.cases_path,
                 "target": self.target_path, "budget": self.budget_path,
                 "reference_kernel": self.reference_kernel_path}
        return {role: path for role, path in paths.items() if path is not None}


# The name each role's file gets in the frozen bundle/ (the lock keys files by role, the run by name).
FROZEN_NAME_BY_ROLE = {"kernel": "kernel.py", "harness": "harness.py", "cases": "cases.json",
                       "target": "target.json", "budget": "budget.json", "reference_kernel": "reference_kernel.py"}


def load_inputs(*, kernel: Path, harness: Path, cases: Path, target: Path, budget: Path | None,
                reference_kernel: Path | None) -> Inputs:
    kernel_source, _tree = parse_python(kernel, "kernel")
    harness_functions = check_harness(harness)
    loaded_cases = load_cases_file(cases)
    loaded_target = load_target_file(target)
    overrides = load_budget_file(budget) if budget is not None else {}
    reference_source = _read_text(reference_kernel, "reference kernel") if reference_kernel is not None else None
    return Inputs(kernel_path=kernel, harness_path=harness, cases_path=cases, target_path=target, budget_path=budget,
                  reference_kernel_path=reference_kernel, kernel_source=kernel_source, cases=loaded_cases,
                  target=loaded_target, budget_overrides=overrides, harness_functions=harness_functions,
                  reference_kernel_source=reference_source)


@dataclass
class FrozenBundle:
    directory: Path
    files: dict[str, str]  # name inside bundle/ -> sha256
    sources: dict[str, str]  # name inside bundle/ -> original absolute path

    @property
    def harness_path(self) -> Path:
        return self.directory / "harness.py"

    def path(self, name: str) -> Path:
        return self.directory / name


def freeze_bundle(inputs: Inputs, output_dir: Path) -> FrozenBundle:
    directory = output_dir / "bundle"
    directory.mkdir(parents=True, exist_ok=False)
    originals = {FROZEN_NAME_BY_ROLE[role]: path for role, path in inputs.paths_by_role().items()}
    files: dict[str, str] = {}
    for name, source in originals.items():
        destination = directory / name
        shutil.copyfile(source, destination)
        os.chmod(destination, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        files[name] = sha256_file(destination)
    os.chmod(directory, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return FrozenBundle(directory=directory, files=files, sources={k: str(v) for k, v in originals.items()})


def check_frozen(bundle: FrozenBundle) -> str | None:
    """The name of the first frozen file whose content changed (or vanished), else None."""
    for name, expected in bundle.files.items():
        path = bundle.directory / name
        try:
            if sha256_file(path) != expected:
                return name
        except OSError:
            return name
    extra = {p.name for p in bundle.directory.iterdir()} - set(bundle.files)
    if extra:
        return sorted(extra)[0]
    return None
