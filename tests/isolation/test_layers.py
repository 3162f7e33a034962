"""The worker's isolation layers, applied in real child processes (never in the pytest process).

Each child runs a snippet: it may look around first, calls `apply_layers(config)`, then tries what a
candidate might try, and prints one JSON object. Kernel-dependent layers are required to be active
unless the child reports them unavailable for a kernel reason, which skips (with that reason).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRELUDE = textwrap.dedent("""
    import ctypes, errno, json, os, resource, socket, subprocess, sys, threading
    from sandbox_worker.isolation import layers as isolation
    from sandbox_worker.isolation import syscalls
    config = json.loads(sys.argv[1])
    args = json.loads(sys.argv[2])
    result = {}
    def attempt(call):
        try:
            call()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        return "ok"
    def write(path, text="x"):
        with open(path, "w") as handle:
            handle.write(text)
    def connect(port):
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass
""")


def run_child(snippet: str, config: dict[str, Any], args: dict[str, Any] | None = None,
              stdin: int = subprocess.DEVNULL) -> dict[str, Any]:
    code = PRELUDE + textwrap.dedent(snippet) + "\nprint(json.dumps(result))\n"
    completed = subprocess.run(
        [sys.executable, "-c", code, json.dumps(config), json.dumps(args or {})],
        stdin=stdin, capture_output=True, text=True, timeout=30, cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def require_active(statuses: dict[str, str], layer: str) -> None:
    status = statuses[layer]
    if status.startswith("unavailable:") and "internal error" not in status:
        pytest.skip(f"{layer} not available on this kernel: {status}")
    assert status == "active", statuses


@pytest.fixture
def sandbox_dirs(tmp_path: Path) -> dict[str, Path]:
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    (outside / "existing.txt").write_text("original\n")
    return {"scratch": scratch, "outside": outside, "triton": scratch / "triton_cache", "tmp": scratch / "tmp"}


def make_config(dirs: dict[str, Path], **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "mode": "standard", "scratch_dir": str(dirs["scratch"]),
        "writable_dirs": [str(dirs["triton"]), str(dirs["tmp"])],
        "data_limit_bytes": 1 << 30, "cpu_seconds": 60, "file_size_bytes": 1 << 28, "open_files": 512,
        "network": False,
    }
    config.update(overrides)
    return config


@pytest.fixture
def listener() -> socket.socket:
    """A listening socket in the pytest process's network namespace (no accept needed to connect)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock


