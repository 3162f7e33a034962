"""Fault: a detached spinner (marker __MARKER__) double-forks, calls setsid(), execve()s Python with an empty
environment, tries to kill, renice and pin the processes __TARGET_PIDS__, prints what each attempt gave on
stdout ("reach-report ..."), then spins forever; output wrong."""

import os
import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64

SPINNER = r"""
import errno, json, os, signal, sys
targets = json.loads(sys.argv[1])
def attempt(call):
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"
with open("/proc/self/environ") as environ:  # what a sweep by environment reads (Python may add LC_CTYPE)
    report = {"environ": environ.read(), "visible_pids": sorted(int(n) for n in os.listdir("/proc") if n.isdigit())}
for pid in targets:
    report[str(pid)] = {
        "setpriority": attempt(lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
        "sched_setaffinity": attempt(lambda: os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})),
        "kill": attempt(lambda: os.kill(pid, signal.SIGKILL)),
    }
os.write(1, ("reach-report " + json.dumps(report) + "\n").encode())
os.write(int(sys.argv[2]), b"x")
while True:
    pass
"""

_ready_r, _ready_w = os.pipe()
os.set_inheritable(_ready_w, True)
_child = os.fork()
if _child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", SPINNER, "__TARGET_PIDS__", str(_ready_w), "__MARKER__"], {})
    os._exit(0)
os.waitpid(_child, 0)
os.close(_ready_w)
os.read(_ready_r, 1)  # the spinner has made its attempts (or died: EOF)
os.close(_ready_r)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x - y, mask=mask)


def _launch(x, y):
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


def vector_add(x, y):
    return _launch(x, y)
