"""`python -s -m sandbox_worker.forkserver`: one per run, it imports torch, triton and the trusted worker
modules once, then forks each evaluation's worker from that warm state (orchestrator/worker/forkserver.py).

The server runs no harness or candidate code and never initialises CUDA; it stays single-threaded, so a fork
copies no lock another thread holds and the child can still enter namespaces. A fork request carries only
what `python -s -m sandbox_worker` is started with: the environment, the working directory, and as SCM_RIGHTS
the protocol socket, stdout and stderr. The child takes its own session, opens stdin on /dev/null, keeps only
those three descriptors, replaces its environment (also the block /proc/<pid>/environ shows, which the
orchestrator's token sweep reads) and then runs `sandbox_worker.server.main()`, which applies every isolation
layer itself. The server reaps its children and reports each exit status.

Control socket (SOCK_SEQPACKET, one JSON object per datagram; EOF ends the server):
    server -> orchestrator   ready {pid, preloaded, missing, import_seconds, dispatch_warm_seconds,
                                    triton_key_seconds, environ_room, cuda_initialized, problem}
                             forked {request_id, pid} with a pidfd; refused {request_id, reason}
                             exited {pid, returncode}  (subprocess convention: -N for death by signal N)
    orchestrator -> server   fork {request_id, env, cwd} with [protocol, stdout, stderr]
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import pkgutil
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, NoReturn

from sandbox_worker.isolation import netns, syscalls

CONTROL_VARIABLE = "TLX_FORKSERVER_FD"
PARENT_VARIABLE = "TLX_FORKSERVER_PARENT"  # the orchestrator's pid, to catch its death before PDEATHSIG was set
# Padding in the server's own environment: the bytes /proc/<pid>/environ shows are the block the process was
# started with, and a forked worker rewrites that block in place with its own environment (`_show_environment`).
ROOM_VARIABLE = "TLX_FORKSERVER_ENVIRON_ROOM"
# "1": also warm torch's Python dispatch (a GPU run's candidate processes record through it; judged/recording.py)
# and compute Triton's cache key (each candidate process keys its kernels by it; judged/warm.py)
WARM_UPS_VARIABLE = "TLX_FORKSERVER_WARM_UPS"
PRELOADED = ("torch", "triton", "triton.language", "sandbox_worker.server", "sandbox_worker.profiling")
PASSED_FDS = 3  # protocol, stdout, stderr
WORKER_PROTOCOL_FD = 3
MAX_MESSAGE_BYTES = 1 << 20
PR_SET_DUMPABLE = 4
WORKER_START_FAILED = 70  # the child could not become a worker (EX_SOFTWARE); its traceback is on its stderr


def main() -> int:
    try:
        control = socket.socket(fileno=int(os.environ.pop(CONTROL_VARIABLE)))
    except (KeyError, ValueError, OSError):
        sys.stderr.write("sandbox_worker.forkserver: TLX_FORKSERVER_FD is not set; tlx-agent starts this module\n")
        return 2
    os.set_inheritable(control.fileno(), False)
    _die_with_parent()
    started = time.perf_counter()
    preloaded, missing = _preload()
    warmed, keyed = _warm(missing) if os.environ.pop(WARM_UPS_VARIABLE, "") == "1" else (None, None)
    _quiesce_threads()
    ready: dict[str, Any] = {
        "kind": "ready", "pid": os.getpid(), "preloaded": preloaded, "missing": missing,
        "import_seconds": time.perf_counter() - started, "dispatch_warm_seconds": warmed,
        "triton_key_seconds": keyed,
        "environ_room": _environ_room(), "cuda_initialized": _cuda_initialized(), "problem": _fork_problem(),
    }
    if not _send(control, ready) or ready["problem"]:
        return 1
    if not _serve(control):
        return 0
    _run_worker()


def _run_worker() -> NoReturn:
    """In a forked child: `sandbox_worker.server.main()`, the entry of `python -m sandbox_worker`, then what
    the interpreter does at exit before it tears the modules down (join threads, atexit, flush stdio). That
    teardown, of the torch and triton modules the server imported, costs about 2 s, and the orchestrator waits
    for the EOF that only comes after it."""
    from sandbox_worker.server import main as worker_main

    try:
        code: object = worker_main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback on stderr, status 1
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()  # joins non-daemon threads, as the interpreter does at exit
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):
        with contextlib.suppress(Exception):
            sys.stderr.write(f"{code}\n")
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit((code or 0) & 0xFF)


def _die_with_parent() -> None:
    """SIGKILL when the orchestrator dies; not dumpable, so code in another same-user process cannot ptrace
    the server or read its memory (a worker restores its own flag)."""
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    with contextlib.suppress(OSError):
        syscalls.prctl(PR_SET_DUMPABLE, 0)
    expected = os.environ.get(PARENT_VARIABLE, "")
    if expected and os.getppid() != int(expected):  # the orchestrator died before PDEATHSIG was set
        os._exit(1)


def _preload() -> tuple[list[str], dict[str, str]]:
    """Import the trusted modules every worker would import; a module that fails is named, not fatal (a fresh
    worker would fail the same way when its harness imports it)."""
    names = list(PRELOADED)
    with contextlib.suppress(ImportError):
        kit = importlib.import_module("sandbox_worker.harness_kit")
        names += [f"{kit.__name__}.{module.name}" for module in pkgutil.iter_modules(kit.__path__)]
    preloaded: list[str] = []
    missing: dict[str, str] = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - reported in `ready`; the rest still loads
            missing[name] = f"{type(exc).__name__}: {exc}"[:300]
        else:
            preloaded.append(name)
    return preloaded, missing


WARM_UPS = (("torch dispatch warm-up", "sandbox_worker.judged.recording", "warm_dispatch_mode"),
            ("triton cache key", "sandbox_worker.judged.warm", "warm_triton_key"))


def _warm(missing: dict[str, str]) -> list[float | None]:
    """Pay once what each candidate process paid at its first recorded call (WARM_UPS), the seconds of each; a
    failure is named in `missing` (each candidate process then pays that one itself, as before)."""
    seconds: list[float | None] = []
    for what, module, function in WARM_UPS:
        try:
            seconds.append(getattr(importlib.import_module(module), function)())
        except Exception as exc:  # noqa: BLE001 - reported in `ready`; the server still serves
            missing[what] = f"{type(exc).__name__}: {exc}"[:300]
            seconds.append(None)
    return seconds


def _quiesce_threads() -> None:
    """Fork once and let the child exit at once: fork runs every library's pthread_atfork "prepare" handler,
    and OpenBLAS's (numpy's, which torch._C imports; one thread per further core, started when it loads) shuts
    its thread pool down. It starts again on the first BLAS call, which the server never makes and a worker
    makes after its isolation layers, as a fresh worker that imports numpy then does."""
    if netns.single_threaded_problem() is None:
        return
    with contextlib.suppress(OSError, ChildProcessError):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a torch without a usable cuda module has not initialised CUDA
        return False


def _thread_names() -> str:
    names = []
    with contextlib.suppress(OSError):
        for tid in sorted(os.listdir("/proc/self/task"), key=int):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as comm:
                names.append(f"{tid}:{comm.read().strip()}")
    return ", ".join(names)


def _fork_problem() -> str | None:
    """Why forking a worker now would be unsafe, or None: another thread (its locks are copied held), or CUDA."""
    problem = netns.single_threaded_problem()
    if problem:
        return f"not single-threaded: {problem} ({_thread_names()})"
    if _cuda_initialized():
        return "CUDA is initialised in the fork server"
    return None


def _environ_region() -> tuple[int, int]:
    """The start and end address of the environment block this process was started with (/proc/self/stat
    fields 50 and 51; the second field, the command, may hold spaces and parentheses)."""
    with open("/proc/self/stat", encoding="ascii", errors="replace") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return int(fields[47]), int(fields[48])


def _environ_room() -> int:
    try:
        start, end = _environ_region()
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, end - start)


def environment_block(env: dict[str, str]) -> bytes:
    """What /proc/<pid>/environ holds for `env`: NAME=value strings, each NUL-terminated."""
    return b"".join(f"{name}={value}".encode("utf-8", "surrogateescape") + b"\0" for name, value in env.items())


def _show_environment(env: dict[str, str]) -> None:
    """Overwrite the inherited environment block (the server's) with `env`, NUL-padded: the double NUL ends
    the list for every reader. Nothing refers to the old strings once os.environ has been replaced."""
    start, end = _environ_region()
    block = environment_block(env)
    if len(block) >= end - start:
        raise OSError(f"environment of {len(block)} bytes does not fit the {end - start}-byte block")
    padded = block + b"\0" * (end - start - len(block))
    ctypes.memmove(start, padded, len(padded))


# ---- the request loop ----------------------------------------------------------------------------------


def _serve(control: socket.socket) -> bool:
    """Fork workers until the control socket closes (False); returns True only in a forked worker."""
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # a handler, so SIGCHLD reaches the wakeup fd
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([control.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(OSError):
                os.read(wake_r, 4096)
            if not _reap(control, children):
                return False
        if control.fileno() not in readable:
            continue
        try:
            data, fds, flags, _ = socket.recv_fds(control, MAX_MESSAGE_BYTES, PASSED_FDS)
        except OSError:
            return False
        if not data:
            return False
        request, problem = _parse_request(data, fds, flags)
        if problem:
            _close_all(fds)
            if not _send(control, {"kind": "refused", "request_id": request.get("request_id"), "reason": problem}):
                return False
            continue
        pid = _fork(control, request, fds)
        if pid == 0:
            return _become_worker(control, (wake_r, wake_w), request, fds)
        if pid > 0:
            children.add(pid)


def _parse_request(data: bytes, fds: list[int], flags: int) -> tuple[dict[str, Any], str | None]:
    """The fork request and what is wrong with it, if anything."""
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        return {}, "request or its descriptors truncated"
    try:
        request = json.loads(data)
    except ValueError as exc:
        return {}, f"invalid JSON: {exc}"
    if not isinstance(request, dict) or request.get("kind") != "fork" or type(request.get("request_id")) is not int:
        return {}, "not a fork request with an integer request_id"
    env, cwd = request.get("env"), request.get("cwd")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return request, "env must map names to strings"
    if len(fds) != PASSED_FDS:
        return request, f"{len(fds)} descriptors, not {PASSED_FDS} (protocol, stdout, stderr)"
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        return request, f"working directory {cwd!r} does not exist"
    room = _environ_room()
    size = len(environment_block({**env, "TLX_PROTOCOL_FD": str(WORKER_PROTOCOL_FD)}))
    if size >= room:
        return request, f"environment of {size} bytes does not fit the {room}-byte block"
    return request, None


def _fork(control: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
    """Fork after the single-thread and CUDA checks; the server's reply names the child (with a pidfd, so
    the orchestrator can watch it even after the server is gone) or says why not. -1: nothing was forked."""
    problem = _fork_problem()
    pid = -1
    if problem is None:
        for stream in (sys.stdout, sys.stderr):  # a buffer would be written twice
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            problem = f"fork: {exc.strerror or exc}"
        if pid == 0:
            return 0
    _close_all(fds)
    if problem is not None:
        _send(control, {"kind": "refused", "request_id": request["request_id"], "reason": problem})
        return -1
    pidfd = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
    try:
        _send(control, {"kind": "forked", "request_id": request["request_id"], "pid": pid},
              [pidfd] if pidfd is not None else [])
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return pid


def _reap(control: socket.socket, children: set[int]) -> bool:
    """Report every child that has exited; False when the orchestrator can no longer be told."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return True
        if pid == 0:
            return True
        children.discard(pid)
        if not _send(control, {"kind": "exited", "pid": pid, "returncode": os.waitstatus_to_exitcode(status)}):
            return False
    return True


