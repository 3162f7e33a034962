#!/usr/bin/env python3
"""Write a kernel's knob grid as candidate files for `--provider replay`: 001.py, 002.py, ... in a fixed random
order, each with a 001.json naming its configuration.

The gate's throughput is what this measures on the GPU (`scripts/gpu/h200_softmax_gate_throughput.sh`): the tuner
sends a candidate to the gate only when screening timed it faster, so a tune run that finds its best early ends
with few gated; the grid's configurations, replayed from the tuned kernel, are mostly a little slower or no
faster, the candidates a long search gates. The grid is tuner_study.py's (`GRID`, narrowed by `--values`); the
kernel's own configuration and those its edits refuse are left out.

  python3 scripts/grid_candidates.py --kernel RUN/best_kernel.py --out DIR [--count 60] [--seed 0]
  python3 scripts/grid_candidates.py --kernel examples/softmax/kernel.py --start BLOCK_SIZE=1024 NUM_WARPS=2 \
      NUM_STAGES=2 --start-out START.py --out DIR      (the kernel set to a configuration first, written to START.py)
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    from tuner_study import narrowed_grid

    from orchestrator.providers.tune import apply_knobs, find_knobs
    from orchestrator.providers.tune.edits import EditError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", type=Path, required=True, help="the kernel the candidates are edits of")
    parser.add_argument("--out", type=Path, required=True, help="an empty or missing folder")
    parser.add_argument("--count", type=int, default=60, help="at most this many candidates")
    parser.add_argument("--seed", type=int, default=0, help="the order of the grid")
    parser.add_argument("--values", nargs="*", default=[], metavar="KIND=V1,V2", help="narrow a knob kind's values")
    parser.add_argument("--start", nargs="*", default=[], metavar="NAME=V",
                        help="set these knobs (by name) in the kernel first; the candidates are edits of that")
    parser.add_argument("--start-out", type=Path, help="where to write the kernel --start made (the run's --kernel)")
    args = parser.parse_args()
    if bool(args.start) != bool(args.start_out):
        parser.error("--start and --start-out go together")
    try:
        values_by_kind = narrowed_grid(args.values)
    except ValueError as exc:
        parser.error(str(exc))
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out {args.out} is not empty: the replay provider would read what is there too")
    source = args.kernel.read_text(encoding="utf-8")
    knobs = find_knobs(source)
    if not knobs:
        parser.error(f"--kernel {args.kernel}: no knob found (scripts/discover_knobs.py says why)")
    if args.start:
        by_name = {knob.name: knob for knob in knobs}
        start = dict(item.partition("=")[::2] for item in args.start)
        unknown = sorted(set(start) - set(by_name))
        if unknown or not all(v.isdigit() for v in start.values()):
            parser.error(f"--start {' '.join(args.start)}: use NAME=INT with NAME one of {sorted(by_name)}")
        source = apply_knobs(source, {by_name[name].key: int(value) for name, value in start.items()})
        args.start_out.write_text(source, encoding="utf-8")
        knobs = find_knobs(source)
    own = tuple(knob.value for knob in knobs)
    grid = [values for values in itertools.product(*(values_by_kind[k.kind] for k in knobs)) if values != own]
    random.Random(args.seed).shuffle(grid)
    args.out.mkdir(parents=True, exist_ok=True)
    written = refused = 0
    for values in grid:
        if written == args.count:
            break
        configuration = {knob.name: value for knob, value in zip(knobs, values, strict=True)}
        try:
            text = apply_knobs(source, {knob.key: value for knob, value in zip(knobs, values, strict=True)})
        except EditError:
            refused += 1
            continue
        written += 1
        stem = args.out / f"{written:03d}"
        stem.with_suffix(".py").write_text(text, encoding="utf-8")
        change = ", ".join(f"{name} {configuration[name]}" for name in sorted(configuration))
        stem.with_suffix(".json").write_text(json.dumps({"change": f"grid configuration: {change}"}), encoding="utf-8")
    print(f"grid_candidates: {written} written to {args.out} ({len(grid)} in the grid besides the kernel's own, "
          f"{refused} refused by the edits; knobs {', '.join(k.name for k in knobs)})")
    return 0 if written else 1


if __name__ == "__main__":
    raise SystemExit(main())
