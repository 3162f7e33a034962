"""What the tuner finds in kernel files it has never seen: its knobs, their domains, and whether each edit holds.

For every `.py` file under the paths given: the knobs `tunable_knobs` finds (key, value, domain), the sites it
sets aside with the reason, the tuner's own domain assertion (`check_domains`), and one edit per knob and
direction (the next legal value up and down, applied with `apply_knob`, the result parsed). Discovery is static,
so the files need not import here (TLX kernels need Meta's Triton only to run). A file whose discovery raises, a
knob outside its domain, or an edit that raises or leaves a file that does not parse is a failure: the exit status
is then 1, and the table says which.

    .venv/bin/python scripts/discover_knobs.py tests/providers/tune_discovery/fixtures/tlx
    .venv/bin/python scripts/discover_knobs.py --verbose path/to/kernel.py     # every knob and domain
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.providers.tune.edits import EditError  # noqa: E402
from orchestrator.providers.tune.knobs import (  # noqa: E402
    DOWN,
    UP,
    KnobDomainError,
    apply_knob,
    check_domains,
    next_value,
    set_aside,
    tunable_knobs,
)


def files_under(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        found += sorted(p for p in path.rglob("*.py") if p.name != "__init__.py") if path.is_dir() else [path]
    return found


def scan(source: str) -> tuple[int, list[str], list[str], list[str]]:
    """(knobs found, lines describing them and their refused edits, set-aside lines, failures) of one file."""
    knobs = tunable_knobs(source)
    failures: list[str] = []
    try:
        check_domains(knobs)
    except KnobDomainError as exc:
        failures.append(str(exc))
    lines = [f"{knob.key} = {knob.show(knob.value)} in [{', '.join(knob.show(v) for v in knob.domain)}]" for knob in knobs]
    for knob in knobs:
        for direction in (UP, DOWN):
            value = next_value(knob, direction, knob.value)
            if value is None:
                continue
            try:
                ast.parse(apply_knob(source, knob, value))
            except EditError as exc:  # a constraint of the code refused it: the search never proposes it
                lines.append(f"  {knob.key} -> {knob.show(value)} refused: {exc}")
            except Exception as exc:  # noqa: BLE001 - any other exception is the finding
                failures.append(f"{knob.key} -> {knob.show(value)}: {type(exc).__name__}: {exc}")
    aside = [f"{knob.key}: {why}" for knob, why in set_aside(source)]
    return len(knobs), lines, aside, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="kernel files or directories of them")
    parser.add_argument("--verbose", action="store_true", help="every knob, domain, refusal and set-aside site")
    args = parser.parse_args(argv)
    failed = 0
    files = files_under(args.paths)
    for path in files:
        try:
            knobs, lines, aside, failures = scan(path.read_text(encoding="utf-8"))
        except Exception as exc:  # noqa: BLE001
            knobs, lines, aside, failures = 0, [], [], [f"discovery raised {type(exc).__name__}: {exc}"]
        print(f"{'FAIL' if failures else 'ok  '} {path}  knobs={knobs} set_aside={len(aside)}")
        for line in failures + (lines + [f"  set aside {line}" for line in aside] if args.verbose else []):
            print(f"     {line}")
        failed += bool(failures)
    print(f"{len(files)} files, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
