"""A dry run of the skill on CPU: every `tlx-agent` command its documents show, run as written against the
CPU example bundle (examples/vector_add) copied into a temporary workspace, exits with the code the
document says; the completion step (`tlx-agent report OUT --format text`) then prints every field.

The commands run through bash, exactly as shown, with the skill's variables pointing into the workspace.
Only what a CPU run needs differs (`CPU_VALUES`): the replay provider with the example's candidates instead
of codex, one round, shorter deadlines; the CV limits are the CPU interpreter's stated defaults, as in
`scripts/demo.sh` and tests/validate/test_examples.py. A run in the background is run in the
foreground (its exit code is also the `exit_code` of the stdout document the skill tells the agent to read).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli.report_text import TEXT_LABELS
from protocol.bundle import INTERPRETER_BUDGET
from tests.conftest import PROJECT_ROOT, VECTOR_ADD
from tests.skill import DOCUMENTS, INPUT_CONTRACT, SKILL_MD, Command, commands

TLX_AGENT = f"{shlex.quote(sys.executable)} -m orchestrator.cli"
# subcommand -> (flag, CPU value) set on the command line (replaced when shown, added when not)
CPU_VALUES = {
    "init-bundle": [("--backend", "cpu")],
    "optimize": [("--provider", f"replay --replay-dir {shlex.quote(str(VECTOR_ADD / 'candidates'))}"),
                 ("--max-rounds", "1"), ("--max-candidate-seconds", "120"),
                 ("--max-total-seconds", "900")],
}


def cpu_command(command: Command) -> str:
    """The command as bash runs it here: the local CLI, the CPU values, in the foreground."""
    text = re.sub(r"^(nohup\s+)?tlx-agent\b", TLX_AGENT, command.text)
    text = re.sub(r"\s*&\s*$", "", text)
    for flag, value in CPU_VALUES.get(command.subcommand, []):
        shown = re.compile(rf"{flag} \S+")
        text = shown.sub(f"{flag} {value}", text, count=1) if shown.search(text) else \
            re.sub(r"^(\S+ -m orchestrator\.cli \S+)", rf"\1 {flag} {value}", text)
    return text


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def workspace(root: Path) -> dict[str, str]:
    """The skill's variables: a git checkout holding the example kernel, a bundle beside it, a run folder."""
    repo = root / "checkout"
    repo.mkdir()
    shutil.copyfile(VECTOR_ADD / "kernel.py", repo / "kernel.py")
    _git(repo, "init", "-q")
    _git(repo, "config", "user.name", "Kernel Engineer")
    _git(repo, "config", "user.email", "engineer@example.com")
    _git(repo, "add", "kernel.py")
    _git(repo, "commit", "-q", "-m", "baseline")
    bundle = root / "bundle"
    bundle.mkdir()
    for name in ("harness.py", "cases.json", "target.json"):
        shutil.copyfile(VECTOR_ADD / name, bundle / name)
    run = root / "run"
    run.mkdir()
    return {"REPO": str(repo), "KERNEL": str(repo / "kernel.py"), "BUNDLE": str(bundle), "ARCH": "cpu",
            "ENTRY": "vector_add", "RUN": str(run), "OUT": str(run / "out")}


def run_shown(command: Command, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **variables}
    return subprocess.run(["bash", "-c", cpu_command(command)], env=env, cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)


def stdout_file(command: Command, variables: dict[str, str]) -> Path | None:
    """Where the command sends stdout (`>FILE`), with the variables filled in."""
    target = next((word[1:] for word in shlex.split(command.text) if word.startswith(">")), None)
    return Path(re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], target)) if target else None


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_skills_commands_run_on_cpu_and_end_as_documented(tmp_path: Path):
    variables = workspace(tmp_path)
    # The input contract comes first: optimize in SKILL.md reads the lock its validate writes.
    shown = commands(INPUT_CONTRACT) + commands(SKILL_MD)
    assert {(c.document, c.line) for c in shown} == {(c.document, c.line) for d in DOCUMENTS for c in commands(d)}
    report_run = None
    for command in shown:
        # init-bundle writes a starter into a bundle folder that does not exist yet; the other commands use the
        # finished example bundle.
        own = {**variables, "BUNDLE": str(tmp_path / "starter")} if command.subcommand == "init-bundle" else variables
        completed = run_shown(command, own)
        where = f"{command.document.name}:{command.line} {command.subcommand}"
        assert completed.returncode == command.expected_exit, f"{where}: {completed.stderr[-3000:]}"
        saved = stdout_file(command, own)
        document = json.loads(saved.read_text()) if saved is not None else json.loads(completed.stdout)
        if command.subcommand == "report":  # its exit_code field is the reported run's, checked below
            report_run = (completed, document)
        else:
            assert document.get("exit_code", command.expected_exit) == command.expected_exit, where
    assert (tmp_path / "starter" / "harness.py").is_file()
    assert json.loads((Path(variables["RUN"]) / "validate.json").read_text())["passed"] is True

    # Layer 7: the completion report of the finished run names every field.
    assert report_run is not None
    completed, report = report_run
    out = Path(variables["OUT"])
    result = json.loads((out / "result.json").read_text())
    head = _git(Path(variables["REPO"]), "rev-parse", "HEAD")
    text = completed.stderr
    labels = [line.split(":", 1)[0] for line in text.splitlines()[1:] if not line.startswith("  ")]
    assert labels == list(TEXT_LABELS), text
    assert "outcome: finished, exit 0: a winner was promoted and survived revalidation" in text
    assert f"output directory: {out}\n" in text and f"kernel: {variables['KERNEL']}\n" in text
    assert f"harness={variables['BUNDLE']}/harness.py" in text
    assert "device: cpu (backend cpu, architecture interpreter)" in text
    for case in result["report"]["workload"]:
        row = next(line.split() for line in text.splitlines() if line.startswith(f"  {case['case_id']} "))
        # the parameters column is one word per parameter (n=4096 budget_seconds=0.5); eight columns follow it
        assert sorted(row[1:-8]) == sorted(f"{key}={json.dumps(value)}" for key, value in case["parameters"].items())
        assert row[-8:] == [f"{case['weight']:g}", "yes", f"{case['baseline_median_us']:.3f}",
                            f"{case['final_median_us']:.3f}", f"{case['speedup']:.4f}x",
                            f"{case['baseline_cv']:.4f}", f"{case['final_cv']:.4f}", "yes"]
    assert f"aggregate speedup: {result['report']['aggregate_speedup']:.4f}x" in text
    # the skill's optimize passes no --max-cv, so the run states the interpreter's own default
    assert "CV: worst final " in text and f"(max_cv {INTERPRETER_BUDGET['max_cv']:g})" in text
    assert "correctness: every protected case correct" in text
    assert f"stopping reason: {result['stopping_reason']}" in text
    assert f"commit: committed {head} (git)" in text and f"repository={variables['REPO']}" in text
    assert (report["exit_code"], report["output_dir"], report["device"]) == (0, str(out), "cpu")
    assert report["commit"] == f"committed {head} (git)"
    assert _git(Path(variables["REPO"]), "show", "HEAD:kernel.py") == (out / "best_kernel.py").read_text().strip()
