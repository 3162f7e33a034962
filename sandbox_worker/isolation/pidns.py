"""The `processes` layer: the worker in a PID namespace of its own, which the kernel ends as a whole.

A candidate can double-fork, setsid() and execve() with an empty environment; none of that leaves a PID
namespace, and when the namespace's pid 1 exits the kernel SIGKILLs everything still in it. Inside, the
orchestrator and other workers have no pid, so kill(), setpriority() and sched_setaffinity() toward them fail
with ESRCH, and the namespace mounts its own /proc, which lists only its own processes.

`enter_private_pid_namespace` turns the calling process into four (host pids outside, namespace pids inside):

    relay      the process the orchestrator started: forwards SIGTERM/SIGINT to init, waits for the
     |         worker's exit status and ends with it (the same exit code, or death by the same signal)
     +- keeper     outside the namespace, init's parent: init gets SIGKILL when it dies (PR_SET_PDEATHSIG).
         |         It waits for init to exit, or for the orchestrator to be gone
         +- init       pid 1: mounts the namespace's /proc, reaps orphans, forwards SIGTERM/SIGINT to the worker;
             |         exits once nothing else is left, or when told to stop after the worker is gone
             +- worker     pid 2: returns from `enter_private_pid_namespace` and runs the harness and the candidate

The worker is not pid 1 itself: pid 1 ignores every signal it has no handler for, even from itself, so
abort(), kill(getpid(), SIGSEGV) or RLIMIT_CPU's SIGXCPU would no longer end it, and a pid-1 reaper would take
exit statuses the harness waits for (ncu under subprocess). The keeper exists because the relay must end as
soon as the worker does (its status is the crash report), while what the worker left behind stays until the
orchestrator's cleanup (SIGTERM/SIGKILL to the worker's process group, orchestrator/worker/process_tree.py)
has seen, counted and ended it. Relay, keeper and init run no harness or candidate code and carry neither
Landlock nor seccomp; the candidate cannot reach them: they are outside its namespace or its pid 1, which
the kernel protects from signals it has no handler for, and Landlock refuses ptrace and /proc/<pid>/mem
access to processes outside the candidate's domain.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import select
import signal
import sys
from dataclasses import dataclass
from typing import NoReturn

from sandbox_worker.isolation import netns, syscalls

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_REC, MS_PRIVATE = 0x4000, 0x40000
FORWARDED = (signal.SIGTERM, signal.SIGINT)
KEEPER_POLL_SECONDS = 1.0  # without pidfd_open (Linux < 5.3), how often the keeper looks for the orchestrator


class PidNamespaceError(OSError):
    """The namespace could not be made; the calling process is unchanged and goes on without it."""


@dataclass(frozen=True)
class PidNamespace:
    """What the worker reports in its `ready` message."""

    inode: int  # of /proc/self/ns/pid
    init_pid: int  # pid 1's pid as the orchestrator sees it


def enter_private_pid_namespace() -> PidNamespace:
    """Returns in the worker, pid 2 of a new PID namespace; the calling process becomes the relay and never
    returns. Raises PidNamespaceError, with the process unchanged, when the namespace cannot be made."""
    problem = netns.single_threaded_problem()
    if problem:
        raise PidNamespaceError(f"not single-threaded: {problem}")
    for stream in (sys.stdout, sys.stderr):  # buffered output would be written by two processes
        with contextlib.suppress(Exception):
            stream.flush()
    orchestrator = os.getppid()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # until each process has its handlers
    report_r, report_w = os.pipe()
    try:
        keeper = os.fork()
    except OSError as exc:
        for fd in (report_r, report_w):
            os.close(fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise PidNamespaceError(exc.errno, f"fork: {exc.strerror}") from None
    if keeper == 0:
        os.close(report_r)
        return _keeper(report_w, orchestrator, mask)
    os.close(report_w)
    reader = _LineReader(report_r)
    kind, _, detail = reader.next_line().partition(" ")
    if kind != "ready":
        os.waitpid(keeper, 0)  # after a failure the keeper (and init, if there was one) exits at once
        os.close(report_r)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise PidNamespaceError(detail or "the namespace's first processes ended before it was ready")
    _relay(reader, detail)


# ---- the relay (the process the orchestrator started) -------------------------------------------------


def _relay(reader: _LineReader, ready: str) -> NoReturn:
    status: int | None = None
    try:
        init_pid = int(ready)
        for sig in FORWARDED:
            signal.signal(sig, lambda signum, _frame: _forward(init_pid, signum))
        _close_fds_except({reader.fd})  # the protocol socket too: the worker's death must reach the orchestrator as EOF
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        while True:
            kind, _, detail = reader.next_line().partition(" ")
            if kind == "status":
                status = int(detail)
                break
            if not kind:
                break  # init died before reporting: the namespace went down with the worker in it
    finally:
        _end_like(status)


def _forward(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


def _end_like(status: int | None) -> NoReturn:
    """Exit as the worker did: its exit code, or death by its signal (so a crash reads as before)."""
    if status is not None and os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else signal.SIGKILL
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker's own limit; no core of the relay
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)  # only reached for a signal whose default action is not to terminate


# ---- the keeper (outside the namespace, init's parent) -------------------------------------------------


def _keeper(report_w: int, orchestrator: int, mask: set[int]) -> PidNamespace:
    """Runs in the forked keeper; returns only in the worker, two generations further down."""
    try:
        _unshare_pid_namespace()
        lifeline_r, lifeline_w = os.pipe()  # init's check that the keeper still lives once PDEATHSIG is set
        init = os.fork()
    except BaseException as exc:  # noqa: BLE001 - any failure is reported to the relay, which goes on alone
        _send(report_w, f"fail {_describe(exc)}")
        os._exit(0)
    if init == 0:
        os.close(lifeline_w)
        return _init(report_w, lifeline_r, mask)
    try:
        os.close(lifeline_r)
        os.close(report_w)  # the relay reads EOF when init is gone
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_IGN)  # it ends when init does, or by the orchestrator's SIGKILL
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _quiet_stdout()
        _close_fds_except({lifeline_w})
        _keep_until_gone(init, orchestrator)
    finally:
        os._exit(0)


def _unshare_pid_namespace() -> None:
    """A PID namespace owned by the user namespace the network layer made, or by a new one of our own."""
    try:
        syscalls.unshare(CLONE_NEWPID)
        return
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EINVAL):
            raise
    uid, gid = os.geteuid(), os.getegid()
    syscalls.unshare(netns.CLONE_NEWUSER | CLONE_NEWPID)
    netns.map_own_ids(uid, gid)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def _keep_until_gone(init: int, orchestrator: int) -> None:
    """Until init exits (then the namespace is empty) or the orchestrator is gone (then nobody would end it)."""
    init_fd, orchestrator_fd = _pidfd(init), _pidfd(orchestrator)
    watched = [fd for fd in (init_fd, orchestrator_fd) if fd is not None]
    timeout = None if len(watched) == 2 else KEEPER_POLL_SECONDS
    while True:
        if os.waitpid(init, os.WNOHANG)[0]:
            return
        if orchestrator_fd is not None:
            if select.select([orchestrator_fd], [], [], 0)[0]:
                return
        elif not _exists(orchestrator):
            return
        select.select(watched, [], [], timeout)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


# ---- init (pid 1 of the namespace) -----------------------------------------------------------------------


class _Init:
    """pid 1's state: the worker's pid (2) and whether the orchestrator asked it to stop."""

    def __init__(self, report_w: int) -> None:
        self.report_w = report_w
        self.worker: int | None = None
        self.worker_done = False
        self.stopping = False

    def on_signal(self, signum: int, _frame: object) -> None:
        if self.worker_done:
            os._exit(0)  # only leftovers remain: end the namespace
        self.stopping = True
        if self.worker is not None:
            _forward(self.worker, signum)

    def reap(self) -> None:
        """Reap every child (the worker and the orphans re-parented to pid 1) until none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            if pid == self.worker:
                self.worker_done = True
                _send(self.report_w, f"status {status}")
                if self.stopping:
                    return


