"""Raw Linux system calls through ctypes, for the isolation layers.

Python 3.11 has no `os.unshare` and no wrapper for Landlock or seccomp, and the worker must stay on the
standard library, so the layers call libc's `syscall()` and `prctl()` directly. Syscall numbers differ per
architecture; only x86_64 and aarch64 (the machines we run on) are known here.
"""

from __future__ import annotations

import ctypes
import os
import platform

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7

_SYSCALL_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {
        "socket": 41, "clone": 56, "ptrace": 101, "pivot_root": 155, "mount": 165, "umount2": 166,
        "init_module": 175, "delete_module": 176, "kexec_load": 246, "add_key": 248, "request_key": 249,
        "keyctl": 250, "unshare": 272, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
        "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "seccomp": 317, "kexec_file_load": 320, "bpf": 321,
        "io_uring_setup": 425, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "clone3": 435, "pidfd_getfd": 438, "mount_setattr": 442, "landlock_create_ruleset": 444,
        "landlock_add_rule": 445, "landlock_restrict_self": 446,
        "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
        "pidfd_send_signal": 424, "pidfd_open": 434,
    },
    "aarch64": {
        "umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97, "kexec_load": 104, "init_module": 105,
        "delete_module": 106, "ptrace": 117, "socket": 198, "add_key": 217, "request_key": 218, "keyctl": 219,
        "clone": 220, "open_by_handle_at": 265, "setns": 268, "process_vm_readv": 270,
        "process_vm_writev": 271, "kcmp": 272, "finit_module": 273, "seccomp": 277, "bpf": 280, "kexec_file_load": 294,
        "io_uring_setup": 425, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "clone3": 435, "pidfd_getfd": 438, "mount_setattr": 442, "landlock_create_ruleset": 444,
        "landlock_add_rule": 445, "landlock_restrict_self": 446,
        "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "pidfd_send_signal": 424, "pidfd_open": 434,
    },
}
_AUDIT_ARCH = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}


class UnsupportedArchitecture(OSError):
    """The syscall table for this machine is unknown, so no raw syscall can be made safely."""


def machine() -> str:
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def syscall_number(name: str) -> int:
    table = _SYSCALL_NUMBERS.get(machine())
    if table is None:
        raise UnsupportedArchitecture(f"no syscall table for {machine()}")
    return table[name]


def audit_arch() -> int:
    """The AUDIT_ARCH_* value seccomp reports for native syscalls of this machine."""
    try:
        return _AUDIT_ARCH[machine()]
    except KeyError:
        raise UnsupportedArchitecture(f"no seccomp arch for {machine()}") from None


_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def raw_syscall(name: str, *args: int | ctypes._CData) -> int:
    """Call syscall `name`; integers travel as C longs (variadic calls need full-width arguments)."""
    converted = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    function = libc().syscall
    function.restype = ctypes.c_long
    return _check(function(ctypes.c_long(syscall_number(name)), *converted), name)


def prctl(option: int, *args: int | ctypes._CData) -> int:
    """prctl with unused trailing arguments zeroed, as the kernel demands for several options."""
    converted = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
    converted += [ctypes.c_ulong(0)] * (4 - len(converted))
    function = libc().prctl
    function.restype = ctypes.c_int
    return _check(function(ctypes.c_int(option), *converted), f"prctl({option})")


def set_no_new_privs() -> None:
    """Required by seccomp filters and Landlock for a process without CAP_SYS_ADMIN; idempotent."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def unshare(flags: int) -> None:
    _check(libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    function = libc().mount
    function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    function.restype = ctypes.c_int
    encoded = [value.encode() if value else None for value in (source, target, fstype)]
    _check(function(encoded[0], encoded[1], encoded[2], flags, None), f"mount {target}")


def thread_count() -> int:
    """Kernel threads of this process: namespaces and Landlock need exactly one."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1
