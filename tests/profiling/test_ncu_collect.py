"""ncu argv construction and collection diagnostics, with fake `ncu` executables on PATH."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sandbox_worker.harness_kit.ncu import (
    DEEP_SECTIONS,
    SUMMARY_SECTIONS,
    classify_ncu_output,
    collect_ncu_profile,
    ncu_command,
    ncu_import_command,
)


def test_ncu_command_summary_argv():
    argv = ncu_command(kernel_name="add_kernel", level="summary", export_path="/abs/art/ncu",
                       target_argv=["/usr/bin/python3", "-m", "replay", "--spec", "/abs/art/spec.json"],
                       launch_skip=2, launch_count=3)
    assert argv[0] == "ncu"
    head = argv[: argv.index("--export")]
    pairs = dict(zip(head[1::2], head[2::2], strict=False))
    assert pairs["--clock-control"] == "none"
    assert pairs["--target-processes"] == "all"
    assert pairs["--kernel-name-base"] == "function"
    assert pairs["--kernel-name"] == "regex:^add_kernel$"
    assert pairs["--launch-skip"] == "2" and pairs["--launch-count"] == "3"
    assert pairs["--profile-from-start"] == "off"
    sections = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--section"]
    assert tuple(sections) == SUMMARY_SECTIONS
    assert "--metrics" not in argv
    export = argv.index("--export")
    assert argv[export + 1: export + 3] == ["/abs/art/ncu", "--force-overwrite"]
    assert argv[-5:] == ["/usr/bin/python3", "-m", "replay", "--spec", "/abs/art/spec.json"]


def test_ncu_command_deep_adds_sections_metrics_and_escapes_names():
    argv = ncu_command(kernel_name="k.v2", level="deep", export_path="/x/ncu", target_argv=["py"],
                       profile_from_start=True, extra_metrics=["a.sum", "b.pct"], ncu_binary="/opt/ncu")
    sections = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--section"]
    assert tuple(sections) == DEEP_SECTIONS
    assert {"WarpStateStats", "SchedulerStats", "ComputeWorkloadAnalysis", "SourceCounters"} <= set(sections)
    assert argv[0] == "/opt/ncu"
    assert argv[argv.index("--kernel-name") + 1] == r"regex:^k\.v2$"
    assert argv[argv.index("--metrics") + 1] == "a.sum,b.pct"
    assert "--profile-from-start" not in argv
    custom = ncu_command(kernel_name="k", level="summary", export_path="/x", target_argv=["py"],
                         kernel_regex="^k(_v[0-9])?$")
    assert custom[custom.index("--kernel-name") + 1] == "regex:^k(_v[0-9])?$"


@pytest.mark.parametrize("bad", [{"level": "full"}, {"launch_count": 0}, {"launch_skip": -1}, {"target_argv": []}])
def test_ncu_command_rejects_bad_arguments(bad):
    arguments = {"kernel_name": "k", "level": "summary", "export_path": "/x", "target_argv": ["py"], **bad}
    with pytest.raises(ValueError):
        ncu_command(**arguments)


def test_ncu_import_command():
    assert ncu_import_command(report_path="/a/r.ncu-rep", metrics=["m1", "m2"]) == [
        "ncu", "--import", "/a/r.ncu-rep", "--page", "raw", "--csv", "--print-units", "base", "--metrics", "m1,m2"]


def test_classify_does_not_trust_exit_status_zero():
    status, diagnostics = classify_ncu_output(0, "==WARNING== No kernels were profiled.\n", kernel_filter="regex:^k$")
    assert status == "no_kernel" and "regex:^k$" in diagnostics[0]
    assert classify_ncu_output(0, "==PROF== Report: x.ncu-rep") == ("ok", [])
    assert classify_ncu_output(None, "")[0] == "timeout"
    status, diagnostics = classify_ncu_output(1, "==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
    assert status == "library_not_loaded"
    status, diagnostics = classify_ncu_output(7, "[tlx-ncu-replay] error: harness build failed in the replay: x")
    assert status == "failed" and "harness build failed" in diagnostics[0] and "status 7" in diagnostics[0]


def _spec(tmp_path: Path) -> dict:
    harness = tmp_path / "harness.py"
    harness.write_text("def build(s, t):\n    return s\n")
    return {"harness_path": str(harness), "kernel_path": str(harness), "case": {"case_id": "c"}, "seed": 1,
            "entry": "run_case", "warmup_calls": 3, "profiled_calls": 1, "gate": "cuda_profiler_api"}


def _null_result(result: dict) -> None:
    assert result["available"] is False
    assert result["summary"]["duration_us"] is None
    assert all(value is None for value in result["summary"].values())


def test_missing_ncu_on_path(tmp_path, monkeypatch):
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = collect_ncu_profile(kernel_name="k", level="summary", artifacts_dir=str(tmp_path / "art"),
                                 replay_spec=_spec(tmp_path))
    _null_result(result)
    assert any("ncu not found on PATH" in line for line in result["diagnostics"])


def test_refused_counters(tmp_path, fake_ncu):
    fake_ncu("sys.stderr.write('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
             "NVIDIA GPU Performance Counters\\n')\nsys.exit(1)\n")
    artifacts = tmp_path / "art"
    result = collect_ncu_profile(kernel_name="k", level="summary", artifacts_dir=str(artifacts),
                                 replay_spec=_spec(tmp_path))
    _null_result(result)
    assert result["status"] == "counters_refused"
    assert any("ERR_NVGPUCTRPERM" in line for line in result["diagnostics"])
    for key in ("ncu_collect_command", "ncu_collect_stdout", "ncu_collect_stderr", "ncu_replay_spec"):
        path = Path(result["artifacts"][key])
        assert path.is_absolute() and path.is_file(), key
    assert "ERR_NVGPUCTRPERM" in Path(result["artifacts"]["ncu_collect_stderr"]).read_text()
    command = json.loads(Path(result["artifacts"]["ncu_collect_command"]).read_text())
    assert command["argv"][command["argv"].index("--export") + 1] == str(artifacts / "ncu")
    assert command["argv"][-5:-2] == [command["argv"][-5], "-m", "sandbox_worker.harness_kit.ncu_replay"]


def test_no_kernel_profiled(tmp_path, fake_ncu):
    fake_ncu("print('==PROF== Connected to process 1')\nprint('==WARNING== No kernels were profiled.')\nsys.exit(0)\n")
    result = collect_ncu_profile(kernel_name="missing_kernel", level="deep", artifacts_dir=str(tmp_path / "art"),
                                 replay_spec=_spec(tmp_path))
    _null_result(result)
    assert result["status"] == "no_kernel"
    assert any("profiled no kernel" in line and "missing_kernel" in line for line in result["diagnostics"])
    assert result["stalls"] is not None and all(v is None for v in result["stalls"].values())


def test_timeout_kills_the_collection(tmp_path, fake_ncu):
    fake_ncu("time.sleep(60)\n")
    started = time.monotonic()
    result = collect_ncu_profile(kernel_name="k", level="summary", artifacts_dir=str(tmp_path / "art"),
                                 replay_spec=_spec(tmp_path), timeout_s=1.0)
    assert time.monotonic() - started < 20
    _null_result(result)
    assert result["status"] == "timeout"


SUCCESS_BODY = """
if '--import' in argv:
    sys.stdout.write(open({csv!r}).read())
    sys.exit(0)
