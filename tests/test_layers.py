"""The packages stand on floors: a package imports only packages on lower floors, and on its own floor only itself.

A package here is `protocol`, `sandbox_worker`, or `orchestrator.<name>` (a sub-package, or a top-level helper
module such as `orchestrator.text`; the `orchestrator` package's own `__init__` is `orchestrator`). `FLOORS` lists
them lowest first; the order is the code's, read from its imports, and a change that needs another order changes
this list on purpose. Every import counts, as in tests/test_architecture.py (whose scan this uses): module level,
inside a function, and under `if TYPE_CHECKING:` (a lazy import is still a dependency on that floor).

The lowest floor holds the contracts and the worker: `protocol` and `sandbox_worker` import nothing of the
orchestrator, nor each other (the worker mirrors protocol.worker by hand, DESIGN.md). Each check lists every
violation it finds, not just the first.
"""

from __future__ import annotations

import pytest

from tests.test_architecture import (
    PROJECT_ROOT,
    Import,
    Module,
    describe_import,
    edges_of,
    imports_of,
    load_modules,
    write_project,
)

# lowest first; each floor says why its packages stand there
FLOORS: tuple[tuple[str, ...], ...] = (
    ("protocol", "sandbox_worker"),  # the contracts, and the worker that runs in the sandbox
    # helpers on the standard library only
    ("orchestrator", "orchestrator.text", "orchestrator.source_digest", "orchestrator.python_template"),
    ("orchestrator.decision",),  # pure policy
    ("orchestrator.ledger", "orchestrator.worker", "orchestrator.vcs"),  # the run's records; one worker; commits
    ("orchestrator.bundle",),  # the user's files, frozen; the starter bundle
    ("orchestrator.compile_ahead", "orchestrator.autotune"),  # compiles on the host; the kernel's own autotune
    ("orchestrator.preflight", "orchestrator.providers", "orchestrator.report_html"),  # validate; generators; HTML
    ("orchestrator.run",),  # the loop, which hands work to all of the above
    ("orchestrator.batch",),  # many runs, each its own process
    ("orchestrator.cli",),  # the command line over everything
)


def package_of(module: str) -> str:
    """The floor's unit a module belongs to: `orchestrator.run.resume.rebuild` -> `orchestrator.run`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "orchestrator" else parts[0]


def floor_of(floors: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    return {package: index for index, floor in enumerate(floors) for package in floor}


def undeclared_packages(modules: dict[str, Module], floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """Packages on no floor (a new one must be placed), and floors naming a package that is not there."""
    found = {package_of(name) for name in modules}
    declared = floor_of(floors)
    return ([f"{package} is on no floor (add it to FLOORS where its imports put it)" for package in sorted(found)
             if package not in declared]
            + [f"{package} is on a floor but no module belongs to it" for package in sorted(set(declared) - found)])


def floor_violations(modules: dict[str, Module], floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of a package on a higher floor, or of another package on the same floor."""
    floor = floor_of(floors)
    found = []
    for name, module in sorted(modules.items()):
        source = package_of(name)
        if source not in floor:
            continue  # undeclared_packages names it
        for imported in imports_of(module):
            for target_module in edges_of(imported, modules):
                target = package_of(target_module)
                if target == source or target not in floor:
                    continue
                if floor[target] > floor[source]:
                    found.append(_describe(imported, source, target, "a higher floor", floor))
                elif floor[target] == floor[source]:
                    found.append(_describe(imported, source, target, "its own floor", floor))
    return found


def _describe(imported: Import, source: str, target: str, where: str, floor: dict[str, int]) -> str:
    return (f"{describe_import(imported)}: {source} (floor {floor[source]}) imports {imported.target}, "
            f"{target} on {where} (floor {floor[target]})")


def _report(what: str, violations: list[str]) -> str:
    return f"{len(violations)} {what}:\n" + "\n".join(f"  {v}" for v in violations)


@pytest.fixture(scope="module")
def project() -> dict[str, Module]:
    return load_modules(PROJECT_ROOT)


def test_every_package_stands_on_one_declared_floor(project):
    everywhere = [package for floor in FLOORS for package in floor]
    assert len(everywhere) == len(set(everywhere)), "a package is on two floors"
    violations = undeclared_packages(project, FLOORS)
    assert not violations, _report("package(s) off the floors", violations)


def test_the_contracts_and_the_worker_are_the_lowest_floor():
    assert set(FLOORS[0]) == {"protocol", "sandbox_worker"}


def test_no_package_imports_a_higher_floor_or_a_neighbour(project):
    violations = floor_violations(project, FLOORS)
    assert not violations, _report("import(s) against the floors", violations)


# ---- the check itself, on a tiny project ------------------------------------------------------------------

TINY_FLOORS = (("protocol", "sandbox_worker"), ("orchestrator.text",), ("orchestrator.run", "orchestrator.vcs"),
               ("orchestrator.cli",))


def test_imports_up_or_across_a_floor_are_found_wherever_they_sit(tmp_path):
    modules = write_project(tmp_path, {
        "protocol/__init__.py": "",
        "sandbox_worker/__init__.py": "def f():\n    import protocol\n",  # across the lowest floor, lazily
        "orchestrator/__init__.py": "",
        "orchestrator/text.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from orchestrator.run import a\n",
        "orchestrator/run/__init__.py": "",
        "orchestrator/run/a.py": "from orchestrator.text import clip\nfrom orchestrator.run import b\n",  # down; own
        "orchestrator/run/b.py": "from orchestrator.vcs import commit\n",  # across its floor
        "orchestrator/vcs/__init__.py": "import protocol\n",  # down
        "orchestrator/cli/__init__.py": "from orchestrator.run.a import x\n",  # down
    })
    violations = floor_violations(modules, TINY_FLOORS)
    assert [v.split(": ", 1)[1] for v in violations] == [
        "orchestrator.run (floor 2) imports orchestrator.vcs, orchestrator.vcs on its own floor (floor 2)",
        "orchestrator.text (floor 1) imports orchestrator.run, orchestrator.run on a higher floor (floor 2)",
        "sandbox_worker (floor 0) imports protocol, protocol on its own floor (floor 0)",
    ]
    assert "under TYPE_CHECKING" in violations[1] and "in a function" in violations[2]


def test_a_package_off_the_floors_is_named(tmp_path):
    modules = write_project(tmp_path, {"protocol/__init__.py": "", "orchestrator/report/__init__.py": "",
                                "orchestrator/report/page.py": "import protocol\n"})
    assert undeclared_packages(modules, (("protocol", "sandbox_worker"),)) == [
        "orchestrator.report is on no floor (add it to FLOORS where its imports put it)",
        "sandbox_worker is on a floor but no module belongs to it"]
