"""`python -m sandbox_worker.isolation.probe`: apply the isolation layers, then try to break each one.

`tlx-agent doctor` starts this in a child process, exactly as a worker would be started, because a
layer that *loads* is not yet a layer that *works*: the probe connects to a listener the parent opened in
its own network namespace, signals, renices and pins its parent (to the values it already has), writes
outside and inside the allowed directories, reads the limits back, maps memory above the DATA cap, and
calls syscalls the seccomp filter should refuse. A layer whose
confinement check fails becomes `unavailable:verification failed: ...`; one that confines but breaks
something a kernel needs (writing scratch, threads, subprocesses) becomes `degraded:...`.

Prints one JSON object on stdout: {"applied", "layers", "checks", "landlock_abi"}.
"""

from __future__ import annotations

import argparse
import errno
import json
import mmap
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox_worker.isolation import landlock, netns, pidns, rlimits, seccomp, syscalls
from sandbox_worker.isolation import layers as isolation

DENIED = (errno.EACCES, errno.EPERM)
PTRACE_PEEKDATA = 2
CLONE_FS = 0x00000200
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # same value on x86_64 and aarch64; 3.11 lacks it


class ProbeFailure(Exception):
    """A check that shows the layer does not confine what it claims to."""


class ProbeBreakage(Exception):
    """A check that shows the layer confines, but breaks something a kernel worker needs."""


def _errno_of(call: Callable[[], object]) -> int:
    """0 when `call` succeeds, else the errno it failed with."""
    try:
        call()
    except OSError as exc:
        return exc.errno or -1
    return 0


def _write(path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("probe\n")


def check_rlimits(config: dict[str, Any], as_before: tuple[int, int]) -> list[str]:
    notes: list[str] = []
    if resource.getrlimit(resource.RLIMIT_CORE) != (0, 0):
        raise ProbeFailure(f"RLIMIT_CORE reads back {resource.getrlimit(resource.RLIMIT_CORE)}")
    if resource.getrlimit(resource.RLIMIT_AS) != as_before:
        raise ProbeFailure(f"RLIMIT_AS changed to {resource.getrlimit(resource.RLIMIT_AS)} (must never be set)")
    expected = {
        "NOFILE": (resource.RLIMIT_NOFILE, config.get("open_files")),
        "FSIZE": (resource.RLIMIT_FSIZE, config.get("file_size_bytes")),
        "CPU": (resource.RLIMIT_CPU, config.get("cpu_seconds")),
        "DATA": (resource.RLIMIT_DATA, rlimits.data_limit_bytes(config)),
    }
    for name, (kind, value) in expected.items():
        soft = resource.getrlimit(kind)[0]
        if value and soft != value:
            raise ProbeFailure(f"RLIMIT_{name} reads back {soft}, configured {value}")
        notes.append(f"RLIMIT_{name}={soft}")
    data = rlimits.data_limit_bytes(config)
    if data:
        size = data + (16 << 20)
        try:
            mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | MAP_NORESERVE)
        except OSError as exc:
            notes.append(f"private mapping above DATA refused ({errno.errorcode.get(exc.errno, exc.errno)})")
        else:
            mapping.close()
            raise ProbeFailure(f"a {size}-byte private writable mapping succeeded above RLIMIT_DATA")
    return notes


def check_network(port: int | None) -> list[str]:
    notes = [f"network namespace inode {os.stat('/proc/self/ns/net').st_ino}"]
    if port is not None:
        if netns.can_connect(port):
            raise ProbeFailure(f"connected to the parent's listener on 127.0.0.1:{port}")
        notes.append(f"connect to parent's 127.0.0.1:{port} failed")
    return notes


@dataclass(frozen=True)
class Outsider:
    """A process outside the worker (the probe's parent) and its priority and CPUs, read before the layers."""

    pid: int
    nice: int
    cpus: frozenset[int]

    @classmethod
    def parent(cls) -> Outsider:
        pid = os.getppid()
        try:
            return cls(pid, os.getpriority(os.PRIO_PROCESS, pid), frozenset(os.sched_getaffinity(pid)))
        except OSError:  # never expected for our own parent; kill(pid, 0) is still checked first
            return cls(pid, 0, frozenset(os.sched_getaffinity(0)))


def _zombies() -> list[str]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat_file:
                    if stat_file.read().rpartition(")")[2].split()[0] == "Z":
                        found.append(name)
            except (OSError, IndexError):
                continue
    return found