export = argv[argv.index('--export') + 1]
shutil.copy({report!r}, export + '.ncu-rep')
print('==PROF== Profiling "add_kernel": 0%....50%....100% - 11 passes')
print('==PROF== Report: ' + export + '.ncu-rep')
"""


def test_successful_collection_parses_the_import(tmp_path, fake_ncu, fixtures):
    log = fake_ncu(SUCCESS_BODY.format(csv=str(fixtures / "h200_vector_add.raw.csv"),
                                       report=str(fixtures / "h200_vector_add.ncu-rep")))
    result = collect_ncu_profile(kernel_name="add_kernel", level="summary", artifacts_dir=str(tmp_path / "art"),
                                 replay_spec=_spec(tmp_path))
    assert result["available"] is True and result["status"] == "ok"
    assert result["summary"]["duration_us"] == pytest.approx(44.736)
    assert result["summary"]["dram_throughput_pct"] is None
    assert any("dram__throughput" in line for line in result["diagnostics"])
    for key in ("ncu_report", "ncu_raw_csv", "ncu_import_command", "ncu_import_stderr"):
        assert Path(result["artifacts"][key]).is_file(), key
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 2
    collect, imported = calls
    assert "--metrics" in collect and "gpu__time_duration.sum" in collect[collect.index("--metrics") + 1]
    assert imported[:2] == ["--import", result["artifacts"]["ncu_report"]]
    assert imported[imported.index("--print-units") + 1] == "base"


def test_rejected_metric_is_retried_with_sections_only(tmp_path, fake_ncu, fixtures):
    body = ("if '--metrics' in argv and '--import' not in argv:\n"
            "    sys.stderr.write('==ERROR== Failed to find metric bogus__metric\\n')\n"
            "    sys.exit(1)\n") + SUCCESS_BODY.format(csv=str(fixtures / "h200_vector_add.raw.csv"),
                                                     report=str(fixtures / "h200_vector_add.ncu-rep"))
    log = fake_ncu(body)
    result = collect_ncu_profile(kernel_name="add_kernel", level="summary", artifacts_dir=str(tmp_path / "art"),
                                 replay_spec=_spec(tmp_path))
    assert result["available"] is True
    assert any("rejected a requested metric" in line for line in result["diagnostics"])
    assert any("retried with sections only" in line for line in result["diagnostics"])
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 3 and "--metrics" not in calls[1]


def test_relative_artifacts_dir_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        collect_ncu_profile(kernel_name="k", level="summary", artifacts_dir="relative/dir", replay_spec=_spec(tmp_path))
