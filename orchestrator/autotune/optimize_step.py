"""optimize's trusted autotune step: before its preflight and its run, so that every worker of both pins it.

A resumed run does not come here: its choice is in run.json (`RunManifest.autotune`), and the run it continues
already made it.
"""

from __future__ import annotations

import os

import trio

from orchestrator.autotune.step import StepWorkers, run_step
from orchestrator.bundle.inputs import Inputs, freeze_bundle
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.live_log import LiveLog
from orchestrator.worker.process import SubprocessSpawner
from orchestrator.worker.process_tree import become_subreaper
from protocol.autotune import AutotuneRecord


def optimize_autotune(config: RunConfig, inputs: Inputs, log: LiveLog) -> AutotuneRecord | None:
    """The untouched kernel's own autotune, once per key, in `<output>/autotune/`; None when it has no list to
    choose from. Raises `AutotuneStepFailed` with the sentence that stops the run."""
    from orchestrator.autotune.detect import autotuned_kernels

    if not autotuned_kernels(inputs.kernel_source):
        return None
    work_root = config.output_dir / "autotune"
    work_root.mkdir(parents=True, exist_ok=True)
    bundle = freeze_bundle(inputs, work_root)
    workers = StepWorkers(run_id="autotune", harness_path=bundle.harness_path, target=inputs.target,
                          cases=inputs.cases, work_root=work_root, log=log, spawner=SubprocessSpawner(),
                          parent_env=dict(os.environ), isolation=config.isolation, worker_python=config.worker_python,
                          data_limit_bytes=config.data_limit_bytes, seconds=config.budget.max_autotune_seconds)
    become_subreaper()
    return trio.run(run_step, workers, inputs.kernel_source)
