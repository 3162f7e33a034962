"""Cheat (a) taking over the protocol socket: a thread answers the benchmark commands in the worker's place.

Technique: at import the candidate finds the protocol socket in /proc/self/fd (the socket whose peer is not in
its PID namespace: SO_PEERCRED reports pid 0), keeps a dup of it and `dup2`s one end of a fresh socketpair
over it, so the worker's Channel now talks to a thread of the candidate. The thread forwards everything,
except that it keeps `benchmark` commands from the worker and answers them itself: it times three calls of
the kernel on random inputs of the case's shape and replies with samples a tenth of that. The worker only
ever builds, verifies and profiles, honestly; the kernel is the baseline (32-column tiles).
Gain if it works: a 10x "speedup" of an unchanged kernel, with every check in the worker passing.
Targets: the old design. In judged mode the only socket in the candidate process is its own to the judge.
"""

import json
import os
import select
import socket
import struct
import threading
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
SHRINK = 10.0


def _protocol_fd():
    """The socket whose peer lies outside this PID namespace, else the only socket there is."""
    sockets = []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        fd = int(name)
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            probe = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        sockets.append(fd)
        try:
            peer = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        except OSError:
            peer = -1
        finally:
            probe.close()
        if peer in (0, -1):
            return fd
    return sockets[0] if len(sockets) == 1 else None


def _forged_benchmark(command):
    parameters = command["case"]["parameters"]
    x = torch.randn(int(parameters["m"]), int(parameters["n"])) * 12
    times = []
    for _ in range(3):
        started = time.perf_counter()
        softmax(x)
        times.append((time.perf_counter() - started) * 1e6)
    base = sorted(times)[1] / SHRINK
    samples = [base * (0.99 + 0.02 * index / 29) for index in range(30)]
    value = {"samples_us": samples, "warmup_count": 1, "cache_policy": "cpu_perf_counter",
             "metrics": {"rse": 0.002, "mode": "cpu", "flush_bytes": None, "stopped_by": "rse"}}
    return {"kind": "reply", "command_id": command["command_id"], "value": value, "seconds": sum(times) / 1e6}


def _serve(orchestrator, worker):
    from_orchestrator = b""
    while True:
        readable, _, _ = select.select([orchestrator, worker], [], [])
        if orchestrator in readable:
            data = orchestrator.recv(65536)
            if not data:
                return
            from_orchestrator += data
            while b"\n" in from_orchestrator:
                line, from_orchestrator = from_orchestrator.split(b"\n", 1)
                command = json.loads(line)
                if command.get("kind") == "benchmark":
                    orchestrator.sendall(json.dumps(_forged_benchmark(command)).encode() + b"\n")
                else:
                    worker.sendall(line + b"\n")
        if worker in readable:
            data = worker.recv(65536)
            if not data:
                return
            orchestrator.sendall(data)
            if b'"kind":"finished"' in data:
                return


def _take_over():
    fd = _protocol_fd()
    if fd is None:
        return
    orchestrator = socket.socket(fileno=os.dup(fd))
    worker_end, ours = socket.socketpair()
    os.dup2(worker_end.fileno(), fd, inheritable=False)
    worker_end.close()
    threading.Thread(target=_serve, args=(orchestrator, ours), name="protocol").start()


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    columns = tl.arange(0, BLOCK_SIZE)
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        x = tl.load(x_row + offsets, mask=offsets < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    row_sum = tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0)
    inverse_sum = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        mask = offsets < n_cols
        x = tl.load(x_row + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_row + offsets, tl.exp(x - row_max) * inverse_sum, mask=mask)


def _launch(x, out=None):
    """The baseline launch (32-column tiles, one warp): one program per row."""
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), out.stride(0),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    return _launch(x)


_take_over()
