"""Warm workers: the run's fork server (sandbox_worker/forkserver.py) and the spawner that asks it for workers.

Long because: one seam, the orchestrator's side of the server (its messages, the forked worker's handle, the
server, the spawner and its lifetime), whose parts share one state: forks in flight and workers alive.

A forked worker looks to the rest of the orchestrator like one `SubprocessSpawner` started: its own session
(pgid = pid, so `kill_tree` ends it unchanged), its own protocol socket, stdout and stderr on one pipe that
`OutputCapture` drains, stdin on /dev/null, and exactly the environment `build_worker_environment` made, in
/proc/<pid>/environ too (the token sweep and `find_leftovers` read it there). Only the exit status travels
differently: the server reaps its children and reports it, and `ForkedProcess.wait()` returns it.

`make_spawner` owns the server: started on entry (it imports torch while the run freezes its bundle), killed
on exit, and dead with the orchestrator (PR_SET_PDEATHSIG). It is started with subprocess.Popen on the calling
thread, not trio's open_process: that forks from a worker thread, the parent-death signal follows the thread
that forked, and trio's idle threads exit. Whenever the server cannot serve (it died, refused, broke its
protocol, never became ready) the spawner says so once and starts every later worker as a fresh interpreter.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, final

import trio
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.text import one_line
from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from orchestrator.worker.launcher_store import LauncherStore
from orchestrator.worker.process import SpawnedWorker, Spawner, SubprocessSpawner, WorkerLaunch
from orchestrator.worker.process_tree import SCRATCH_VARIABLE, TOKEN_VARIABLE
from orchestrator.worker.triton_seed import SeededSpawner, build_seed
from sandbox_worker.forkserver import (
    CONTROL_VARIABLE,
    MAX_MESSAGE_BYTES,
    PARENT_VARIABLE,
    ROOM_VARIABLE,
    WARM_UPS_VARIABLE,
    WORKER_PROTOCOL_FD,
    environment_block,
)

READY_SECONDS = 60.0  # importing torch and triton takes about 5 s; a loaded host may take several times that
FORK_REPLY_SECONDS = 10.0  # a fork and a pidfd take milliseconds; silence this long is a hung server
REAP_WAIT_SECONDS = 5.0
ENVIRON_ROOM_BYTES = 64 * 1024  # a worker's environment is about 2 KiB; targets may add their own variables
WORKER_ARGS = ("-s", "-m", "sandbox_worker")


class ForkServerError(Exception):
    """The fork server cannot serve (dead, refused, silent or off-protocol); the reason is one line."""


class LaunchNotForkable(Exception):
    """This launch needs a fresh interpreter (another program, or an environment that does not fit)."""


# ---- what the server sends (sandbox_worker/forkserver.py) ------------------------------------------------


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerReady(_Message):
    """First message: imports done; `problem` says why forking would be unsafe."""

    kind: Literal["ready"]
    pid: int
    preloaded: list[str]
    missing: dict[str, str]
    import_seconds: float
    dispatch_warm_seconds: float | None = None  # torch's Python dispatch warmed (GPU runs), its seconds
    triton_key_seconds: float | None = None  # Triton's cache key computed (GPU runs), its seconds
    environ_room: int
    cuda_initialized: bool
    problem: str | None


class _Forked(_Message):
    kind: Literal["forked"]
    request_id: int
    pid: int = Field(gt=1)


class _Refused(_Message):
    kind: Literal["refused"]
    request_id: int | None
    reason: str


class _Exited(_Message):
    kind: Literal["exited"]
    pid: int = Field(gt=1)
    returncode: int


SERVER_MESSAGE = TypeAdapter(Annotated[ServerReady | _Forked | _Refused | _Exited, Field(discriminator="kind")])


# ---- one forked worker ---------------------------------------------------------------------------------


@final
class ForkedProcess:
    """A worker the server forked: the part of trio.Process that run_evaluation and kill_tree use (pid,
    returncode, wait). The status comes from the server; if the server is gone first, from the pidfd it sent
    (exit) and waitpid once the worker has re-parented to this subreaper (status), else returncode stays None."""

    def __init__(self, pid: int, pidfd: int | None) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self._returncode: int | None = None
        self._exited = trio.Event()

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait(self) -> int | None:
        await self._exited.wait()
        return self._returncode

    def __repr__(self) -> str:
        if not self._exited.is_set():
            state = f"running with PID {self.pid}"
        elif self._returncode is None:
            state = f"PID {self.pid} exited with an unknown status"
        elif self._returncode < 0:
            state = f"exited with signal {-self._returncode}"
        else:
            state = f"exited with status {self._returncode}"
        return f"<forked worker: {state}>"

    def set_exited(self, returncode: int | None) -> None:
        if self._exited.is_set():
            return
        self._returncode = returncode
        self._exited.set()
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None

    async def watch_orphan(self) -> None:
        """After the server is gone: wait for the exit through the pidfd, then reap if it re-parented here."""
        if self._pidfd is None:
            self.set_exited(None)
            return
        await trio.lowlevel.wait_readable(self._pidfd)
        status: int | None = None
        with trio.move_on_after(1.0):  # re-parenting completes when the server's exit does
            while status is None:
                try:
                    pid, raw = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    pid, raw = 0, 0
                if pid == self.pid:
                    status = os.waitstatus_to_exitcode(raw)
                else:
                    await trio.sleep(0.02)
        self.set_exited(status)


@dataclass
class _Reply:
    event: trio.Event
    process: ForkedProcess | None = None
    reason: str | None = None


# ---- the server ------------------------------------------------------------------------------------------


def server_environment(parent_env: Mapping[str, str], target_environment: Mapping[str, str] | None,
                       scratch: Path) -> dict[str, str]:
    """A worker's environment (what torch and triton read at import is what a worker would have), no worker
    token, and the server's own variables."""
    make_scratch_dirs(scratch)
    env, _refused = build_worker_environment(parent_env, target_environment, scratch=scratch, token="forkserver")
    for name in (TOKEN_VARIABLE, SCRATCH_VARIABLE):
        env.pop(name, None)
    env[PARENT_VARIABLE] = str(os.getpid())
    env[ROOM_VARIABLE] = "x" * ENVIRON_ROOM_BYTES
    return env


