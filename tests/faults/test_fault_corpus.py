"""The fault corpus: one faulty vector_add candidate per test, through the real CLI and real workers.

Each test runs `--provider replay` with exactly one candidate and checks what a user would see: the
candidate's evaluation ends in the expected status with a one-line reason (in result.json, the
experiment's result.json and the live log), the run still finishes with exit 2 (no winner), the frozen
bundle and every user file are byte-identical, and nothing the run started is still alive.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.faults.corpus import (
    CANDIDATE_ID,
    HANG_CANDIDATE_SECONDS,
    LOG_LIMIT_BYTES,
    FaultRun,
    leftovers_after,
    run_fault,
    sha256,
)

pytestmark = pytest.mark.slow

KILL_ALLOWANCE_SECONDS = 8.0  # SIGTERM grace + SIGKILL wait + sweep + a loaded 2-core machine


def assert_contained(run: FaultRun, status: str, *reason_parts: str, markers: tuple[str, ...] = ()) -> None:
    """The candidate ended as `status` for the stated reason, and the run and its files survived it."""
    assert run.cli.returncode == 2, run.cli.stderr[-4000:]
    assert run.result["winner_experiment_id"] == "baseline"
    assert run.result["stopping_reason"] == "provider_exhausted"  # the loop went on to ask for more
    assert run.status == status, f"{run.status}: {run.reason}"
    for part in reason_parts:
        assert part in run.reason, run.reason
    assert run.reason and "\n" not in run.reason
    persisted = run.persisted_evaluation()
    assert (persisted["status"], persisted["reason"]) == (status, run.reason)
    assert f"{CANDIDATE_ID} candidate evaluation={status} reason=" in run.live_log()
    assert run.frozen_bundle_changes() == []
    assert run.user.hashes() == run.user_hashes_before
    assert sha256(run.output_dir / "experiments" / "baseline" / "kernel.py") == sha256(run.user.kernel)
    assert leftovers_after(run, markers) == []


@dataclass(frozen=True)
class Fault:
    name: str
    status: str
    reason_parts: tuple[str, ...]
    extra_args: tuple[str, ...] = ()
    hangs: bool = False
    in_process: bool = False  # aimed at the orchestrator's protocol: needs the candidate in the worker process


FAULTS = [
    Fault("hang_at_import", "timeout", ("timed out in build",), hangs=True),
    Fault("hang_in_build", "timeout", ("timed out in build",), hangs=True),
    Fault("hang_in_verify", "timeout", ("timed out in verify (case n256)",), hangs=True),
    Fault("hang_in_benchmark", "timeout", ("timed out in benchmark (case n256)",), hangs=True),
    Fault("ignores_sigterm", "timeout", ("timed out in build",), hangs=True),
    Fault("segfault", "crashed", ("killed by SIGSEGV", "during verify")),
    Fault("abort", "crashed", ("killed by SIGABRT", "during build")),
    Fault("exit_zero_at_import", "crashed", ("exited with code 0", "during build")),
    Fault("sys_exit_in_verify", "incorrect", ("protected case n256 failed", "SystemExit(3)")),
    Fault("exception_at_import", "build_failed", ("build failed: RuntimeError: fault: exception at import",)),
    Fault("exception_in_build", "build_failed", ("build raised RuntimeError: fault: exception in build",)),
    Fault("exception_in_verify", "incorrect", ("verify raised RuntimeError: fault: exception in verify",)),
    Fault("out_of_resources_in_verify", "build_failed",
          ("verify (case n256): build failed: OutOfResources: out of resource: shared memory, Required: 294912, "
           "Hardware limit: 232448",)),
    Fault("exception_in_benchmark", "incorrect",
          ("benchmark (case n256) raised RuntimeError: fault: exception in benchmark",)),
    Fault("forged_reply_on_protocol_fd", "protocol_violation", ("during benchmark", "reply", "for command 2"), in_process=True),
    Fault("forged_last_reply_on_protocol_fd", "protocol_violation",
          ("during shutdown", "unexpected reply event while waiting for the finished event"), in_process=True),
    Fault("forged_replies_then_hang", "protocol_violation",
          ("during benchmark: unsolicited data before shutdown: a finished event",), in_process=True),
    Fault("nested_json_on_protocol_fd", "protocol_violation", ("during build: invalid JSON", "recursion"), in_process=True),
    Fault("garbage_on_protocol_fd", "protocol_violation", ("during build", "invalid JSON"), in_process=True),
    Fault("endless_line_on_protocol_fd", "protocol_violation", ("during build", "without a newline"), in_process=True),
    Fault("memory_hog", "resource_limit", ("verify (case n256): resource limit: memory (RLIMIT_DATA 1.00 GiB) exhausted: MemoryError",),
          extra_args=("--data-limit-gib", "1")),
    Fault("write_bundle_copy", "sandbox_violation", ("build: sandbox violation", "/out/bundle/harness.py")),
    Fault("write_output_dir", "sandbox_violation",
          ("verify (case n256): sandbox violation", "/out/experiments/baseline/kernel.py")),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_ends_in_its_status_and_the_run_survives(tmp_path, fault):
    seconds = HANG_CANDIDATE_SECONDS if fault.hangs else 30.0
    run = run_fault(tmp_path, fault.name, *fault.extra_args, candidate_seconds=seconds, in_process=fault.in_process)
    assert_contained(run, fault.status, *fault.reason_parts)
    if fault.hangs:
        assert run.candidate_evaluation()["worker"]["wall_seconds"] < seconds + KILL_ALLOWANCE_SECONDS


@pytest.mark.timeout(240)
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_forged_protocol_lines_on_output_streams_are_only_logged(tmp_path, stream):
    run = run_fault(tmp_path, f"forged_lines_{stream}")
    assert_contained(run, "incorrect", "protected case n256 failed", "elements outside")
    log = run.worker_log.read_text()
    assert '"command_id": 2, "value": {"passed": true' in log
    assert '{"kind": "finished"}' in log


@pytest.mark.timeout(240)
def test_gigabytes_on_stdout_cost_a_bounded_log(tmp_path):
    run = run_fault(tmp_path, "stdout_flood")
    assert_contained(run, "incorrect", "protected case n256 failed")
    assert run.worker_log.stat().st_size <= LOG_LIMIT_BYTES + 256
    assert "worker output truncated" in run.worker_log.read_text()[-256:]
    assert run.candidate_evaluation()["worker"]["log_bytes_dropped"] >= (2 << 30) - LOG_LIMIT_BYTES


@pytest.mark.timeout(240)
def test_write_to_the_users_kernel_is_blocked(tmp_path):
    run = run_fault(tmp_path, "write_user_kernel")
    user_kernel = os.path.realpath(tmp_path / "user" / "kernel.py")
    assert_contained(run, "sandbox_violation", "verify (case n256): sandbox violation", user_kernel)
    assert "tampered" not in Path(user_kernel).read_text()


@pytest.mark.timeout(240)
def test_deleting_its_own_cwd_stays_inside_the_sandbox(tmp_path):
    run = run_fault(tmp_path, "delete_cwd")
    assert_contained(run, "ok")
    assert run.cli.decisions()[CANDIDATE_ID] == "rejected"  # slower than the baseline: measured, not promoted
    experiment = run.output_dir / "experiments" / CANDIDATE_ID
    assert (experiment / "kernel.py").read_text() == (tmp_path / "replay" / "001.py").read_text()
    assert list((experiment / "workers" / "0-candidate").iterdir()) == []


@pytest.mark.timeout(240)
def test_setsid_double_fork_escapee_is_swept(tmp_path):
    marker = f"tlx-escapee-{uuid.uuid4().hex}"
    run = run_fault(tmp_path, "setsid_escapee", substitutions={"__MARKER__": marker})
    assert_contained(run, "incorrect", "protected case n256 failed", markers=(marker,))
    assert run.candidate_evaluation()["worker"]["leftover_processes_killed"] >= 1


@pytest.mark.timeout(240)
def test_escapee_that_keeps_forking_is_swept_with_all_its_children(tmp_path):
    run = run_fault(tmp_path, "forking_escapee")
    assert_contained(run, "incorrect", "protected case n256 failed")
    assert run.candidate_evaluation()["worker"]["leftover_processes_killed"] >= 2


@pytest.mark.timeout(240)
def test_fork_storm_children_holding_the_protocol_socket_are_killed(tmp_path):
    run = run_fault(tmp_path, "fork_storm")
    assert_contained(run, "incorrect", "protected case n256 failed")


@pytest.mark.timeout(240)
def test_network_connect_is_refused_and_reported(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        run = run_fault(tmp_path, "network_connect", substitutions={"__PORT__": str(port)})
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
    assert_contained(run, "sandbox_violation", f"network connection to 127.0.0.1:{port}")


@pytest.mark.timeout(240)
def test_triton_cache_poisoning_outside_its_own_cache_is_blocked(tmp_path):
    marker = f"tlx-poison-{uuid.uuid4().hex}"
    targets = [Path(pwd.getpwuid(os.getuid()).pw_dir) / ".triton" / "cache" / marker,
               Path("/tmp/triton_cache_poison") / marker]
    # os.makedirs creates missing parents first, so the first write the candidate attempts (and the one the
    # reason names) is the first missing directory on the way: ~/.triton on a fresh machine, the marker
    # directory itself where ~/.triton/cache already exists.
    first_attempt = first_missing_directory(targets[0])
    try:
        run = run_fault(tmp_path, "triton_cache_poison", substitutions={"__MARKER__": marker})
        assert [t for t in targets if t.exists()] == []
    finally:
        for target in targets:
            shutil.rmtree(target, ignore_errors=True)
    assert_contained(run, "sandbox_violation", "verify (case n256): sandbox violation",
                     f"mkdir {first_attempt}")


def first_missing_directory(path: Path) -> Path:
    """The outermost directory on the way to `path` that does not exist yet (`path` itself if only it is missing)."""
    missing = path
    for parent in path.parents:
        if parent.exists():
            return missing
        missing = parent
    return missing


@pytest.mark.timeout(240)
def test_modified_bundle_copy_stops_the_run_naming_the_file(tmp_path):
    """With the sandbox off the write succeeds; the re-hash after the evaluation must catch it."""
    run = run_fault(tmp_path, "tamper_bundle_isolation_off", "--isolation", "off")
    assert run.cli.returncode == 1, run.cli.stderr[-4000:]
    error = run.result["error"]
    assert f"{run.output_dir.resolve()}/bundle/harness.py changed during the run" in error
    assert run.result["stopping_reason"] == "bundle_tampered"
    assert run.frozen_bundle_changes() == ["harness.py"]
    assert run.user.hashes() == run.user_hashes_before  # the user's own harness is untouched
    assert leftovers_after(run) == []


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("name", "where"), [
    ("forged_reply_on_protocol_fd", "verify (case n256)"),
    ("garbage_on_protocol_fd", "build"),
    ("nested_json_on_protocol_fd", "build"),
    ("endless_line_on_protocol_fd", "build"),
])
def test_protocol_faults_in_judged_mode_only_reach_the_judge(tmp_path, name, where):
    """With the judge, the only socket the candidate holds is its channel to the judge: whatever it writes
    there is a broken call protocol, reported as a cheat; the orchestrator's protocol is out of its reach."""
    run = run_fault(tmp_path, name)
    assert_contained(run, "cheat_detected", f"{where}: cheat detected by the candidate process's channel")