def check_processes(outsider: Outsider, namespace: pidns.PidNamespace | None) -> list[str]:
    """The parent cannot be signalled, reniced or pinned (its own values, so nothing changes if it can);
    /proc lists this namespace only; orphans are reaped and a subprocess's exit status still arrives."""
    pid = outsider.pid
    listed = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    if namespace is not None and pid in listed:
        return [f"the parent's pid {pid} also numbers a process in this namespace: reach not checked"]
    attempts: dict[str, Callable[[], object]] = {
        "kill(parent, 0)": lambda: os.kill(pid, 0),
        "setpriority(parent)": lambda: os.setpriority(os.PRIO_PROCESS, pid, outsider.nice),
        "sched_setaffinity(parent)": lambda: os.sched_setaffinity(pid, outsider.cpus),
    }
    for what, call in attempts.items():
        code = _errno_of(call)
        if code != errno.ESRCH:
            raise ProbeFailure(f"{what} on pid {pid} gave {errno.errorcode.get(code, code) if code else 'success'}, "
                               "expected ESRCH")
    if namespace is None:
        raise ProbeFailure("no PID namespace, yet the parent was out of reach")
    notes = [f"pid {os.getpid()} in PID namespace {namespace.inode}, whose pid 1 is pid {namespace.init_pid} outside",
             f"{', '.join(attempts)} on pid {pid}: ESRCH", f"/proc lists {len(listed)} processes: {listed}"]
    orphan_parent = os.fork()
    if orphan_parent == 0:
        if os.fork() == 0:
            os._exit(0)  # an orphan once its parent is gone: pid 1 must reap it
        os._exit(0)
    os.waitpid(orphan_parent, 0)
    completed = subprocess.run(["/bin/sh", "-c", "exit 7"], check=False, stdin=subprocess.DEVNULL)
    if completed.returncode != 7:
        raise ProbeBreakage(f"a subprocess's exit status 7 arrived as {completed.returncode}")
    deadline = time.monotonic() + 2.0
    while _zombies() and time.monotonic() < deadline:
        time.sleep(0.02)
    if _zombies():
        raise ProbeBreakage(f"zombies {_zombies()} are not reaped by pid 1")
    notes.append("orphans are reaped; a subprocess's exit status arrives")
    return notes


def check_filesystem(config: dict[str, Any], outside: str | None) -> list[str]:
    notes: list[str] = []
    if outside:
        target = os.path.join(outside, f"probe-{os.getpid()}.txt")
        code = _errno_of(lambda: _write(target))
        if code == 0:
            os.unlink(target)
            raise ProbeFailure(f"created {target} outside the writable dirs")
        if code not in DENIED:
            raise ProbeFailure(f"creating {target} failed with {errno.errorcode.get(code, code)}, not EACCES")
        notes.append(f"create outside: {errno.errorcode.get(code, code)}")
        existing = os.path.join(outside, "existing.txt")
        if os.path.exists(existing):
            code = _errno_of(lambda: open(existing, "a").close())  # noqa: SIM115 - only the open is tested
            if code not in DENIED:
                raise ProbeFailure(f"opening {existing} for writing gave {errno.errorcode.get(code, code)}")
            code = _errno_of(lambda: os.unlink(existing))
            if code not in DENIED:
                raise ProbeFailure(f"unlinking {existing} gave {errno.errorcode.get(code, code)}")
            notes.append("append/unlink of an existing file outside: denied")
    dirs = isolation.writable_dirs(config)
    for directory in dirs:
        inside = os.path.join(directory, f"probe-{os.getpid()}.txt")
        code = _errno_of(lambda path=inside: _write(path))
        if code:
            raise ProbeBreakage(f"writing {inside} failed with {errno.errorcode.get(code, code)}")
    if len(dirs) > 1:
        source = os.path.join(dirs[0], f"probe-{os.getpid()}.txt")
        destination = os.path.join(dirs[1], f"probe-moved-{os.getpid()}.txt")
        code = _errno_of(lambda: os.replace(source, destination))
        if code:
            raise ProbeBreakage(f"renaming across writable dirs failed with {errno.errorcode.get(code, code)}")
        notes.append("rename across writable dirs works (Triton cache)")
    code = _errno_of(lambda: _write("/dev/null"))
    if code:
        raise ProbeBreakage(f"writing /dev/null failed with {errno.errorcode.get(code, code)}")
    notes.append(f"writes inside {len(dirs)} dirs and /dev/null work")
    notes += check_cuda_thread_naming()
    return notes


def check_cuda_thread_naming() -> list[str]:
    """CUDA fails to initialize unless a process can fopen its /proc/self/task/<tid>/comm for writing."""
    own = f"/proc/self/task/{threading.get_native_id()}/comm"
    code = _errno_of(lambda: _write(own))
    if code:
        raise ProbeBreakage(f"writing {own} failed with {errno.errorcode.get(code, code)}: CUDA cannot initialize")
    child = subprocess.run(
        [sys.executable, "-c", "open('/proc/self/comm', 'w').write('probe-child')"],
        check=False, stdin=subprocess.DEVNULL, capture_output=True,
    )
    if child.returncode == 0:
        return ["CUDA thread naming (/proc/self/task/*/comm) works here and in child processes"]
    return ["CUDA thread naming works in this process only: child processes (an ncu-profiled target) "
            "cannot initialize CUDA; run workers as a non-root uid to allow it"]