class ForkServer:
    """The orchestrator's side of one fork server: start it, read its messages, ask it for workers."""

    def __init__(self, popen: subprocess.Popen[bytes], control: trio.socket.SocketType) -> None:
        self.popen = popen
        self._control = control
        self._ready_event = trio.Event()
        self.ready: ServerReady | None = None
        self.broken: str | None = None
        self._closing = False
        self._next_request = 0
        self._replies: dict[int, _Reply] = {}
        self._abandoned: set[int] = set()
        self._live: dict[int, ForkedProcess] = {}
        self._send_lock = trio.Lock()

    @classmethod
    def start(cls, *, python: str, parent_env: Mapping[str, str], target_environment: Mapping[str, str] | None,
              scratch: Path, log_path: Path | None, warm_ups: bool = False) -> ForkServer:
        """Start `python -s -m sandbox_worker.forkserver` in a session of its own; OSError if it cannot be.
        `warm_ups`: the server also pays the candidate processes' first-call costs before it forks (WARM_UPS: torch's
        Python dispatch, Triton's cache key; GPU runs)."""
        env = server_environment(parent_env, target_environment, scratch)
        if warm_ups:
            env[WARM_UPS_VARIABLE] = "1"
        log = log_path.open("ab") if log_path is not None else None
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                env[CONTROL_VARIABLE] = str(theirs.fileno())
                popen = subprocess.Popen(
                    [python, "-s", "-m", "sandbox_worker.forkserver"], stdin=subprocess.DEVNULL,
                    stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env, cwd="/",
                    pass_fds=(theirs.fileno(),), start_new_session=True)
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
        finally:
            if log is not None:
                log.close()
        return cls(popen, trio.socket.from_stdlib_socket(ours))

    def statistics(self) -> dict[str, Any]:
        return {"pid": self.popen.pid, "broken": self.broken, "live_workers": len(self._live),
                "import_seconds": self.ready.import_seconds if self.ready else None,
                "dispatch_warm_seconds": self.ready.dispatch_warm_seconds if self.ready else None,
                "triton_key_seconds": self.ready.triton_key_seconds if self.ready else None,
                "preloaded": len(self.ready.preloaded) if self.ready else 0,
                "missing": dict(self.ready.missing) if self.ready else {}}

    async def serve(self) -> None:
        """Read the server's messages until it is gone; then watch the workers it left. Never raises: a
        failure breaks the server, and the spawner falls back to fresh interpreters."""
        try:
            reason = await self._read_messages()
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the run down; it is the reason
            reason = f"its reader failed: {type(exc).__name__}: {exc}"
        if self._closing:
            return
        self.break_with(reason)
        async with trio.open_nursery() as nursery:
            for process in list(self._live.values()):
                nursery.start_soon(process.watch_orphan)
        self._live.clear()

    async def _read_messages(self) -> str:
        """The reason the server can no longer be used, once its messages stop making sense or stop."""
        space = socket.CMSG_SPACE(array.array("i").itemsize)
        while self.broken is None:
            try:
                data, ancillary, flags, _ = await self._control.recvmsg(MAX_MESSAGE_BYTES, space)
            except ConnectionResetError:  # the server died with a request of ours unread: its end is gone
                data, ancillary, flags = b"", [], 0
            except (OSError, trio.ClosedResourceError) as exc:
                return f"its control socket failed ({exc})"
            fds = _received_fds(ancillary)
            if not data:
                _close_fds(fds)
                with trio.move_on_after(1.0):  # its status, for the reason, once it is reaped
                    while self.popen.poll() is None:
                        await trio.sleep(0.02)
                return f"it exited ({_describe_exit(self.popen)})"
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                _close_fds(fds)
                return "it sent a truncated message"
            try:
                message = SERVER_MESSAGE.validate_python(json.loads(data))
            except (ValueError, ValidationError) as exc:
                _close_fds(fds)
                return f"it sent an invalid message ({one_line(exc, 200)})"
            problem = self._dispatch(message, fds)
            if problem:
                return problem
        return self.broken

    def _dispatch(self, message: Any, fds: list[int]) -> str | None:
        pidfd = fds[0] if isinstance(message, _Forked) and len(fds) == 1 else None
        _close_fds([fd for fd in fds if fd != pidfd])
        if isinstance(message, ServerReady):
            self.ready = message
            self._ready_event.set()
            if message.problem or message.cuda_initialized:
                return f"it cannot fork safely: {message.problem or 'CUDA is initialised'}"
            return None
        if isinstance(message, _Exited):
            process = self._live.pop(message.pid, None)
            if process is None:
                return f"it reported pid {message.pid}, which it never forked"
            process.set_exited(message.returncode)
            return None
        reply = self._replies.get(message.request_id) if message.request_id is not None else None
        if isinstance(message, _Refused):
            return f"it refused a fork: {one_line(message.reason, 300)}"
        process = ForkedProcess(message.pid, pidfd)
        self._live[message.pid] = process
        if reply is not None:
            reply.process = process
            reply.event.set()
        elif message.request_id in self._abandoned:  # the spawn was cancelled after the request went out
            self._abandoned.discard(message.request_id)
            with contextlib.suppress(OSError):
                os.killpg(message.pid, signal.SIGKILL)
        else:
            return f"it forked pid {message.pid} for request {message.request_id}, which was never made"
        return None

    def break_with(self, reason: str) -> None:
        """Stop using the server, once: kill it (its children re-parent to us) and fail the forks waiting."""
        if self.broken is not None or self._closing:
            return
        self.broken = one_line(reason, 400)
        with contextlib.suppress(OSError):
            self.popen.kill()
        self._ready_event.set()
        for reply in self._replies.values():
            reply.event.set()

    async def wait_ready(self) -> ServerReady:
        """The server's `ready` report once it has imported everything; ForkServerError if it never will."""
        with trio.move_on_after(READY_SECONDS):
            await self._ready_event.wait()
        if not self._ready_event.is_set():
            self.break_with(f"it was not ready within {READY_SECONDS:.0f} s")
        if self.broken is not None or self.ready is None:
            raise ForkServerError(self.broken or "it is closed")
        return self.ready

    async def fork(self, env: Mapping[str, str], cwd: Path, fds: list[int]) -> ForkedProcess:
        """A worker forked with `env`, `cwd` and [protocol, stdout, stderr]; the server receives copies of the
        descriptors, so the caller closes its own. ForkServerError when the server cannot serve."""
        ready = await self.wait_ready()
        block = len(environment_block({**env, "TLX_PROTOCOL_FD": str(WORKER_PROTOCOL_FD)}))
        if block >= ready.environ_room:
            raise LaunchNotForkable(f"its environment ({block} bytes) exceeds the server's {ready.environ_room}")
        self._next_request += 1
        request_id = self._next_request
        data = json.dumps({"kind": "fork", "request_id": request_id, "env": dict(env), "cwd": str(cwd)}).encode()
        if len(data) > MAX_MESSAGE_BYTES:
            raise LaunchNotForkable(f"its fork request ({len(data)} bytes) exceeds {MAX_MESSAGE_BYTES}")
        reply = self._replies[request_id] = _Reply(trio.Event())
        try:
            try:
                async with self._send_lock:
                    await self._control.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            except (OSError, trio.ClosedResourceError) as exc:
                self.break_with(f"a fork request could not be sent ({exc})")
            with trio.move_on_after(FORK_REPLY_SECONDS):
                await reply.event.wait()
            if not reply.event.is_set():
                self.break_with(f"it did not answer a fork request within {FORK_REPLY_SECONDS:.0f} s")
        except BaseException:
            if reply.process is None:
                self._abandoned.add(request_id)
            raise
        finally:
            del self._replies[request_id]
        if reply.process is None:
            raise ForkServerError(self.broken or "it gave no worker")
        return reply.process

    async def aclose(self) -> None:
        """Kill the server and reap it (bounded); its workers have ended with their evaluations."""
        self._closing = True
        self._control.close()
        with contextlib.suppress(OSError):
            self.popen.kill()
        with trio.move_on_after(REAP_WAIT_SECONDS):
            while self.popen.poll() is None:
                await trio.sleep(0.02)


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return list(fds)


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _describe_exit(popen: subprocess.Popen[bytes]) -> str:
    code = popen.poll()
    if code is None:
        return "its control socket closed"
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