def test_every_layer_reports_a_status_in_the_contract_format(sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("result['statuses'] = isolation.apply_layers(config)", make_config(sandbox_dirs))
    statuses = result["statuses"]
    assert list(statuses) == ["stdin", "rlimits", "network", "processes", "filesystem", "seccomp"]
    for status in statuses.values():
        assert status == "active" or status.startswith(("degraded:", "unavailable:")), statuses
    assert statuses["stdin"] == "active"
    assert statuses["rlimits"] == "active"


def test_tcp_connect_to_a_listener_in_the_parents_namespace_fails(
        sandbox_dirs: dict[str, Path], listener: socket.socket) -> None:
    result = run_child("""
        result['before'] = attempt(lambda: connect(args['port']))
        result['statuses'] = isolation.apply_layers(config)
        result['after'] = attempt(lambda: connect(args['port']))
        result['interfaces'] = [name for _, name in socket.if_nameindex()]
        import fcntl, struct
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:  # SIOCGIFFLAGS on lo: IFF_UP?
            lo = fcntl.ioctl(sock.fileno(), 0x8913, struct.pack('16sH22x', b'lo', 0))
        result['loopback_up'] = bool(struct.unpack('16sH22x', lo)[1] & 1)
    """, make_config(sandbox_dirs), {"port": listener.getsockname()[1]})
    require_active(result["statuses"], "network")
    assert result["before"] == "ok"  # the listener was reachable, so the failure below is the layer's doing
    # the namespace's own loopback has no listener on that port; without loopback there is no route at all
    assert result["after"] == ("ECONNREFUSED" if result["loopback_up"] else "ENETUNREACH"), result
    assert result["interfaces"] == ["lo"]


def test_writes_are_confined_to_scratch_and_its_writable_dirs(sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("""
        result['statuses'] = isolation.apply_layers(config)
        out, scratch = args['outside'], config['scratch_dir']
        result['create_outside'] = attempt(lambda: write(out + '/new.txt'))
        result['append_outside'] = attempt(lambda: open(out + '/existing.txt', 'a').close())
        result['unlink_outside'] = attempt(lambda: os.unlink(out + '/existing.txt'))
        result['mkdir_outside'] = attempt(lambda: os.mkdir(out + '/d'))
        result['truncate_outside'] = attempt(lambda: os.truncate(out + '/existing.txt', 0))
        result['inside'] = attempt(lambda: write(scratch + '/kernel_out.txt'))
        result['triton'] = attempt(lambda: write(config['writable_dirs'][0] + '/k.cubin'))
        result['rename_across'] = attempt(
            lambda: os.replace(scratch + '/kernel_out.txt', config['writable_dirs'][1] + '/moved.txt'))
        result['dev_null'] = attempt(lambda: write('/dev/null'))
        result['move_out'] = attempt(lambda: os.replace(config['writable_dirs'][1] + '/moved.txt', out + '/m.txt'))
    """, make_config(sandbox_dirs), {"outside": str(sandbox_dirs["outside"])})
    require_active(result["statuses"], "filesystem")
    # Landlock refuses with EACCES; "active" means ABI >= 3 (REFER handled), where a rename into a directory
    # without MAKE_REG is EACCES too (EACCES outranks EXDEV)
    for key in ("create_outside", "append_outside", "unlink_outside", "mkdir_outside", "truncate_outside",
                "move_out"):
        assert result[key] == "EACCES", (key, result)
    for key in ("inside", "triton", "rename_across", "dev_null"):
        assert result[key] == "ok", (key, result)
    assert sorted(p.name for p in sandbox_dirs["outside"].iterdir()) == ["existing.txt"]
    assert (sandbox_dirs["outside"] / "existing.txt").read_text() == "original\n"
    assert (sandbox_dirs["tmp"] / "moved.txt").exists()


def test_rlimits_read_back_as_configured_and_address_space_is_untouched(sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("""
        result['statuses'] = isolation.apply_layers(config)
        for name in ('CORE', 'AS', 'DATA', 'NOFILE', 'FSIZE', 'CPU'):
            result[name] = list(resource.getrlimit(getattr(resource, 'RLIMIT_' + name)))
    """, make_config(sandbox_dirs, data_limit_bytes=3 << 30))
    assert result["statuses"]["rlimits"] == "active"
    assert result["CORE"] == [0, 0]
    assert result["AS"] == list(resource.getrlimit(resource.RLIMIT_AS))  # inherited, never set
    assert result["DATA"] == [3 << 30, 3 << 30]
    assert result["NOFILE"] == [512, 512]
    assert result["FSIZE"] == [1 << 28, 1 << 28]
    assert result["CPU"] == [60, 65]


def test_unset_data_limit_gets_the_default(sandbox_dirs: dict[str, Path]) -> None:
    from sandbox_worker.isolation.rlimits import DEFAULT_DATA_LIMIT_BYTES

    result = run_child("""
        result['statuses'] = isolation.apply_layers(config)
        result['DATA'] = resource.getrlimit(resource.RLIMIT_DATA)[0]
    """, make_config(sandbox_dirs, data_limit_bytes=None))
    assert result["DATA"] == DEFAULT_DATA_LIMIT_BYTES


def test_a_memory_hog_above_the_data_cap_gets_memory_error(sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("""
        result['statuses'] = isolation.apply_layers(config)
        small = bytearray(32 << 20)
        result['small'] = len(small)
        try:
            hog = bytearray(512 << 20)
            result['hog'] = 'allocated'
        except MemoryError:
            result['hog'] = 'MemoryError'
    """, make_config(sandbox_dirs, data_limit_bytes=256 << 20))
    assert result["small"] == 32 << 20
    assert result["hog"] == "MemoryError"


def test_off_mode_applies_nothing(sandbox_dirs: dict[str, Path], listener: socket.socket) -> None:
    result = run_child("""
        before = {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('CORE', 'DATA', 'NOFILE')}
        netns_before = os.stat('/proc/self/ns/net').st_ino
        result['statuses'] = isolation.apply_layers(config)
        after = {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('CORE', 'DATA', 'NOFILE')}
        result['rlimits_unchanged'] = before == after
        result['same_netns'] = netns_before == os.stat('/proc/self/ns/net').st_ino
        result['connect'] = attempt(lambda: connect(args['port']))
        result['write_outside'] = attempt(lambda: write(args['outside'] + '/allowed.txt'))
        result['seccomp'] = open('/proc/self/status').read().split('Seccomp:')[1].split()[0]
    """, make_config(sandbox_dirs, mode="off"),
        {"port": listener.getsockname()[1], "outside": str(sandbox_dirs["outside"])})
    assert result["statuses"] == dict.fromkeys(
        ("stdin", "rlimits", "network", "processes", "filesystem", "seccomp"), "unavailable:isolation off")
    assert result["rlimits_unchanged"] and result["same_netns"]
    assert result["connect"] == "ok"
    assert result["write_outside"] == "ok"
    assert result["seccomp"] == "0"


def test_seccomp_blocks_ptrace_namespaces_and_mounts_but_not_threads_or_subprocesses(
        sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("""
        result['statuses'] = isolation.apply_layers(config)
        call = lambda name, *a: attempt(lambda: syscalls.raw_syscall(name, *a))
        result['ptrace'] = call('ptrace', 2, 0, 0, 0)            # PEEKDATA on pid 0: ESRCH if allowed
        result['unshare'] = call('unshare', 0)                   # a no-op if allowed
        result['clone_newuser'] = call('clone', 0x10000000 | 0x200, 0, 0, 0, 0)  # EINVAL if allowed
        result['clone3'] = call('clone3', 0, 0)                  # EINVAL if allowed
        result['mount'] = call('mount', 0, 0, 0, 0, 0)
        result['bpf'] = call('bpf', 0, 0, 0)
        result['socket_unix'] = attempt(lambda: socket.socketpair()[0].close())
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        result['subprocess'] = subprocess.run(['/bin/sh', '-c', 'exit 3']).returncode
        result['seccomp'] = open('/proc/self/status').read().split('Seccomp:')[1].split()[0]
    """, make_config(sandbox_dirs))
    require_active(result["statuses"], "seccomp")
    assert result["ptrace"] == "EPERM"
    assert result["unshare"] == "EPERM"
    assert result["clone_newuser"] == "EPERM"
    assert result["clone3"] == "ENOSYS"
    assert result["mount"] == "EPERM"
    assert result["bpf"] == "EPERM"
    assert result["socket_unix"] == "ok"
    assert result["subprocess"] == 3
    assert result["seccomp"] == "2"


def test_without_seccomp_layer_those_syscalls_reach_the_kernel(sandbox_dirs: dict[str, Path]) -> None:
    """The control for the test above: the same calls give the kernel's own answers when unfiltered."""
    result = run_child("""
        call = lambda name, *a: attempt(lambda: syscalls.raw_syscall(name, *a))
        result['ptrace'] = call('ptrace', 2, 0, 0, 0)
        result['clone_newuser'] = call('clone', 0x10000000 | 0x200, 0, 0, 0, 0)
        result['clone3'] = call('clone3', 0, 0)
    """, make_config(sandbox_dirs))
    assert result == {"ptrace": "ESRCH", "clone_newuser": "EINVAL", "clone3": "EINVAL"}


def test_network_falls_back_to_seccomp_when_the_process_is_already_threaded(
        sandbox_dirs: dict[str, Path], listener: socket.socket) -> None:
    result = run_child("""
        import time
        gate = threading.Event()
        answers = {}
        def late_socket():
            gate.wait()
            answers['thread_inet'] = attempt(lambda: socket.socket(socket.AF_INET).close())
        thread = threading.Thread(target=late_socket); thread.start()
        result['statuses'] = isolation.apply_layers(config)
        gate.set(); thread.join()
        result.update(answers)
        result['inet'] = attempt(lambda: socket.socket(socket.AF_INET6).close())
        result['connect'] = attempt(lambda: connect(args['port']))
        result['unix'] = attempt(lambda: socket.socket(socket.AF_UNIX).close())
    """, make_config(sandbox_dirs), {"port": listener.getsockname()[1]})
    network = result["statuses"]["network"]
    assert network.startswith("degraded:seccomp inet deny (unshare failed: not single-threaded"), network
    assert result["thread_inet"] == "EPERM"  # TSYNC put the filter on the thread that already existed
    assert result["inet"] == "EPERM"
    assert result["connect"] == "EPERM"
    assert result["unix"] == "ok"
    assert "other threads stay unconfined" in result["statuses"]["filesystem"]
    # a fork would leave the other threads behind: no PID namespace for a threaded process
    assert result["statuses"]["processes"].startswith("unavailable:not single-threaded"), result["statuses"]


def test_a_kernel_without_landlock_or_userns_is_reported_not_raised(sandbox_dirs: dict[str, Path]) -> None:
    """Simulate such a kernel: a filter makes landlock_create_ruleset ENOSYS and unshare EPERM."""
    result = run_child("""
        import errno as E
        from sandbox_worker.isolation import seccomp
        seccomp.install([
            seccomp.Rule(syscalls.syscall_number('landlock_create_ruleset'), seccomp.errno_action(E.ENOSYS)),
            seccomp.Rule(syscalls.syscall_number('unshare'), seccomp.errno_action(E.EPERM)),
        ])
        pid = os.getpid()
        result['statuses'] = isolation.apply_layers(config)
        result['pid_unchanged'] = os.getpid() == pid
        result['create_outside'] = attempt(lambda: write(args['outside'] + '/new.txt'))
    """, make_config(sandbox_dirs), {"outside": str(sandbox_dirs["outside"])})
    statuses = result["statuses"]
    assert statuses["filesystem"].startswith("unavailable:landlock ABI not supported (errno 38"), statuses
    assert statuses["network"].startswith("degraded:seccomp inet deny (unshare failed:"), statuses
    assert "Operation not permitted" in statuses["network"]
    assert statuses["seccomp"] == "active"
    assert statuses["processes"] == "unavailable:unshare: Operation not permitted (EPERM)", statuses
    assert result["pid_unchanged"]  # the worker goes on as the process that was started, as without the layer
    assert result["create_outside"] == "ok"  # nothing pretended to confine


def test_stdin_that_is_not_dev_null_is_reported(sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("result['statuses'] = isolation.apply_layers(config)", make_config(sandbox_dirs),
                       stdin=subprocess.PIPE)
    assert result["statuses"]["stdin"] == "degraded:stdin is a pipe"


def test_a_broken_config_becomes_statuses_not_an_exception(sandbox_dirs: dict[str, Path]) -> None:
    config = make_config(sandbox_dirs)
    del config["scratch_dir"]
    config["open_files"] = "many"
    result = run_child("result['statuses'] = isolation.apply_layers(config)", config)
    statuses = result["statuses"]
    assert statuses["filesystem"].startswith("unavailable:internal error: KeyError"), statuses
    assert statuses["rlimits"].startswith("degraded:nofile:"), statuses
    assert statuses["stdin"] == "active"


def test_network_allowed_by_configuration_is_reported_unavailable(sandbox_dirs: dict[str, Path]) -> None:
    result = run_child("result['statuses'] = isolation.apply_layers(config)", make_config(sandbox_dirs, network=True))
    assert result["statuses"]["network"] == "unavailable:network allowed by configuration"


PROC_SNIPPET = """
    outer = os.getppid()  # pytest: a process outside the worker
    result['statuses'] = isolation.apply_layers(config)
    result['own_comm'] = attempt(lambda: write('/proc/self/task/%d/comm' % threading.get_native_id(), 'worker'))
    child = "import errno\\ntry:\\n open('/proc/self/comm', 'w').write('kid'); print('ok')\\n" \\
            "except OSError as e: print(errno.errorcode[e.errno])"
    result['child_comm'] = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout.strip()
    result['sysctl'] = attempt(lambda: write('/proc/sys/vm/swappiness', open('/proc/sys/vm/swappiness').read()))
    outer_oom = '/proc/%d/oom_score_adj' % outer
    result['outer_oom'] = attempt(lambda: write(outer_oom, open(outer_oom).read()))  # its own value: no CAP needed
"""


def test_a_root_worker_gets_proc_for_cuda_children_but_never_proc_sys(sandbox_dirs: dict[str, Path]) -> None:
    """CUDA writes /proc/<pid>/task/<tid>/comm in every process, children (ncu's target) included; uid 0
    keeps uid 0 in its user namespace, so /proc/sys is bound read-only in the worker's mount namespace."""
    if os.geteuid() != 0:
        pytest.skip("runs as root only")
    result = run_child(PROC_SNIPPET, make_config(sandbox_dirs))
    require_active(result["statuses"], "filesystem")
    require_active(result["statuses"], "processes")
    assert result["own_comm"] == "ok"
    assert result["child_comm"] == "ok"
    assert result["sysctl"] == "EROFS"
    # With /proc/sys guarded a root worker may write all of /proc (landlock.proc_write_scope), but that /proc is
    # its PID namespace's own: processes outside the worker are not in it.
    assert result["outer_oom"] == "ENOENT"


NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # the venv's interpreter may sit where uid 65534 cannot reach it
# Run as the uid in question, so the kernel answers: the first directory above the target that the uid may not
# search, else the target's own refusal to open for reading; prints nothing when the target opens.
READ_AS_UID = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    target = Path(sys.argv[1])
    blocked = [d for d in reversed(target.parents) if not os.access(d, os.X_OK)]
    if blocked:
        print(f"{blocked[0]} is not traversable")
    else:
        try:
            os.close(os.open(target, os.O_RDONLY))
        except OSError as exc:
            print(f"{target}: {exc.strerror}")
""")


def why_uid_cannot_read(uid: int, target: Path) -> str | None:
    """None when `uid` can open `target` for reading, else what stops it (needs root to switch uid)."""
    completed = subprocess.run(
        [SYSTEM_PYTHON, "-c", READ_AS_UID, str(target)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=30, cwd="/", env={"PATH": "/usr/bin:/bin"}, user=uid, group=uid, extra_groups=[],
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip() or None


@pytest.fixture
def world_traversable_dir() -> Path:
    """pytest's tmp_path sits under a 0700 directory that another uid cannot enter."""
    with tempfile.TemporaryDirectory(prefix="tlx-isolation-") as root:
        os.chmod(root, 0o755)
        yield Path(root)


def test_a_non_root_worker_may_write_proc_so_children_can_use_cuda(world_traversable_dir: Path) -> None:
    if os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs root (to switch uid) and a system python3 that uid 65534 can run")
    # the child imports sandbox_worker from this checkout, which may sit under a private (0700) directory
    if why := why_uid_cannot_read(NOBODY, PROJECT_ROOT / "sandbox_worker" / "__init__.py"):
        pytest.skip(f"uid {NOBODY} cannot read the checkout at {PROJECT_ROOT}: {why}")
    tmp_path = world_traversable_dir
    dirs = {"scratch": tmp_path / "scratch", "triton": tmp_path / "scratch" / "triton_cache",
            "tmp": tmp_path / "scratch" / "tmp"}
    for path in dirs.values():
        path.mkdir(exist_ok=True)
        os.chown(path, NOBODY, NOBODY)
    if why := why_uid_cannot_read(NOBODY, dirs["scratch"]):  # TMPDIR may be private too
        pytest.skip(f"uid {NOBODY} cannot reach its scratch at {dirs['scratch']}: {why}")
    code = PRELUDE + textwrap.dedent(PROC_SNIPPET) + "\nprint(json.dumps(result))\n"
    completed = subprocess.run(
        [SYSTEM_PYTHON, "-c", code, json.dumps(make_config(dirs)), "{}"], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=30, cwd=dirs["scratch"],
        env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"}, user=NOBODY, group=NOBODY, extra_groups=[],
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    require_active(result["statuses"], "filesystem")
    require_active(result["statuses"], "processes")
    assert result["own_comm"] == "ok"
    assert result["child_comm"] == "ok"
    assert result["sysctl"] == "EACCES"  # DAC, not Landlock, keeps a non-root worker out of /proc/sys
    assert result["outer_oom"] == "ENOENT"  # the /proc of its PID namespace lists nothing outside the worker
