#!/usr/bin/env python3
"""Which per-shape table would the tuner compose from a recorded screening family? (CPU; no worker runs)

Reads one family (`--screen s001`) of a tune run's `screening.jsonl` (medians per case and the wrapper's
observed locals per variant), rebuilds each variant's configuration from its label against the knobs of the
family's incumbent source, and runs `orchestrator/providers/tune/tables.py` `compose_table` on it with the
cases' weights from `cases.json`. Prints the table's label, its composed speedup over the control and the best
single configuration's, then the source it would propose; "no table" when none qualifies. Used to check a
change to the composition against families measured on the H200 (docs/results/2026-12-02-tuner-tables.md).

  python3 scripts/replay_tables.py --source KERNEL.py --screening RUN/screening.jsonl --screen s001 --cases CASES.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from orchestrator.providers.tune.knobs import tunable_knobs
    from orchestrator.providers.tune.search import MIN_SCREEN_GAIN
    from orchestrator.providers.tune.tables import Run, compose_table

    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, required=True, help="the family's incumbent (its control's source)")
    parser.add_argument("--screening", type=Path, required=True)
    parser.add_argument("--screen", default="s001")
    parser.add_argument("--cases", type=Path, help="cases.json, for the gate's weights (equal weights without)")
    args = parser.parse_args()
    source = args.source.read_text(encoding="utf-8")
    knobs = tunable_knobs(source)
    incumbent = {knob.key: knob.value for knob in knobs}
    weights = {case["case_id"]: float(case.get("weight", 1.0))
               for case in json.loads(args.cases.read_text())} if args.cases else {}
    runs = []
    for line in args.screening.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["screen_id"] != args.screen or record["status"] != "ok":
            continue
        config = dict(incumbent)
        if record["label"] != "incumbent (control)":
            for change in record["label"].split(", "):
                key, value = change.rsplit("=", 1)
                config[key] = int(value)
        runs.append(Run(tuple(sorted(config.items())), record["medians_us"], record.get("observed", {})))
    if not runs:
        print(f"no screened variant of {args.screen} in {args.screening}", file=sys.stderr)
        return 2
    plan = compose_table(source, knobs, runs[0], runs[1:], weights, min_gain=MIN_SCREEN_GAIN)
    if plan is None:
        print(f"no table ({len(runs)} variants screened)")
        return 0
    print(f"table: {plan.label}; composed {1 / plan.relative:.4f}x, best single {1 / plan.single_relative:.4f}x")
    print(plan.source, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