# ---- the spawner -----------------------------------------------------------------------------------------


def ready_line(ready: ServerReady) -> str:
    """The live log's line for the run's first forked worker: what the server paid once for every worker."""
    warm = ("" if ready.dispatch_warm_seconds is None
            else f" dispatch_warm_s={ready.dispatch_warm_seconds:.2f}")
    warm += "" if ready.triton_key_seconds is None else f" triton_key_s={ready.triton_key_seconds:.2f}"
    return (f"worker start: forked by the fork server (pid {ready.pid}, imports_s={ready.import_seconds:.2f}"
            f"{warm}), as every later worker is while it serves")


class ForkServerSpawner:
    """Workers forked by the run's fork server; a fresh interpreter for a launch the server cannot serve, and
    for every launch once the server has failed (said once, through `notify`)."""

    def __init__(self, server: ForkServer | None, *, python: str = sys.executable,
                 notify: Callable[[str], None] | None = None, fresh: Spawner | None = None) -> None:
        self.server = server
        self.python = python
        self.notify = notify
        self.fresh = fresh or SubprocessSpawner()
        self.fallback_reason: str | None = None
        self.forked = 0
        self.fresh_started = 0

    def statistics(self) -> dict[str, Any]:
        return {"forked": self.forked, "fresh": self.fresh_started, "fallback_reason": self.fallback_reason,
                "server": self.server.statistics() if self.server is not None else None}

    async def wait_ready(self) -> bool:
        """Whether the server is ready to fork (waits for its imports); False once it has failed."""
        if self.server is None or self.fallback_reason is not None:
            return False
        try:
            await self.server.wait_ready()
        except ForkServerError as exc:
            self.fall_back(str(exc))
            return False
        return True

    def fall_back(self, reason: str) -> None:
        if self.fallback_reason is not None:
            return
        self.fallback_reason = one_line(reason, 400)
        if self.server is not None:
            self.server.break_with(reason)
        if self.notify is not None:
            self.notify(f"worker start: the fork server is not used from here on ({self.fallback_reason}); "
                        "every later worker starts as a fresh interpreter")

    async def spawn(self, launch: WorkerLaunch) -> SpawnedWorker:
        if self.server is not None and self.fallback_reason is None and self._forkable(launch):
            try:
                spawned = await self._fork(launch)
            except LaunchNotForkable:
                pass
            except ForkServerError as exc:
                self.fall_back(f"the fork server failed: {exc}")
            else:
                if self.forked == 0 and self.notify is not None and self.server.ready is not None:
                    self.notify(ready_line(self.server.ready))
                self.forked += 1
                return spawned
        self.fresh_started += 1
        return await self.fresh.spawn(launch)

    def _forkable(self, launch: WorkerLaunch) -> bool:
        """The server runs one program: `python -s -m sandbox_worker` with the server's own interpreter."""
        return list(launch.argv) == [self.python, *WORKER_ARGS]

    async def _fork(self, launch: WorkerLaunch) -> SpawnedWorker:
        assert self.server is not None
        parent_end, child_end = socket.socketpair()
        output_r, output_w = os.pipe()
        try:
            process = await self.server.fork(launch.env, launch.cwd, [child_end.fileno(), output_w, output_w])
        except BaseException:
            parent_end.close()
            os.close(output_r)
            raise
        finally:
            child_end.close()  # otherwise we never see EOF when the worker dies
            os.close(output_w)
        protocol = trio.SocketStream(trio.socket.from_stdlib_socket(parent_end))
        output = trio.lowlevel.FdStream(output_r)
        return SpawnedWorker(process=process, protocol=protocol, output=output, launch=launch)