def _send(control: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> bool:
    data = json.dumps(message, separators=(",", ":")).encode()
    try:
        if fds:
            socket.send_fds(control, [data], fds)
        else:
            control.send(data)
    except OSError:
        return False
    return True


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


# ---- the forked child ------------------------------------------------------------------------------------


def _become_worker(control: socket.socket, wakeup: tuple[int, int], request: dict[str, Any],
                   fds: list[int]) -> bool:
    """Turn this child into what `python -s -m sandbox_worker` is at its first line; on any failure, exit
    WORKER_START_FAILED with the traceback on the worker's stderr (its log)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        syscalls.prctl(PR_SET_DUMPABLE, 1)  # as a fresh process: the orchestrator reads its /proc entries
        control.close()  # through the socket object, so nothing closes that number again later
        os.setsid()
        protocol, stdout, stderr = fds
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.dup2(protocol, WORKER_PROTOCOL_FD)
        os.set_inheritable(WORKER_PROTOCOL_FD, True)  # as pass_fds leaves it; the worker clears it itself
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        # every descriptor of the server (the control socket, the wakeup pipe, the received copies) is gone
        os.closerange(WORKER_PROTOCOL_FD + 1, max(os.sysconf("SC_OPEN_MAX"), max(*fds, *wakeup, null) + 1))
        os.chdir(request["cwd"])
        env = {**request["env"], "TLX_PROTOCOL_FD": str(WORKER_PROTOCOL_FD)}
        os.environ.clear()
        os.environ.update(env)
        # `tempfile` caches its folder at first use, and the server's imports (the dispatch warm-up's) used it:
        # the worker's is TMPDIR in its own scratch, the only place its sandbox lets it write
        tempfile.tempdir = None
        _show_environment(env)
        sys.argv = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")]
    except BaseException:  # noqa: BLE001 - this process must never return into the server's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(WORKER_START_FAILED)
    return True


if __name__ == "__main__":
    raise SystemExit(main())
