"""run.json: what a reader needs to trust or reproduce a run (inputs, hashes, versions, isolation, device)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time

from orchestrator.bundle.inputs import FrozenBundle, Inputs
from orchestrator.ledger.config import RunConfig
from orchestrator.run.state import RunState
from protocol.manifest import (
    RECORD_FORMAT,
    FrozenBundleRecord,
    HostRecord,
    InputPaths,
    IsolationRecord,
    RunManifest,
)

VERSIONED_PACKAGES = ("trio", "pydantic", "psutil", "numpy", "torch", "triton", "openai", "GitPython")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def run_manifest(config: RunConfig, inputs: Inputs, bundle: FrozenBundle, state: RunState) -> RunManifest:
    paths = {"kernel": inputs.kernel_path, "harness": inputs.harness_path, "cases": inputs.cases_path,
             "target": inputs.target_path, "budget": inputs.budget_path, "reference_kernel": inputs.reference_kernel_path}
    return RunManifest(
        run_id=state.run_id,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        command=config.argv,
        inputs=InputPaths(**{role: str(path) if path else None for role, path in paths.items()}),
        bundle=FrozenBundleRecord(directory=str(bundle.directory), sha256=bundle.files, sources=bundle.sources),
        budget=config.budget,
        budget_sources=config.budget_sources or dict.fromkeys(type(config.budget).model_fields, "default"),
        confidence=config.confidence,
        provider=config.provider,
        model=config.model,
        profile=config.profile,
        diagnostic_instrumentation=config.diagnostic_instrumentation,
        isolation_mode=config.isolation,
        isolation=IsolationRecord(probe=config.isolation_probe, baseline_worker=state.worker_isolation),
        refused_environment=config.refused_environment,
        schedule=config.schedule,
        confirm_pairs=config.confirm_pairs,
        triage=config.triage,
        reuse_incumbent_run=config.reuse_incumbent_run,
        overlap_compile_ahead=config.overlap_compile_ahead,
        skip_validation=config.skip_validation,
        bundle_lock=config.bundle_lock_summary,
        host=HostRecord(platform=platform.platform(), python=platform.python_version(), machine=platform.machine()),
        versions=package_versions(),
        worker_versions=state.worker_versions,
        target=inputs.target,
        device=state.device,
        record_format=RECORD_FORMAT,
        working_directory=os.getcwd(),
        autotune=config.autotune,
    )
