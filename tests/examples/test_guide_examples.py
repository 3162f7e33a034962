"""The worked examples of docs/harness.md: real bundles that pass `tlx-agent validate`, quoted verbatim.

`validate` runs through the real CLI (`python -m orchestrator.cli validate --no-profile`), with fresh
sandboxed workers, in the Triton interpreter, at default settings: there benchmark stability is reported
but not judged (the interpreter's timings measure this machine's load); every other check must pass for
real: device, build, verify, where verdicts run (the judge), the work figures, both negative tests, unchanged
bundle. With `--no-profile` the profile check is skipped by design (the interpreter has nothing to
profile; tests/validate covers that check).

The scalar test runs the scaled_add harness in a child with TRITON_INTERPRET=1 (as
tests/examples/test_example_harnesses.py does) on kernels that hard-code or drop a scalar: the guide
says drawing the scalars from the seed is what catches them.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, run_cli

EXAMPLES = PROJECT_ROOT / "examples"
GUIDE = PROJECT_ROOT / "docs" / "harness.md"
GUIDE_EXAMPLES = {"scaled_add": "scaled_add", "gemm": "gemm"}  # example directory -> its entry point
BUNDLE_FILES = ("kernel.py", "harness.py", "cases.json", "target.json")
EXPECTED_CHECKS = {"device", "build", "verify", "verdict_process", "benchmark_stability", "work_figures", "profile",
                   "negative_invalid_source", "negative_incorrect_output", "bundle_unchanged"}
CHILD_TIMEOUT_S = 100


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", sorted(GUIDE_EXAMPLES))
def test_guide_example_passes_validate(example: str, tmp_path: Path) -> None:
    bundle = EXAMPLES / example
    run = run_cli("validate", "--kernel", bundle / "kernel.py", "--harness", bundle / "harness.py",
                  "--cases", bundle / "cases.json", "--target", bundle / "target.json",
                  "--output-dir", tmp_path / "out", "--arch", "cpu", "--no-profile", timeout=280)
    assert run.returncode == 0, run.stderr[-4000:]
    lock = json.loads(run.stdout)
    statuses = {check["name"]: (check["status"], check["message"]) for check in lock["checks"]}
    assert set(statuses) == EXPECTED_CHECKS
    assert statuses.pop("profile") == ("skipped", "profiling disabled (--no-profile)")
    stability_status, stability_message = statuses.pop("benchmark_stability")
    assert stability_status == "skipped" and stability_message.startswith("not judged: the CPU interpreter")
    failed = {name: message for name, (status, message) in statuses.items() if status != "passed"}
    assert not failed, failed
    assert lock["passed"] is True and lock["failed_checks"] == []
    cases = json.loads((bundle / "cases.json").read_text(encoding="utf-8"))
    assert lock["case_ids"] == [case["case_id"] for case in cases]
    assert [row["case_id"] for row in lock["stability"]] == lock["case_ids"]
    assert f"public functions {GUIDE_EXAMPLES[example]} wrapped" in statuses["negative_incorrect_output"][1]


def _fenced_blocks(markdown: str) -> list[str]:
    return [match.group(1) for match in re.finditer(r"^```[a-z]*\n(.*?)^```$", markdown, re.DOTALL | re.MULTILINE)]


@pytest.mark.parametrize("example", sorted(GUIDE_EXAMPLES))
def test_the_guide_quotes_every_bundle_file_verbatim(example: str) -> None:
    blocks = _fenced_blocks(GUIDE.read_text(encoding="utf-8"))
    for name in BUNDLE_FILES:
        text = (EXAMPLES / example / name).read_text(encoding="utf-8")
        assert text in blocks, f"docs/harness.md does not quote examples/{example}/{name} as it is now"


SCALAR_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import importlib.util
from sandbox_worker.harness_kit import context

example = Path(sys.argv[1]) / "examples" / "scaled_add"
spec = importlib.util.spec_from_file_location("guide_scaled_add_harness", example / "harness.py")
harness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(harness)
source = (example / "kernel.py").read_text()
target = json.loads((example / "target.json").read_text())
case = json.loads((example / "cases.json").read_text())[0]
variants = {
    "untouched": source,
    "beta_dropped": source.replace("alpha * x + beta, mask=mask", "alpha * x, mask=mask"),
    "scalars_hard_coded": source.replace("(x, out, alpha, beta, n_elements,", "(x, out, 1.25, 0.0, n_elements,"),
}
report = {}
for label, variant in variants.items():
    assert label == "untouched" or variant != source, f"the {label} edit no longer matches kernel.py"
    context.set_command_context(seed=int(sys.argv[2]), phase="build")
    built = harness.build(variant, target)
    assert built["success"], built["diagnostics"]
    context.set_command_context(seed=int(sys.argv[2]), phase="verify")
    verdict = harness.verify(built["artifact"], case)
    report[label] = {"passed": verdict["passed"], "diagnostics": verdict["diagnostics"]}
print(json.dumps(report))
"""


@pytest.mark.timeout(CHILD_TIMEOUT_S + 20)
def test_scaled_add_rejects_kernels_that_hard_code_or_drop_a_scalar(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(2**31)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(PROJECT_ROOT), "TLX_WORKER_SCRATCH": str(tmp_path)}
    completed = subprocess.run([sys.executable, "-c", SCALAR_CHILD, str(PROJECT_ROOT), str(seed)], capture_output=True,
                               text=True, timeout=CHILD_TIMEOUT_S, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, f"seed {seed}: child failed\n{completed.stderr[-4000:]}"
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["untouched"] == {"passed": True, "diagnostics": ""}, f"seed {seed}: {report}"
    for label in ("beta_dropped", "scalars_hard_coded"):
        assert report[label]["passed"] is False, f"seed {seed}: the {label} kernel passed verify"
        assert "elements outside atol=" in report[label]["diagnostics"], f"seed {seed}: {report[label]}"