@asynccontextmanager
async def make_spawner(kind: Literal["fresh", "forkserver"], *, parent_env: Mapping[str, str], scratch: Path,
                       target_environment: Mapping[str, str] | None = None, python: str = sys.executable,
                       log_path: Path | None = None, notify: Callable[[str], None] | None = None,
                       triton_seed: bool = False) -> AsyncIterator[Spawner]:
    """The run's spawner. "fresh": a new interpreter per worker. "forkserver": workers forked by a fork server
    that lives as long as this context (`scratch` holds its HOME/TMPDIR, `log_path` its output).
    `triton_seed` (GPU targets): each worker's Triton cache starts with Triton's CUDA driver module, built once
    here (orchestrator/worker/triton_seed.py), and the launchers the run's judges built so far
    (orchestrator/worker/launcher_store.py); the fork server warms torch's Python dispatch, which each
    candidate process records through (sandbox_worker/judged/recording.py `warm_dispatch_mode`)."""
    seed = None
    if triton_seed:
        built = await build_seed(python, parent_env, scratch.with_name(scratch.name + "-triton-seed"))
        seed = built.cache
        if notify is not None:
            notify(f"triton_seed status={'built' if seed else 'none'} reason={built.reason!r}")

    def seeded(spawner: Spawner) -> Spawner:
        if seed is None:
            return spawner
        return SeededSpawner(spawner, seed, LauncherStore(scratch.with_name(scratch.name + "-triton-launchers")))

    if kind == "fresh":
        yield seeded(SubprocessSpawner())
        return
    try:
        server = ForkServer.start(python=python, parent_env=parent_env, target_environment=target_environment,
                                  scratch=scratch, log_path=log_path, warm_ups=triton_seed)
    except OSError as exc:
        spawner = ForkServerSpawner(None, python=python, notify=notify)
        spawner.fall_back(f"the fork server could not be started: {exc}")
        yield seeded(spawner)
        return
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve)
        try:
            yield seeded(ForkServerSpawner(server, python=python, notify=notify))
        finally:
            with trio.CancelScope(shield=True):
                await server.aclose()
            nursery.cancel_scope.cancel()
