"""The `processes` layer (sandbox_worker/isolation/pidns.py) in real child processes.

Each child is started the way the orchestrator starts a worker (its own session), applies the layers, reports
one JSON line and then runs a snippet. It is the relay; the code after `apply_isolation` runs in the worker,
pid 2 of the new PID namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from orchestrator.worker.environment import build_worker_environment
from orchestrator.worker.process import parse_event
from orchestrator.worker.process_tree import pid_namespace
from protocol.worker import (
    BuildCommand,
    FinishedEvent,
    HelloEvent,
    IsolationConfig,
    ReadyEvent,
    ReplyEvent,
    SetupCommand,
    ShutdownCommand,
)
from tests.forkserver.workers import PASSING_HARNESS_FUNCTIONS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRELUDE = textwrap.dedent("""
    import errno, json, os, signal, subprocess, sys, time
    from sandbox_worker.isolation import layers
    config, args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    def attempt(call):
        try:
            call()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        return "ok"
    def report(**values):
        sys.stdout.write(json.dumps(values) + "\\n")
        sys.stdout.flush()
    outside = os.getppid()
    applied = layers.apply_isolation(config)
    namespace = applied.pid_namespace
    report(statuses=applied.statuses, pid=os.getpid(), ppid=os.getppid(), outside=outside,
           namespace=[namespace.inode, namespace.init_pid] if namespace else None,
           own_namespace=os.stat("/proc/self/ns/pid").st_ino,
           proc=sorted(int(name) for name in os.listdir("/proc") if name.isdigit()))
""")
SPINNER = "while True: pass"
HARNESS = PASSING_HARNESS_FUNCTIONS


def start(tmp_path: Path, snippet: str, args: dict[str, Any] | None = None,
          parent: str | None = None) -> subprocess.Popen[str]:
    """The child, in its own session; with `parent`, started by that Python snippet instead of by pytest."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    config = {"mode": "standard", "scratch_dir": str(scratch), "writable_dirs": [], "network": False}
    argv = [sys.executable, "-c", PRELUDE + textwrap.dedent(snippet), json.dumps(config), json.dumps(args or {})]
    if parent is not None:
        argv = [sys.executable, "-c", textwrap.dedent(parent), *argv]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=scratch,
                            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "TLX_WORKER_SCRATCH": str(scratch)},
                            start_new_session=parent is None)


def first_report(child: subprocess.Popen[str]) -> dict[str, Any]:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"no report; exit status {child.wait(timeout=30)}"
    report = json.loads(line)
    status = report["statuses"]["processes"]
    if status.startswith("unavailable:"):
        child.kill()
        child.wait()
        pytest.skip(f"no PID namespace on this machine: {status}")
    assert status == "active", report
    return report


def next_report(child: subprocess.Popen[str]) -> dict[str, Any]:
    assert child.stdout is not None
    return json.loads(child.stdout.readline())


def read_event(reader: Any, expected: type) -> Any:
    line = reader.readline()
    assert line, "the worker closed the protocol socket"
    event = parse_event(line.rstrip(b"\n"))
    assert isinstance(event, expected), event
    return event