def _syscall_errno(name: str, *args: int) -> int:
    return _errno_of(lambda: syscalls.raw_syscall(name, *args))


def check_seccomp() -> list[str]:
    expectations = {
        "ptrace(PEEKDATA, 0)": (_syscall_errno("ptrace", PTRACE_PEEKDATA, 0, 0, 0), errno.EPERM),
        "unshare(0)": (_syscall_errno("unshare", 0), errno.EPERM),
        "clone(CLONE_NEWUSER|CLONE_FS)": (
            _syscall_errno("clone", netns.CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0), errno.EPERM),
        "clone3(NULL, 0)": (_syscall_errno("clone3", 0, 0), errno.ENOSYS),
    }
    for what, (got, wanted) in expectations.items():
        if got != wanted:
            raise ProbeFailure(f"{what} gave {errno.errorcode.get(got, got)}, expected {errno.errorcode[wanted]}")
    notes = [f"{what}: {errno.errorcode[wanted]}" for what, (_, wanted) in expectations.items()]
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    completed = subprocess.run(["/bin/sh", "-c", "exit 7"], check=False, stdin=subprocess.DEVNULL)
    if completed.returncode != 7:
        raise ProbeBreakage(f"a subprocess under the filter exited {completed.returncode}")
    notes.append("threads and subprocesses still start")
    return notes


def check_inet_fallback() -> list[str]:
    import socket

    code = _errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    if code != errno.EPERM:
        raise ProbeFailure(f"socket(AF_INET) gave {errno.errorcode.get(code, code)}, expected EPERM")
    return ["socket(AF_INET): EPERM"]


def _describe_fd(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def _verify(status: str, check: Callable[[], list[str]]) -> tuple[str, list[str]]:
    try:
        notes = check()
    except ProbeFailure as exc:
        verdict = f"unavailable:verification failed: {exc}"
        return (verdict if not status.startswith("unavailable:") else status), [f"FAILED: {exc}"]
    except ProbeBreakage as exc:
        verdict = f"degraded:{exc}"
        return (verdict if status == "active" else status), [f"BROKEN: {exc}"]
    except Exception as exc:  # noqa: BLE001 - a probe bug must not hide the other layers
        note = f"probe error: {type(exc).__name__}: {exc}"
        return (f"degraded:unverified ({note})" if status == "active" else status), [note]
    return status, notes


def run(config: dict[str, Any], port: int | None, outside: str | None) -> dict[str, Any]:
    as_before = resource.getrlimit(resource.RLIMIT_AS)
    try:
        abi: int | None = landlock.abi_version()
    except OSError:
        abi = None
    outsider = Outsider.parent()
    isolation_applied = isolation.apply_isolation(config)
    applied = isolation_applied.statuses
    layers = dict(applied)
    checks: dict[str, list[str]] = {"stdin": [f"fd 0 is {_describe_fd(0)}"]}
    network_check: Callable[[], list[str]] = lambda: check_network(port)  # noqa: E731
    if applied["network"].startswith("degraded:seccomp"):
        network_check = lambda: check_network(port) + check_inet_fallback()  # noqa: E731
    plan: dict[str, Callable[[], list[str]]] = {
        "rlimits": lambda: check_rlimits(config, as_before),
        "network": network_check,
        "processes": lambda: check_processes(outsider, isolation_applied.pid_namespace),
        "filesystem": lambda: check_filesystem(config, outside),
        "seccomp": check_seccomp,
    }
    for name, check in plan.items():
        layers[name], checks[name] = _verify(applied[name], check)
    checks["seccomp"].append(f"/proc/self/status Seccomp: {seccomp.filter_mode()}")
    return {"applied": applied, "layers": layers, "checks": checks, "landlock_abi": abi}


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sandbox_worker.isolation.probe")
    parser.add_argument("--mode", choices=("strict", "standard", "off"), default="standard")
    parser.add_argument("--scratch", required=True, help="the worker scratch dir (writable)")
    parser.add_argument("--writable", action="append", default=[], help="another writable dir")
    parser.add_argument("--outside", help="an existing dir outside scratch that must stay read-only")
    parser.add_argument("--port", type=int, help="a TCP port listening on 127.0.0.1 in the parent's namespace")
    parser.add_argument("--data-limit", type=int, default=None)
    parser.add_argument("--cpu-seconds", type=int, default=120)
    parser.add_argument("--file-size", type=int, default=1 << 30)
    parser.add_argument("--open-files", type=int, default=4096)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    config = {
        "mode": arguments.mode,
        "scratch_dir": arguments.scratch,
        "writable_dirs": arguments.writable,
        "data_limit_bytes": arguments.data_limit,
        "cpu_seconds": arguments.cpu_seconds,
        "file_size_bytes": arguments.file_size,
        "open_files": arguments.open_files,
        "network": False,
    }
    report = run(config, arguments.port, arguments.outside)
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
