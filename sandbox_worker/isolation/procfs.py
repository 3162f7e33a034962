"""Read-only /proc/sys for a root worker, so Landlock can open /proc to CUDA child processes.

The CUDA driver writes /proc/<pid>/task/<tid>/comm in every process that uses it; a root worker's
Landlock rule can only name its own /proc/<pid>, so CUDA fails in its children (the ncu-profiled
replay). Opening all of /proc to uid 0 would expose /proc/sys (core_pattern!) and /proc/sysrq-trigger.
Inside the worker's own user + mount namespace we bind those read-only first, the way container
runtimes do; the mounts exist only in the worker's private mount namespace.
"""

from __future__ import annotations

import os

from sandbox_worker.isolation import syscalls

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
ST_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC))
PROTECTED = ("/proc/sys", "/proc/sysrq-trigger")


def _mount(source: str | None, target: str, flags: int) -> None:
    syscalls.mount(source, target, None, flags)


def _locked_flags(path: str) -> int:
    """A remount in a child user namespace must keep the flags the parent locked (nosuid, nodev, noexec)."""
    info = os.statvfs(path)
    return sum(ms for st, ms in ST_FLAGS if info.f_flag & st)


def guard_proc_sys() -> None:
    """Enter a private mount namespace and make /proc/sys and /proc/sysrq-trigger read-only there.

    Must run inside the worker's user namespace (after netns.enter_private_network). Raises OSError.
    """
    syscalls.unshare(CLONE_NEWNS)
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for path in PROTECTED:
        if not os.path.exists(path):
            continue
        _mount(path, path, MS_BIND | MS_REC)
        _mount(None, path, MS_BIND | MS_REMOUNT | MS_RDONLY | _locked_flags(path))
    for path in PROTECTED:
        if os.path.exists(path) and os.access(path, os.W_OK) and not _is_read_only(path):
            raise OSError(0, f"{path} is still writable after the read-only bind")


def _is_read_only(path: str) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