def marked(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if marker in (proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def wait_until(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


ESCAPE = textwrap.dedent("""
    ready_r, ready_w = os.pipe()
    os.set_inheritable(ready_w, True)
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve(sys.executable, [sys.executable, "-c", f"import os; os.write({ready_w}, b'x')\\n{args['spinner']}",
                                       args["marker"]], {})
        os._exit(0)
    os.waitpid(child, 0)
    os.close(ready_w)
    report(spinner_started=os.read(ready_r, 1) == b"x")
""")


@pytest.mark.timeout(60)
def test_the_worker_is_pid_2_of_a_namespace_whose_pid_1_the_orchestrator_can_see(tmp_path: Path) -> None:
    child = start(tmp_path, "sys.stdin.readline()")
    report = first_report(child)
    inode, init_pid = report["namespace"]
    assert (report["pid"], report["ppid"], report["proc"]) == (2, 1, [1, 2])  # /proc is the namespace's own
    assert inode == report["own_namespace"] != pid_namespace("self")
    assert pid_namespace(init_pid) == inode  # the host pid it reports is its pid 1, in that namespace
    keeper = psutil.Process(init_pid).ppid()
    assert psutil.Process(keeper).ppid() == child.pid  # relay -> keeper -> pid 1 -> worker
    assert pid_namespace(keeper) == pid_namespace(child.pid) == pid_namespace("self")
    assert {os.getpgid(pid) for pid in (child.pid, keeper, init_pid)} == {child.pid}  # one group to end
    child.communicate("go\n", timeout=30)
    assert child.returncode == 0
    assert wait_until(lambda: not psutil.pid_exists(keeper) and not psutil.pid_exists(init_pid))


@pytest.mark.timeout(60)
def test_renice_pin_and_kill_toward_the_orchestrator_and_another_worker_fail_and_change_nothing(
        tmp_path: Path) -> None:
    """The orchestrator here is a real parent process that started the worker; another worker, a sleeper."""
    another = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.DEVNULL)
    orchestrator = None
    try:
        snippet = """
            one_cpu = {min(os.sched_getaffinity(0))}
            attempts = {}
            for name, pid in (("orchestrator", outside), ("another worker", args["another"])):
                attempts[name] = {
                    "setpriority": attempt(lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
                    "sched_setaffinity": attempt(lambda: os.sched_setaffinity(pid, one_cpu)),
                    "kill": attempt(lambda: os.kill(pid, signal.SIGKILL)),
                    "listed": os.path.exists(f"/proc/{pid}"),
                }
            report(attempts=attempts)
            sys.stdin.readline()
        """
        parent = """
            import subprocess, sys
            sys.exit(subprocess.run(sys.argv[1:], start_new_session=True).returncode)
        """
        child = start(tmp_path, snippet, {"another": another.pid}, parent=parent)
        orchestrator = psutil.Process(child.pid)
        targets = {"orchestrator": orchestrator, "another worker": psutil.Process(another.pid)}
        before = {name: (proc.nice(), proc.cpu_affinity()) for name, proc in targets.items()}
        report = first_report(child)
        assert report["outside"] == orchestrator.pid
        attempts = next_report(child)["attempts"]
        after = {name: (proc.nice(), proc.cpu_affinity()) for name, proc in targets.items()}
        assert all(proc.is_running() for proc in targets.values())
        assert after == before
        for name in targets:
            assert attempts[name] == {"setpriority": "ESRCH", "sched_setaffinity": "ESRCH", "kill": "ESRCH",
                                      "listed": False}, (name, attempts)
        child.communicate("go\n", timeout=30)
        assert child.returncode == 0
    finally:
        another.kill()
        another.wait()
        if orchestrator is not None and orchestrator.is_running():
            orchestrator.kill()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("snippet", "returncode"), [
    ("sys.exit(7)", 7),
    ("os.abort()", -signal.SIGABRT),
    ("os.kill(os.getpid(), signal.SIGSEGV)", -signal.SIGSEGV),
    ("import ctypes; ctypes.string_at(0)", -signal.SIGSEGV),
    ("os.kill(os.getpid(), signal.SIGXCPU)", -signal.SIGXCPU),
], ids=["exit-7", "abort", "kill-self-segv", "null-dereference", "sigxcpu"])
def test_the_relay_ends_as_the_worker_did(tmp_path: Path, snippet: str, returncode: int) -> None:
    """Exit code or death by the same signal, so the orchestrator's crash report reads as before."""
    child = start(tmp_path, snippet)
    assert first_report(child)["pid"] == 2
    child.communicate(timeout=30)
    assert child.returncode == returncode


@pytest.mark.timeout(60)
def test_sigterm_to_the_relay_reaches_the_worker(tmp_path: Path) -> None:
    child = start(tmp_path, """
        signal.signal(signal.SIGTERM, lambda *_: os._exit(3))
        report(handler="installed")
        time.sleep(30)
    """)
    first_report(child)
    assert next_report(child) == {"handler": "installed"}
    os.kill(child.pid, signal.SIGTERM)  # the relay alone, not its group
    child.communicate(timeout=30)
    assert child.returncode == 3


@pytest.mark.timeout(60)
def test_pid_1_reaps_orphans_and_leaves_the_workers_children_to_it(tmp_path: Path) -> None:
    child = start(tmp_path, """
        for _ in range(20):
            middle = os.fork()
            if middle == 0:
                if os.fork() == 0:
                    time.sleep(0.05)
                    os._exit(0)
                os._exit(0)
            os.waitpid(middle, 0)
        statuses = [subprocess.run(["/bin/sh", "-c", "exit 5"]).returncode,
                    subprocess.run(["/bin/sh", "-c", "sleep 0.1 & exit 4"]).returncode]
        time.sleep(0.5)
        zombies = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                with open(f"/proc/{name}/stat") as stat:
                    if stat.read().rpartition(")")[2].split()[0] == "Z":
                        zombies.append(int(name))
        report(statuses=statuses, zombies=zombies, proc=sorted(int(n) for n in os.listdir("/proc") if n.isdigit()))
    """)
    first_report(child)
    assert next_report(child) == {"statuses": [5, 4], "zombies": [], "proc": [1, 2]}
    child.communicate(timeout=30)
    assert child.returncode == 0


def escape(tmp_path: Path, marker: str, then: str = "") -> tuple[subprocess.Popen[str], dict[str, Any]]:
    child = start(tmp_path, ESCAPE + then, {"spinner": SPINNER, "marker": marker})
    report = first_report(child)
    assert next_report(child) == {"spinner_started": True}
    return child, report


@pytest.mark.timeout(60)
def test_an_escapee_outlives_the_worker_only_until_its_process_group_is_ended(tmp_path: Path) -> None:
    marker = f"tlx-escapee-{uuid.uuid4().hex}"
    child, report = escape(tmp_path, marker)
    try:
        assert child.wait(timeout=30) == 0  # the relay ends with the worker, the spinner still in the namespace
        (spinner,) = marked(marker)
        assert pid_namespace(spinner) == report["namespace"][0]
        assert os.getpgid(spinner) != child.pid  # setsid: the worker's process group no longer holds it
        os.killpg(child.pid, signal.SIGTERM)  # what the orchestrator's cleanup sends; pid 1 ends the namespace
        assert wait_until(lambda: not marked(marker)), marked(marker)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)


