"""No network: move the worker into a fresh user + network namespace.

A new network namespace has only a loopback interface and no route out, so nothing the candidate does
can reach the host's or anyone else's sockets. The user namespace is what lets an unprivileged process
(and a root one, without touching the host's network) create it. Its uid/gid maps keep the worker's own
ids, so file access works as before; root loses its capabilities over the initial namespace, which is
wanted. `unshare(CLONE_NEWUSER)` refuses multi-threaded callers, so this runs before torch is imported.

Loopback is brought up inside the new namespace: it reaches nothing outside, and Nsight Compute talks to
its injected target over a local TCP port, so profiling children need it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import threading

from sandbox_worker.isolation import syscalls

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


class NetworkIsolationError(OSError):
    """The private namespace could not be entered or does not look private."""


def _network_namespace_inode() -> int:
    return os.stat("/proc/self/ns/net").st_ino


def _write_proc_file(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def map_own_ids(uid: int, gid: int) -> None:
    """Map our ids to themselves; `setgroups` must be denied before an unprivileged gid map."""
    with contextlib.suppress(FileNotFoundError):  # kernels before 3.19 have no setgroups file
        _write_proc_file("/proc/self/setgroups", "deny")
    _write_proc_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write_proc_file("/proc/self/gid_map", f"{gid} {gid} 1\n")


def _bring_loopback_up() -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
    return True


def single_threaded_problem() -> str | None:
    """Why the process is not single-threaded, or None when it is (Python threads and kernel tasks)."""
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads are running"
    tasks = syscalls.thread_count()
    if tasks != 1:
        return f"/proc/self/task lists {tasks} threads"
    return None


def listen_on_loopback(backlog: int = 1) -> socket.socket | None:
    """A listener in the current (host) namespace, to prove afterwards that it is out of reach.

    The kernel completes handshakes into the backlog, so no accept() is needed to see a connect succeed."""
    try:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(backlog)
    except OSError:
        listener.close()
        return None
    return listener


def can_connect(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def enter_private_network() -> str:
    """Unshare user+net namespaces and verify the result; raises NetworkIsolationError on any failure.

    Returns a short note on the loopback interface for the layer's report.
    """
    problem = single_threaded_problem()
    if problem:
        raise NetworkIsolationError(f"not single-threaded: {problem}")
    uid, gid = os.geteuid(), os.getegid()
    before = _network_namespace_inode()
    listener = listen_on_loopback()
    try:
        try:
            syscalls.unshare(CLONE_NEWUSER | CLONE_NEWNET)
        except OSError as exc:
            raise NetworkIsolationError(exc.errno, f"unshare(CLONE_NEWUSER|CLONE_NEWNET): {exc.strerror}") from None
        try:
            map_own_ids(uid, gid)
        except OSError as exc:
            raise NetworkIsolationError(exc.errno, f"writing uid/gid map: {exc.strerror}") from None
        if _network_namespace_inode() == before:
            raise NetworkIsolationError("network namespace did not change after unshare")
        interfaces = sorted(name for _, name in socket.if_nameindex())
        if interfaces != ["lo"]:
            raise NetworkIsolationError(f"new network namespace has interfaces {interfaces}")
        try:
            loopback = "loopback up" if _bring_loopback_up() else "loopback down"
        except OSError as exc:
            loopback = f"loopback down ({exc.strerror})"
        if listener is not None and can_connect(listener.getsockname()[1]):
            raise NetworkIsolationError("a listener in the original namespace is still reachable")
    finally:
        if listener is not None:
            listener.close()
    return loopback
