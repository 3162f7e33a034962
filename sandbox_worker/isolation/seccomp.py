"""seccomp deny-lists built as classic BPF with ctypes (no libseccomp in the worker).

Default ALLOW and deny a short list: an allow-list would have to know every syscall CUDA, Triton and the
compilers make, and would break on the next driver. Two filters exist:

- `inet_socket_filter`: the network fallback when no network namespace could be made; socket() with
  AF_INET/AF_INET6 fails with EPERM (AF_UNIX and the protocol socketpair keep working) and io_uring is
  refused, because io_uring can open sockets without passing through seccomp.
- `escape_filter`: syscalls a kernel candidate has no business making and that help it escape or spy:
  ptrace, cross-process memory and fd access (pidfd_getfd, kcmp), mounts, namespaces (unshare, setns, clone with CLONE_NEW*),
  BPF, module and kexec loading, the kernel keyring. clone3 gets ENOSYS because its flags live in
  memory a filter cannot read; glibc then falls back to clone, whose flags it can.

Syscalls from a foreign architecture (x32 numbers, 32-bit compat entry) are refused outright: a
deny-list keyed on native numbers would not see them.
"""

from __future__ import annotations

import ctypes
import errno
from dataclasses import dataclass

from sandbox_worker.isolation import syscalls

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_MODE_FILTER = 2
SECCOMP_FILTER_FLAG_TSYNC = 1

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

BPF_LD_W_ABS = 0x20
BPF_JMP_JA = 0x05
BPF_JMP_JEQ_K = 0x15
BPF_JMP_JGE_K = 0x35
BPF_JMP_JSET_K = 0x45
BPF_RET_K = 0x06

OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARG0_LOW = 16  # seccomp_data.args[0], low 32 bits on little-endian machines
X32_SYSCALL_BIT = 0x40000000

AF_INET = 2
AF_INET6 = 10
CLONE_NAMESPACE_FLAGS = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

ESCAPE_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "mount_setattr",
    "open_by_handle_at", "unshare", "setns", "bpf",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "keyctl", "add_key", "request_key",
)


def errno_action(code: int) -> int:
    return RET_ERRNO | (code & 0xFFFF)


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


Instruction = tuple[int, int, int, int]


@dataclass(frozen=True)
class Rule:
    """Deny syscall `nr` with `action`; with `arg0_equals` / `arg0_any_bit`, only when arg0 matches."""

    nr: int
    action: int
    arg0_equals: tuple[int, ...] = ()
    arg0_any_bit: int = 0


def _stmt(code: int, k: int) -> Instruction:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> Instruction:
    if not (0 <= jt <= 255 and 0 <= jf <= 255):
        raise ValueError("BPF jump out of range")
    return (code, jt, jf, k)


def _rule_block(rule: Rule) -> list[Instruction]:
    """Instructions that end with the accumulator holding the syscall number again when not matched."""
    if not rule.arg0_equals and not rule.arg0_any_bit:
        return [_jump(BPF_JMP_JEQ_K, rule.nr, 0, 1), _stmt(BPF_RET_K, rule.action)]
    tests: list[tuple[int, int]] = [(BPF_JMP_JEQ_K, value) for value in rule.arg0_equals]
    if rule.arg0_any_bit:
        tests.append((BPF_JMP_JSET_K, rule.arg0_any_bit))
    length = 5 + len(tests)  # JEQ nr, LD arg0, tests..., LD nr, JA, RET
    block = [_jump(BPF_JMP_JEQ_K, rule.nr, 0, length - 1), _stmt(BPF_LD_W_ABS, OFFSET_ARG0_LOW)]
    for index, (code, k) in enumerate(tests):
        position = 2 + index
        block.append(_jump(code, k, (length - 1) - position - 1, 0))
    block += [_stmt(BPF_LD_W_ABS, OFFSET_NR), _stmt(BPF_JMP_JA, 1), _stmt(BPF_RET_K, rule.action)]
    return block


def build_program(rules: list[Rule], arch: int, deny_x32: bool) -> list[Instruction]:
    """A default-ALLOW program: foreign arch -> EPERM, then each rule in order."""
    program = [
        _stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        _jump(BPF_JMP_JEQ_K, arch, 1, 0),
        _stmt(BPF_RET_K, errno_action(errno.EPERM)),
        _stmt(BPF_LD_W_ABS, OFFSET_NR),
    ]
    if deny_x32:
        program += [_jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1), _stmt(BPF_RET_K, errno_action(errno.EPERM))]
    for rule in rules:
        program += _rule_block(rule)
    program.append(_stmt(BPF_RET_K, RET_ALLOW))
    return program


def inet_socket_rules() -> list[Rule]:
    deny = errno_action(errno.EPERM)
    return [
        Rule(syscalls.syscall_number("socket"), deny, arg0_equals=(AF_INET, AF_INET6)),
        Rule(syscalls.syscall_number("io_uring_setup"), deny),
    ]


def escape_rules() -> list[Rule]:
    deny = errno_action(errno.EPERM)
    rules = [Rule(syscalls.syscall_number(name), deny) for name in ESCAPE_SYSCALLS]
    rules.append(Rule(syscalls.syscall_number("clone"), deny, arg0_any_bit=CLONE_NAMESPACE_FLAGS))
    rules.append(Rule(syscalls.syscall_number("clone3"), errno_action(errno.ENOSYS)))
    return rules


def judge_protection_rules(judge_pid: int, judge_pgid: int) -> list[Rule]:
    """For a judged candidate's process: no signal toward the judge (a stopped or killed judge decides
    nothing, but its clock is its own), its process group, every process (-1), or a namespace's init.
    kill and the sigqueue calls take the target in arg0; tkill names a thread, and the judge's threads are
    not known in advance, so it is refused outright (glibc signals threads with tgkill); pidfd_open of the
    judge is refused, and with it any pidfd_send_signal toward it."""
    deny = errno_action(errno.EPERM)
    targets = tuple(sorted({judge_pid, 0, 1, 0xFFFFFFFF, (-judge_pgid) & 0xFFFFFFFF}))
    number = syscalls.syscall_number
    return [Rule(number("kill"), deny, arg0_equals=targets),
            Rule(number("tgkill"), deny, arg0_equals=targets),
            Rule(number("rt_sigqueueinfo"), deny, arg0_equals=targets),
            Rule(number("rt_tgsigqueueinfo"), deny, arg0_equals=targets),
            Rule(number("pidfd_open"), deny, arg0_equals=(judge_pid, 1)),
            Rule(number("tkill"), deny)]


def install(rules: list[Rule]) -> None:
    """Load a filter for every thread of the process (TSYNC), falling back to prctl for this thread."""
    instructions = build_program(rules, syscalls.audit_arch(), deny_x32=syscalls.machine() == "x86_64")
    array = (SockFilter * len(instructions))(*[SockFilter(*i) for i in instructions])
    program = SockFprog(len(instructions), ctypes.cast(array, ctypes.POINTER(SockFilter)))
    syscalls.set_no_new_privs()
    try:
        result = syscalls.raw_syscall("seccomp", SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                                      ctypes.byref(program))
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
        syscalls.prctl(syscalls.PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program))
        return
    if result != 0:
        raise OSError(errno.EBUSY, f"seccomp TSYNC failed: thread {result} could not be synchronized")


def deny_inet_sockets() -> None:
    install(inet_socket_rules())


def deny_escape_syscalls() -> None:
    install(escape_rules())


def filter_mode() -> int | None:
    """The `Seccomp:` field of /proc/self/status (2 = filter), None when the kernel does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Seccomp:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
