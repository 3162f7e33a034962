"""Batch test material: small bundles copied from the synthetic one, and manifests that point at them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import SYNTHETIC, synthetic_kernel, write_candidates

FASTER = synthetic_kernel(50.0)
SLOWER = synthetic_kernel(150.0)
ABORTS_AT_IMPORT = synthetic_kernel(100.0, prelude="import os\nos.abort()\n")
# The synthetic harness, also reporting the CUDA_VISIBLE_DEVICES its worker saw (in each case's metrics).
GPU_REPORTING_HARNESS = (SYNTHETIC / "harness.py").read_text().replace(
    '"metrics": {"wrong": len(bad)}',
    '"metrics": {"wrong": len(bad), "visible": __import__("os").environ.get("CUDA_VISIBLE_DEVICES")}')
# A short budget for the synthetic bundle: a job takes a few seconds on a loaded 2-core machine.
QUICK_OPTIONS: dict[str, Any] = {
    "provider": "replay", "no_commit_winner": True, "max_total_seconds": 90, "max_candidate_seconds": 30,
    "worker_start": "fresh", "skip_validation": True, "confirm_runs": 0, "max_rounds": 2,
}


def make_bundle(root: Path, name: str, candidates: list[str], *, kernel: str | None = None,
                cases: str | None = None, backend: str = "cpu", harness: str | None = None) -> dict[str, str]:
    """A bundle folder `root/name` plus its replay candidates; the job fields, relative to `root`."""
    folder = root / name
    folder.mkdir(parents=True)
    for file in ("kernel.py", "harness.py", "cases.json", "target.json"):
        shutil.copy(SYNTHETIC / file, folder / file)
    if kernel is not None:
        (folder / "kernel.py").write_text(kernel)
    if cases is not None:
        (folder / "cases.json").write_text(cases)
    if harness is not None:
        (folder / "harness.py").write_text(harness)
    target = json.loads((folder / "target.json").read_text())
    (folder / "target.json").write_text(json.dumps({**target, "backend": backend}))
    write_candidates(folder / "cands", candidates)
    return {"job_id": name, "kernel": f"{name}/kernel.py", "harness": f"{name}/harness.py",
            "cases": f"{name}/cases.json", "target": f"{name}/target.json",
            "options": {"replay_dir": f"{name}/cands"}}


def write_manifest(root: Path, jobs: list[dict[str, Any]], options: dict[str, Any] | None = None) -> Path:
    path = root / "manifest.json"
    path.write_text(json.dumps({"defaults": {"options": {**QUICK_OPTIONS, **(options or {})}}, "jobs": jobs}))
    return path


def read_summary(output_dir: Path) -> dict[str, Any]:
    return json.loads((output_dir / "batch.json").read_text())


def jobs_by_id(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["job_id"]: job for job in summary["jobs"]}


STATE_LINE = re.compile(r"batch job=(\S+) status=(\S+)(?: attempt=\d+ gpu=(\S+))?")


def occupancy(stderr: str) -> tuple[int, list[str]]:
    """From the batch's state lines: the most jobs running at once, and every GPU given to a job while another
    job held it (none expected)."""
    holders: dict[str, str | None] = {}
    most, clashes = 0, []
    for job_id, status, gpu in STATE_LINE.findall(stderr):
        if status == "running":
            if gpu != "None" and gpu in holders.values():
                clashes.append(f"{job_id} on gpu {gpu}")
            holders[job_id] = gpu
            most = max(most, len(holders))
        else:
            holders.pop(job_id, None)
    return most, clashes


def visible_devices_seen(job_json: Path) -> set[str | None]:
    """What GPU_REPORTING_HARNESS reported for the baseline, from the result.json a job's stdout summary names."""
    summary = json.loads(job_json.read_text())
    result = json.loads(Path(summary["result_json"]).read_text())
    return {case["metrics"]["visible"] for case in result["baseline"]["cases"]}
