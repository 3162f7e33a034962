"""Manifests: JSON and TOML, options as optimize's flags, and one clear error (exit 1) for a bad one."""

from __future__ import annotations

import json

import pytest

from orchestrator.batch.manifest import ManifestError, load_manifest
from orchestrator.cli.main import _add_optimize_arguments, main
from protocol.bundle import GPU_BACKENDS
from sandbox_worker.harness_kit import entry_point
from tests.batch.conftest import make_bundle, write_manifest

TOML_MANIFEST = """
[defaults.options]
provider = "replay"
max_total_seconds = 60
no_commit_winner = true

[[jobs]]
job_id = "vector-add"
kernel = "kernels/add.py"
harness = "bundles/add/harness.py"
cases = "bundles/add/cases.json"
target = "/abs/target.json"
bundle_lock = "bundles/add/bundle.lock.json"
options = { replay_dir = "cands", max_total_seconds = 30, profile = false }
"""


def test_toml_jobs_resolve_against_the_manifest_folder(tmp_path):
    path = tmp_path / "batch.toml"
    path.write_text(TOML_MANIFEST)
    manifest, [job] = load_manifest(path, _add_optimize_arguments)
    assert manifest.jobs[0].job_id == job.job_id == "vector-add"
    args = list(job.optimize_args)
    pairs = dict(zip(args, [*args[1:], None], strict=True))
    assert pairs["--kernel"] == str(tmp_path / "kernels/add.py")
    assert pairs["--target"] == "/abs/target.json"
    assert pairs["--bundle-lock"] == str(tmp_path / "bundles/add/bundle.lock.json")
    assert pairs["--replay-dir"] == str(tmp_path / "cands")  # a path option, found from optimize's parser
    assert pairs["--provider"] == "replay"
    assert args.count("--max-total-seconds") == 1 and pairs["--max-total-seconds"] == "30"  # the job's own wins
    assert "--no-commit-winner" in args and "--no-profile" in args  # false picks the opposite switch
    assert job.cwd == str(tmp_path) and job.needs_gpu is False  # its target.json is unreadable: a CPU lane


def test_a_cuda_target_needs_a_gpu(tmp_path):
    cuda = make_bundle(tmp_path, "g", [], backend="cuda")
    cpu = make_bundle(tmp_path, "c", [])
    _, jobs = load_manifest(write_manifest(tmp_path, [cuda, cpu]), _add_optimize_arguments)
    assert [(job.job_id, job.needs_gpu) for job in jobs] == [("g", True), ("c", False)]


JOB = {"job_id": "a", "kernel": "k.py", "harness": "h.py", "cases": "c.json", "target": "t.json"}


@pytest.mark.parametrize(("document", "suffix", "expected"), [
    ({"jobs": [{**JOB, "options": {"max_total_secs": 5}}]}, ".json",
     r"jobs\[0\] \(job 'a'\): option 'max_total_secs' is not an optimize option"),
    ({"jobs": [JOB, {**JOB, "job_id": "b", "options": {"provider": "gpt"}}]}, ".json",
     r"jobs\[1\] \(job 'b'\): argument --provider: invalid choice: 'gpt'"),
    ({"jobs": [{**JOB, "options": {"max_total_seconds": "soon"}}]}, ".json",
     r"job 'a'\): argument --max-total-seconds: invalid float value: 'soon'"),
    ({"jobs": [{**JOB, "options": {"no_commit_winner": "yes"}}]}, ".json",
     r"option 'no_commit_winner' is a switch: give true or false"),
    ({"jobs": [{**JOB, "options": {"output_dir": "x"}}]}, ".json", r"option 'output_dir' is set by the batch"),
    ({"jobs": [{**JOB, "options": {"resume": "x"}}]}, ".json", r"option 'resume' is refused: a job starts"),
    ({"jobs": [{k: v for k, v in JOB.items() if k != "kernel"}]}, ".json",
     r"jobs\[0\] \(job 'a'\): field 'kernel': Field required"),
    ({"jobs": [JOB, {**JOB, "job_id": "b", "harnes": "h.py"}]}, ".json",
     r"jobs\[1\] \(job 'b'\): field 'harnes': Extra inputs are not permitted"),
    ({"jobs": [JOB, JOB]}, ".json", r"field 'jobs': Value error, job_id 'a' appears twice"),
    ({"jobs": [{**JOB, "job_id": "../escape"}]}, ".json", r"field 'job_id': String should match pattern"),
    ({"jobs": []}, ".json", r"field 'jobs': List should have at least 1 item"),
    ("[[jobs]\njob_id = 'a'", ".toml", r"not valid TOML"),
])
def test_a_bad_manifest_is_one_error_naming_file_job_and_field(tmp_path, capsys, document, suffix, expected):
    path = tmp_path / f"manifest{suffix}"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    with pytest.raises(ManifestError, match=expected) as caught:
        load_manifest(path, _add_optimize_arguments)
    assert str(caught.value).startswith(f"manifest {path}: ")
    # the command: exit 1, the error document on stdout, nothing written
    out = tmp_path / "out"
    assert main(["batch", str(path), "--output-dir", str(out)]) == 1
    document_printed = json.loads(capsys.readouterr().out)
    assert document_printed == {"success": False, "exit_code": 1, "error": str(caught.value)}
    assert not out.exists()


