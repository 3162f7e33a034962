"""The judge loads no Triton file the candidate process could have written after it ran: Triton builds a kernel's
launcher (a C extension) through its file cache and loads whatever sits under the launcher's key, and the
worker's cache is writable by the candidate process. The judge keeps the files it vouches for in memory and
builds and loads launchers in a fresh directory holding only those (`sandbox_worker/judged/kernels.py`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sandbox_worker.harness_kit.profile_kit import build_replay_spec
from sandbox_worker.judged.kernels import KernelLibrary, TrustedTritonCache, _write_folder


def _worker_cache(tmp_path: Path) -> Path:
    cache = tmp_path / "worker" / "triton_cache"
    (cache / "SEEDKEY").mkdir(parents=True)
    (cache / "SEEDKEY" / "cuda_utils.so").write_bytes(b"the run's seed")
    (cache / "SEEDKEY" / "lock").write_text("")
    return cache


def test_the_judge_builds_its_launchers_among_only_the_files_it_captured_before_the_candidate_ran(tmp_path,
                                                                                                   monkeypatch):
    cache = _worker_cache(tmp_path)
    outside = tmp_path / "outside.so"
    outside.write_bytes(b"not in the cache")
    (cache / "LINKED").mkdir()
    (cache / "LINKED" / "link.so").symlink_to(outside)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    trusted = TrustedTritonCache.capture(cache)
    assert trusted.files == {"SEEDKEY/cuda_utils.so": b"the run's seed"}  # no link, no lock file

    # the candidate process then plants a launcher under the key it computed for the judge's next kernel
    (cache / "LAUNCHERKEY").mkdir()
    (cache / "LAUNCHERKEY" / "__triton_launcher.so").write_bytes(b"the candidate's code")
    with trusted.private() as private:
        assert os.environ["TRITON_CACHE_DIR"] == str(private) != str(cache)
        assert sorted(str(p.relative_to(private)) for p in private.rglob("*") if p.is_file()) == \
            ["SEEDKEY/cuda_utils.so"]
        (private / "JUDGEKEY").mkdir()
        (private / "JUDGEKEY" / "__triton_launcher.so").write_bytes(b"built by the judge")  # what Triton builds
    assert os.environ["TRITON_CACHE_DIR"] == str(cache)
    assert not private.exists()
    # the launcher the judge built is kept for its next load and for the ncu child; the planted one never was
    assert trusted.files == {"SEEDKEY/cuda_utils.so": b"the run's seed",
                             "JUDGEKEY/__triton_launcher.so": b"built by the judge"}
    with trusted.private() as private:
        assert (private / "JUDGEKEY" / "__triton_launcher.so").read_bytes() == b"built by the judge"
        assert not (private / "LAUNCHERKEY").exists()
    # what the worker reports for the run's later workers: the judge's own build, not the seed, not the plant
    assert trusted.built_launchers() == {"JUDGEKEY/__triton_launcher.so": b"built by the judge"}
    # a later worker's judge captures that launcher with the seed: it is found built, and not reported again
    (cache / "JUDGEKEY").mkdir()
    (cache / "JUDGEKEY" / "__triton_launcher.so").write_bytes(b"built by the judge")
    (cache / "LAUNCHERKEY" / "__triton_launcher.so").unlink()
    later = TrustedTritonCache.capture(cache)
    assert later.files["JUDGEKEY/__triton_launcher.so"] == b"built by the judge" and later.built_launchers() == {}

    fresh = tmp_path / "ncu-cache"
    trusted.materialize(fresh)
    assert (fresh / "SEEDKEY" / "cuda_utils.so").read_bytes() == b"the run's seed"


def test_without_a_captured_cache_the_private_directory_starts_empty_and_the_variable_is_put_back(tmp_path,
                                                                                                    monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    trusted = TrustedTritonCache.capture(None)
    assert trusted.files == {}
    with trusted.private() as private:
        assert list(private.iterdir()) == []
    assert "TRITON_CACHE_DIR" not in os.environ


def test_the_ncu_childs_kernels_are_written_fresh_from_the_judges_memory(tmp_path):
    library = KernelLibrary(tmp_path / "replay")
    # what `load` keeps of a kernel it loaded (loading needs a GPU; the copy is what is checked here)
    files = {"kernel.json": b'{"name": "add_kernel"}', "kernel.cubin": b"\x7fELF the binary",
             "signature.json": b'{"x": "*fp32"}'}
    _write_folder(library.directory / "abc123", files)
    library.files["abc123"] = files
    # the candidate process rewrites the binary in the library's folder and plants a link for the export
    (library.directory / "abc123" / "kernel.cubin").write_bytes(b"the candidate's binary")
    export = tmp_path / "ncu-kernels"
    export.mkdir()
    (export / "abc123").symlink_to(tmp_path / "replay" / "abc123")
    library.export(export)
    assert not (export / "abc123").is_symlink()
    assert (export / "abc123" / "kernel.cubin").read_bytes() == b"\x7fELF the binary"
    assert (library.directory / "abc123" / "kernel.cubin").read_bytes() == b"the candidate's binary"


def test_the_ncu_childs_spec_names_fresh_copies_written_from_the_judges_memory(tmp_path):
    from types import SimpleNamespace

    from sandbox_worker.judged.gpu_judge import GpuJudge
    from sandbox_worker.judged.replay import parse_record

    kernel = "a" * 64
    trusted = TrustedTritonCache({"SEEDKEY/cuda_utils.so": b"the run's seed",
                                  "JUDGEKEY/__triton_launcher.so": b"built by the judge"})
    library = KernelLibrary(tmp_path / "replay", trusted_cache=trusted)
    files = {"kernel.json": b'{"name": "add_kernel"}', "kernel.cubin": b"\x7fELF the binary",
             "signature.json": b'{"x": "*fp32"}'}
    _write_folder(library.directory / kernel, files)
    library.files[kernel] = files
    (library.directory / kernel / "kernel.cubin").write_bytes(b"the candidate's binary")  # written while it ran
    recording = parse_record({"steps": [{"launch": kernel, "grid": [1, 1, 1], "arguments": [{"input": 0, "offset": 0}]}],
                              "buffers": [], "outputs": [{"input": 0, "offset": 0, "shape": [4], "stride": [1],
                                                          "dtype": "float32"}],
                              "torch_work": [], "data_dependent": []}, inputs=1)
    judge = GpuJudge(spec=None, target={"backend": "cuda"}, kernel_path="kernel.py", process=None,  # type: ignore[arg-type]
                     library=library, harness_path=str(tmp_path / "harness.py"))
    spec = judge._ncu_replay(SimpleNamespace(recording=recording), {"case_id": "a"},  # type: ignore[arg-type]
                             {"artifacts_dir": str(tmp_path / "artifacts")})
    assert spec is not None and spec["kernels"] == [kernel]
    kernels_dir, cache_dir = Path(spec["kernels_dir"]), Path(spec["triton_cache_dir"])
    assert kernels_dir != library.directory
    assert (kernels_dir / kernel / "kernel.cubin").read_bytes() == b"\x7fELF the binary"
    assert (cache_dir / "JUDGEKEY" / "__triton_launcher.so").read_bytes() == b"built by the judge"
    assert (cache_dir / "SEEDKEY" / "cuda_utils.so").read_bytes() == b"the run's seed"
    assert parse_record(json.loads(Path(spec["record_path"]).read_text()), inputs=1) == recording
    # the profile step accepts the judge's spec as it is and passes the cache folder on to the ncu child
    (tmp_path / "harness.py").write_text("JUDGE = None\n")
    child_spec, why_not = build_replay_spec(spec, case={"case_id": "a"}, seed=7, artifacts_dir=tmp_path)
    assert why_not is None and child_spec is not None
    assert child_spec["triton_cache_dir"] == spec["triton_cache_dir"]


def test_a_judge_reports_its_launchers_within_one_protocol_line(tmp_path):
    """The `finished` event is one protocol line (4 MiB): the judge reports at most 16 launchers and 2 MiB of
    them, and the event that carries them is one the orchestrator accepts."""
    from protocol.worker import MAX_LINE_BYTES, FinishedEvent
    from sandbox_worker.judged.gpu_judge import GpuJudge

    judge = object.__new__(GpuJudge)  # a judge's launchers need no GPU to be reported
    for size, count, reported_count in ((300_000, 20, 5), (20_000, 40, 16)):
        trusted = TrustedTritonCache()
        trusted.files = {f"KEY{i:02d}/__triton_launcher.so": b"\x7fELF" * (size // 4) for i in range(count)}
        judge.library = KernelLibrary(tmp_path / "replay", trusted_cache=trusted)
        reported = judge.built_launchers()
        assert len(reported) == reported_count
        event = FinishedEvent(kind="finished", launchers=reported)
        assert len(event.model_dump_json()) < MAX_LINE_BYTES // 2


def test_a_worker_whose_judge_cannot_report_its_launchers_still_finishes():
    """Launchers are a saving for later workers: a report that fails leaves the `finished` event without them."""
    from sandbox_worker.server import Worker

    class JudgeWithoutItsLibrary:  # what a judge whose library never loaded answers
        def built_launchers(self) -> dict[str, str]:
            raise AttributeError("'GpuJudge' object has no attribute 'library'")

    worker = object.__new__(Worker)
    worker.judge = JudgeWithoutItsLibrary()
    assert worker._launchers() == {}
    worker.judge = None  # a worker that never started a judge
    assert worker._launchers() == {}