@pytest.mark.timeout(60)
def test_the_namespace_ends_when_its_keeper_is_killed(tmp_path: Path) -> None:
    """pid 1 has PR_SET_PDEATHSIG=SIGKILL toward the keeper; the worker and the escapee die with pid 1."""
    marker = f"tlx-escapee-{uuid.uuid4().hex}"
    child, report = escape(tmp_path, marker, then="time.sleep(60)\n")
    keeper = psutil.Process(report["namespace"][1]).ppid()
    os.kill(keeper, signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL  # the worker went down with its namespace
    assert wait_until(lambda: not marked(marker)), marked(marker)


@pytest.mark.timeout(60)
def test_everything_ends_when_the_process_that_started_the_worker_dies(tmp_path: Path) -> None:
    """An orchestrator killed outright (no cleanup) takes the worker and its escapees with it."""
    marker = f"tlx-escapee-{uuid.uuid4().hex}"
    parent = """
        import subprocess, sys
        subprocess.Popen(sys.argv[1:], start_new_session=True)
        sys.stdin.readline()
    """
    child = start(tmp_path, ESCAPE + "time.sleep(60)\n", {"spinner": SPINNER, "marker": marker}, parent=parent)
    first_report(child)
    assert next_report(child) == {"spinner_started": True}
    (spinner,) = marked(marker)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert wait_until(lambda: not psutil.pid_exists(spinner) or psutil.Process(spinner).status() == "zombie")
    assert wait_until(lambda: not [p for p in psutil.process_iter(["cwd"]) if p.info["cwd"] == str(tmp_path / "scratch")])


@pytest.mark.timeout(60)
def test_ready_reports_the_namespace_a_real_worker_runs_in(tmp_path: Path) -> None:
    scratch, harness, kernel = tmp_path / "scratch", tmp_path / "harness.py", tmp_path / "kernel.py"
    harness.write_text(HARNESS)
    kernel.write_text("LATENCY_US = 1.0\n")
    scratch.mkdir()
    env, _refused = build_worker_environment(os.environ, {}, scratch=scratch, token="t", pythonpath=str(PROJECT_ROOT))
    parent, child = socket.socketpair()
    with parent, parent.makefile("rb") as reader:
        worker = subprocess.Popen([sys.executable, "-m", "sandbox_worker"], env={**env, "TLX_PROTOCOL_FD": str(child.fileno())},
                                  cwd=scratch, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        child.close()
        try:
            parent.settimeout(30)
            assert read_event(reader, HelloEvent).pid == worker.pid
            setup = SetupCommand(run_id="r", experiment_id="e", harness_path=str(harness), kernel_path=str(kernel),
                                 target={}, isolation=IsolationConfig(scratch_dir=str(scratch)))
            parent.sendall(setup.model_dump_json().encode() + b"\n")
            ready = read_event(reader, ReadyEvent)
            if ready.isolation["processes"] != "active":
                pytest.skip(f"no PID namespace on this machine: {ready.isolation['processes']}")
            assert ready.pid_namespace is not None
            assert pid_namespace(ready.pid_namespace.init_pid) == ready.pid_namespace.inode != pid_namespace("self")
            for command in (BuildCommand(command_id=1), ShutdownCommand()):
                parent.sendall(command.model_dump_json().encode() + b"\n")
            read_event(reader, ReplyEvent)
            read_event(reader, FinishedEvent)
            assert worker.wait(timeout=30) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
