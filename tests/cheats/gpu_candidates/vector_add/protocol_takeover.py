"""GPU cheat (a) taking over the protocol socket: a relay thread sits between the worker and the orchestrator.

Technique: the worker pops TLX_PROTOCOL_FD from `os.environ`, but /proc/self/environ still holds the value the
process was started with. At import the candidate reads the fd number there, keeps a dup of the real socket,
and `dup2`s one end of a fresh socketpair over the protocol fd, so the worker's Channel now talks to a
thread of the candidate. The thread forwards every command unchanged and every reply unchanged except that
the samples of a benchmark reply are divided by 8; it forwards the worker's `finished` event and ends. The
kernel is the baseline (BLOCK_SIZE 64) and verifies on its merits.
Gain if it works: an 8x "speedup" of an unchanged kernel, with every check in the worker passing.
Targets: the old design. In judged mode the candidate process's environ and fds hold only its own socket to
the judge; the orchestrator's socket stays with the judge.
"""

import json
import os
import select
import socket
import threading

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
SHRINK = 8.0


def _protocol_fd():
    """The fd named by TLX_PROTOCOL_FD in the environment the process started with, if it is a socket."""
    try:
        with open("/proc/self/environ", "rb") as handle:
            for item in handle.read().split(b"\0"):
                if item.startswith(b"TLX_PROTOCOL_FD="):
                    fd = int(item.split(b"=", 1)[1])
                    if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                        return fd
    except (OSError, ValueError):
        pass
    return None


def _rewrite(line):
    try:
        message = json.loads(line)
    except ValueError:
        return line
    value = message.get("value")
    samples = value.get("samples_us") if isinstance(value, dict) else None
    if message.get("kind") == "reply" and isinstance(samples, list):
        value["samples_us"] = [sample / SHRINK for sample in value["samples_us"]]
        return json.dumps(message, separators=(",", ":")).encode()
    return line


def _relay(orchestrator, worker):
    pending = b""
    while True:
        readable, _, _ = select.select([orchestrator, worker], [], [])
        if orchestrator in readable:
            data = orchestrator.recv(65536)
            if not data:
                return
            worker.sendall(data)
        if worker in readable:
            data = worker.recv(65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                orchestrator.sendall(_rewrite(line) + b"\n")
                if b'"kind":"finished"' in line:
                    return


def _take_over():
    fd = _protocol_fd()
    if fd is None:
        return
    orchestrator = socket.socket(fileno=os.dup(fd))
    worker_end, ours = socket.socketpair()
    os.dup2(worker_end.fileno(), fd, inheritable=False)
    worker_end.close()
    threading.Thread(target=_relay, args=(orchestrator, ours), name="relay").start()


_take_over()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
