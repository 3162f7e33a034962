"""README.md as a new user reads it: install first, then init-bundle -> validate -> optimize, run here exactly as
written (the CLI of this checkout, a temporary directory for /tmp/tlx-first); its optimize prints a summary of at
most 150 lines; every exit code it explains is protocol/outcome.py's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.outcome import ExitCode
from protocol.summary import RunSummary
from tests.conftest import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
EXAMPLE_DIR = "/tmp/tlx-first"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def example_block() -> str:
    text = readme()
    start = text.index("<!-- readme-example -->")
    match = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert match, "no bash block after <!-- readme-example -->"
    return match.group(1)


def test_the_readme_meets_things_in_the_order_a_user_does():
    text = readme()
    order = [text.index(marker) for marker in (
        "## Install", "pip install -e .", "scripts/setup_env.sh", "## Your first run", "tlx-agent init-bundle",
        "tlx-agent validate", "tlx-agent optimize --kernel", "## What the output means")]
    assert order == sorted(order)
    # no optimize before the example has made its bundle, and the example uses only the files it made
    assert text.index("tlx-agent optimize") > text.index("tlx-agent init-bundle --kernel kernel.py --entry vector_add")
    block = example_block()
    for name in ("bundle/harness.py", "bundle/cases.json", "bundle/target.json", "validate/bundle.lock.json"):
        assert block.index(name) > block.index("--out bundle")


def test_the_readme_explains_every_exit_code_as_protocol_outcome_does():
    paragraph = next(line for line in readme().split("\n- ") if line.startswith("**Exit codes**"))
    for code in ExitCode:
        assert re.search(rf"\b{int(code)}\b", paragraph), f"exit code {int(code)} ({code.name}) is not explained"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_example_runs_as_written_and_its_stdout_fits_150_lines(tmp_path: Path):
    workdir = tmp_path / "tlx-first"
    script = example_block().replace(EXAMPLE_DIR, str(workdir))
    script = re.sub(r"(?m)(^|\s)tlx-agent\b", lambda m: m.group(1) + f"{shlex.quote(sys.executable)} -m orchestrator.cli",
                    script)
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "GIT_AUTHOR_NAME": "Kernel Engineer",
           "GIT_AUTHOR_EMAIL": "engineer@example.com", "GIT_COMMITTER_NAME": "Kernel Engineer",
           "GIT_COMMITTER_EMAIL": "engineer@example.com"}
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=PROJECT_ROOT, env=env, text=True,
                          capture_output=True, timeout=880, stdin=subprocess.DEVNULL)
    log = (workdir / "out.log").read_text() if (workdir / "out.log").exists() else done.stderr
    assert done.returncode == 0, log[-3000:]
    stdout = (workdir / "out.json").read_text()
    assert len(stdout.splitlines()) <= 150, len(stdout.splitlines())
    summary = RunSummary.model_validate_json(stdout)
    assert summary.exit_code == 0 and summary.success and summary.winner_experiment_id != "baseline"
    assert Path(summary.result_json).is_file() and summary.output_dir == str(workdir / "out")
    assert [case.case_id for case in summary.cases] == ["n2048", "ragged_1001"]
