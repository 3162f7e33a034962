"""The seccomp BPF programs, run through a tiny classic-BPF evaluator (pure; nothing is loaded here).

The kernel tests in test_layers.py show the filters work; these pin the decision for inputs a kernel
test cannot produce cheaply (a foreign architecture, x32 numbers, every address family).
"""

from __future__ import annotations

import errno
import struct

import pytest

from sandbox_worker.isolation import seccomp, syscalls

ARCH = syscalls.AUDIT_ARCH_X86_64
NUMBERS = {"socket": 41, "clone": 56, "ptrace": 101, "read": 0}


def evaluate(program: list[tuple[int, int, int, int]], nr: int, arch: int = ARCH, arg0: int = 0) -> int:
    """Run a classic BPF seccomp program over one seccomp_data record and return its verdict."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    accumulator, pc = 0, 0
    for _ in range(len(program) + 1):
        code, jt, jf, k = program[pc]
        if code == seccomp.BPF_LD_W_ABS:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == seccomp.BPF_RET_K:
            return k
        elif code == seccomp.BPF_JMP_JA:
            pc += k
        elif code in (seccomp.BPF_JMP_JEQ_K, seccomp.BPF_JMP_JGE_K, seccomp.BPF_JMP_JSET_K):
            taken = {seccomp.BPF_JMP_JEQ_K: accumulator == k, seccomp.BPF_JMP_JGE_K: accumulator >= k,
                     seccomp.BPF_JMP_JSET_K: bool(accumulator & k)}[code]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1
    raise AssertionError("program did not return")


def inet_program() -> list[tuple[int, int, int, int]]:
    rules = [seccomp.Rule(NUMBERS["socket"], seccomp.errno_action(errno.EPERM),
                          arg0_equals=(seccomp.AF_INET, seccomp.AF_INET6))]
    return seccomp.build_program(rules, ARCH, deny_x32=True)


@pytest.mark.parametrize(("family", "denied"), [(2, True), (10, True), (1, False), (16, False), (17, False)])
def test_only_inet_socket_families_are_denied(family: int, denied: bool) -> None:
    verdict = evaluate(inet_program(), NUMBERS["socket"], arg0=family)
    assert verdict == (seccomp.errno_action(errno.EPERM) if denied else seccomp.RET_ALLOW)


def test_other_syscalls_pass_and_foreign_or_x32_calls_are_refused() -> None:
    program = inet_program()
    assert evaluate(program, NUMBERS["read"]) == seccomp.RET_ALLOW
    assert evaluate(program, NUMBERS["read"], arch=0x40000003) == seccomp.errno_action(errno.EPERM)  # i386
    assert evaluate(program, 0x40000000 | NUMBERS["socket"], arg0=2) == seccomp.errno_action(errno.EPERM)


def test_clone_is_denied_only_with_namespace_flags() -> None:
    rules = [seccomp.Rule(NUMBERS["ptrace"], seccomp.errno_action(errno.EPERM)),
             seccomp.Rule(NUMBERS["clone"], seccomp.errno_action(errno.EPERM),
                          arg0_any_bit=seccomp.CLONE_NAMESPACE_FLAGS)]
    program = seccomp.build_program(rules, ARCH, deny_x32=True)
    thread_flags = 0x3D0F00  # what glibc passes for pthread_create
    assert evaluate(program, NUMBERS["clone"], arg0=thread_flags) == seccomp.RET_ALLOW
    assert evaluate(program, NUMBERS["clone"], arg0=0x01200011) == seccomp.RET_ALLOW  # fork()
    assert evaluate(program, NUMBERS["clone"], arg0=0x10000000 | 17) == seccomp.errno_action(errno.EPERM)
    assert evaluate(program, NUMBERS["clone"], arg0=0x40000000) == seccomp.errno_action(errno.EPERM)
    assert evaluate(program, NUMBERS["ptrace"]) == seccomp.errno_action(errno.EPERM)


def test_escape_rules_cover_the_documented_list() -> None:
    if syscalls.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"no syscall table for {syscalls.machine()}")
    denied = {rule.nr for rule in seccomp.escape_rules()}
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "bpf", "kexec_load",
                 "init_module", "finit_module", "keyctl", "add_key", "request_key", "unshare", "setns",
                 "clone", "clone3"):
        assert syscalls.syscall_number(name) in denied, name