def test_a_missing_manifest_and_a_non_empty_output_dir_are_refused(tmp_path, capsys):
    assert main(["batch", str(tmp_path / "nope.toml"), "--output-dir", str(tmp_path / "out")]) == 1
    assert "cannot read it" in json.loads(capsys.readouterr().out)["error"]
    manifest = write_manifest(tmp_path, [make_bundle(tmp_path, "a", [])])
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("someone else's")
    assert main(["batch", str(manifest), "--output-dir", str(used)]) == 1
    assert "pass --resume" in json.loads(capsys.readouterr().out)["error"]
    assert main(["batch", str(manifest), "--output-dir", str(used), "--resume"]) == 1
    assert "has no batch.json to resume" in json.loads(capsys.readouterr().out)["error"]
    assert sorted(p.name for p in used.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(("flags", "expected"), [
    (["--engine", "dask"], "--engine dask needs --scheduler"),
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler applies to --engine dask only"),
    (["--engine", "dask", "--scheduler", "tcp://h:1", "--gpus", "0"], "--gpus and --parallel apply to --engine local"),
    (["--parallel", "0"], "--parallel must be at least 1"),
    (["--gpus", "0,x"], "--gpus takes indices like 0,1"),
])
def test_bad_engine_arguments_are_refused(tmp_path, capsys, flags, expected):
    manifest = write_manifest(tmp_path, [make_bundle(tmp_path, "a", [])])
    assert main(["batch", str(manifest), "--output-dir", str(tmp_path / "out"), *flags]) == 1
    assert expected in json.loads(capsys.readouterr().out)["error"]
    assert not (tmp_path / "out").exists()


def test_schema_prints_the_manifest_and_the_summary(capsys):
    assert main(["schema"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert schemas["batch_manifest"]["title"] == "BatchManifest"
    assert schemas["batch.json"]["title"] == "BatchSummary"
    job_fields = schemas["batch.json"]["$defs"]["JobSummary"]["properties"]
    assert {"status", "exit_code", "speedup", "gpu", "node", "attempts", "error"} <= set(job_fields)



def test_a_gpu_lane_is_for_the_backends_whose_workers_run_on_a_gpu(tmp_path):
    # the orchestrator, the batch and the stdlib-only worker agree on which backends those are
    assert entry_point.GPU_BACKENDS == GPU_BACKENDS
    bundles = [make_bundle(tmp_path, name, [], backend=backend)
               for name, backend in (("nv", "NVIDIA"), ("hip", "hip"), ("cpu", "cpu"))]
    _, jobs = load_manifest(write_manifest(tmp_path, bundles), _add_optimize_arguments)
    assert [(job.job_id, job.needs_gpu) for job in jobs] == [("nv", True), ("hip", False), ("cpu", False)]
