"""Writes confined to a few directories with Landlock (raw syscalls 444-446).

Only write-ish rights are *handled*, so reading and executing stay allowed everywhere (compilers, the
driver libraries, the frozen bundle); every handled right is then granted only beneath the writable
directories. `/dev` gets file writes and device ioctls (IOCTL_DEV, ABI >= 5) so CUDA keeps working,
`/dev/shm` gets everything (shared-memory files), and `/proc/self` (all of `/proc` for a non-root
worker, see `proc_write_scope`) gets file writes. REFER is handled and granted on the writable
directories because Triton's cache renames files across directories, which Landlock otherwise refuses
with EXDEV. With ABI >= 6 the sandbox also may not signal processes outside it (the orchestrator) or
reach abstract UNIX sockets created outside it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

from sandbox_worker.isolation import syscalls

CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_WRITE_RIGHTS_ABI1 = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
                      | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
DEVICE_DIR = "/dev"
SHARED_MEMORY_DIR = "/dev/shm"
OWN_PROC_DIR = "/proc/self"
PROC_DIR = "/proc"


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockUnavailable(OSError):
    """The kernel has no usable Landlock (not built in, disabled at boot, or an unknown architecture)."""


def abi_version() -> int:
    """The kernel's Landlock ABI; raises LandlockUnavailable with the errno when there is none."""
    try:
        return syscalls.raw_syscall("landlock_create_ruleset", None, 0, CREATE_RULESET_VERSION)
    except OSError as exc:
        raise LandlockUnavailable(exc.errno, f"landlock ABI not supported (errno {exc.errno}: {exc.strerror})") from None


def handled_write_rights(abi: int) -> int:
    rights = _WRITE_RIGHTS_ABI1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def ruleset_size(abi: int) -> int:
    """The attr size this ABI knows: a larger struct with non-zero new fields would be refused."""
    if abi >= 6:
        return ctypes.sizeof(RulesetAttr)
    if abi >= 4:
        return 16
    return 8


def abi_shortcomings(abi: int) -> list[str]:
    """What this ABI cannot confine, for the degraded reason."""
    missing = []
    if abi < 2:
        missing.append("cross-directory renames are refused (no REFER)")
    if abi < 3:
        missing.append("truncate() is not confined (no TRUNCATE)")
    return missing


def _add_path_rule(ruleset_fd: int, path: str, allowed: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
        syscalls.raw_syscall("landlock_add_rule", ruleset_fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def proc_write_scope(euid: int, proc_guarded: bool = False) -> str:
    """Where in /proc writes are allowed.

    The CUDA driver names its threads with fopen("/proc/self/task/<tid>/comm", "w") and fails to
    initialize (cudaErrorOsCallFailed) when that is refused, in every process that uses CUDA. For a
    non-root worker all of /proc is fine: DAC already keeps it out of /proc/sys and other users'
    processes, and with the `processes` layer /proc is the worker's PID namespace's own, which lists no
    process outside the worker. A uid-0 worker keeps uid 0 inside its user namespace and could write
    /proc/sys/kernel/core_pattern, so it only gets its own /proc/<pid>, which child processes
    (an ncu-profiled target, say) cannot use -- unless `procfs.guard_proc_sys` made /proc/sys and
    /proc/sysrq-trigger read-only in the worker's mount namespace first (`proc_guarded`).
    """
    return PROC_DIR if euid != 0 or proc_guarded else OWN_PROC_DIR


def special_dir_rights(abi: int, euid: int, proc_guarded: bool = False) -> dict[str, int]:
    """Writable system places every CUDA process needs, with the rights they get."""
    handled = handled_write_rights(abi)
    device = (FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV) & handled
    proc = (FS_WRITE_FILE | FS_TRUNCATE) & handled  # procfs files are "regular": "w" opens truncate
    return {DEVICE_DIR: device, SHARED_MEMORY_DIR: handled, proc_write_scope(euid, proc_guarded): proc}


def restrict_writes(writable_dirs: Iterable[str], *, proc_guarded: bool = False) -> tuple[int, list[str]]:
    """Restrict this thread (and future children) to writing beneath `writable_dirs`.

    Returns the ABI used and notes about directories that could not be added. Raises LandlockUnavailable
    or OSError when the ruleset cannot be built or enforced; nothing is restricted in that case.
    """
    abi = abi_version()
    handled = handled_write_rights(abi)
    attr = RulesetAttr(handled_access_fs=handled, handled_access_net=0,
                       scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    ruleset_fd = syscalls.raw_syscall("landlock_create_ruleset", ctypes.byref(attr), ruleset_size(abi), 0)
    notes: list[str] = []
    try:
        # Rules on the same inode are merged (OR-ed) by the kernel, so overlaps are harmless.
        rules = [(path, handled) for path in writable_dirs]
        specials = special_dir_rights(abi, os.geteuid(), proc_guarded)
        rules += [(path, rights) for path, rights in specials.items() if os.path.isdir(path)]
        for path, rights in rules:
            try:
                _add_path_rule(ruleset_fd, path, rights)
            except OSError as exc:
                notes.append(f"{path}: {exc.strerror or exc}")
        syscalls.set_no_new_privs()
        syscalls.raw_syscall("landlock_restrict_self", ruleset_fd, 0)
    finally:
        os.close(ruleset_fd)
    return abi, notes