def _init(report_w: int, lifeline_r: int, mask: set[int]) -> PidNamespace:
    """Runs in init; returns only in the worker it forks."""
    try:
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
        if select.select([lifeline_r], [], [], 0)[0]:  # EOF: the keeper died before PDEATHSIG was set
            os._exit(0)
        host_pid = int(os.readlink("/proc/self"))  # the orchestrator's /proc, before ours covers it
        _mount_own_proc()
        namespace = PidNamespace(inode=os.stat("/proc/self/ns/pid").st_ino, init_pid=host_pid)
        previous = {sig: signal.getsignal(sig) for sig in FORWARDED}
        state = _Init(report_w)
        for sig in FORWARDED:
            signal.signal(sig, state.on_signal)
        worker = os.fork()
    except BaseException as exc:  # noqa: BLE001 - reported to the relay, which goes on without a namespace
        _send(report_w, f"fail {_describe(exc)}")
        os._exit(0)
    if worker == 0:
        os.close(report_w)
        os.close(lifeline_r)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return namespace
    try:
        state.worker = worker
        _send(report_w, f"ready {host_pid}")
        _quiet_stdout()
        _close_fds_except({report_w})
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        state.reap()
    finally:
        os._exit(0)


def _mount_own_proc() -> None:
    """A /proc of this namespace in a private mount namespace: it lists only the namespace's processes, and
    /proc/self/task/<tid> means this namespace's tids, which glibc's pthread_setname_np (CUDA names its
    threads so) relies on."""
    syscalls.unshare(CLONE_NEWNS)
    syscalls.mount(None, "/", None, MS_REC | MS_PRIVATE)
    syscalls.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if os.readlink("/proc/self") != "1":
        raise PidNamespaceError(f"/proc/self is {os.readlink('/proc/self')} after mounting /proc, not 1")


# ---- small helpers ---------------------------------------------------------------------------------------


class _LineReader:
    """Lines from the report pipe ("ready <pid>", "fail <why>", "status <wait status>"); "" at EOF."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next_line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return ""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")


def _send(fd: int, line: str) -> None:
    """One line, written at once (a pipe write below PIPE_BUF is atomic); a relay that is gone is no error."""
    with contextlib.suppress(OSError):
        os.write(fd, (" ".join(line.split()) + "\n").encode()[:512])


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno:
        return f"{exc.strerror} ({errno.errorcode.get(exc.errno, exc.errno)})"
    return f"{type(exc).__name__}: {exc}"


def _quiet_stdout() -> None:
    """Keeper and init hold no output pipe open for a reader waiting for EOF (stderr stays, for a bug's traceback)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


def _close_fds_except(keep: set[int]) -> None:
    """Close every descriptor above stderr but `keep` (the protocol socket above all)."""
    low = 3
    for fd in sorted(fd for fd in keep if fd >= low):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(os.sysconf("SC_OPEN_MAX"), low + 1))
