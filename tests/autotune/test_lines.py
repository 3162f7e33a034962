"""How the choice is said (orchestrator/autotune/lines.py), validate's check, the HTML report's section, and the
text detection of a list to choose from (orchestrator/autotune/detect.py)."""

from __future__ import annotations

import json

from orchestrator.autotune.detect import autotuned_kernels
from orchestrator.autotune.lines import (
    autotune_check,
    choice_line,
    config_text,
    key_text,
    progress_line,
    quiet_line,
    report_lines,
)
from orchestrator.report_html.write import run_page
from protocol.autotune import AutotuneChoice, AutotuneRecord, AutotuneTiming, CompiledAhead, FirstCall
from protocol.completion import CompletionReport
from protocol.worker import AutotuneProgressEvent

CONFIG = {"ir_override": None, "kwargs": {"BLOCK_SIZE": 512}, "maxnreg": None, "num_ctas": 1, "num_stages": 3,
          "num_warps": 4, "ctas_per_cga": [2, 1, 1]}
CHOICE = AutotuneChoice(kernel="add_kernel", key=[2048, "torch.float32"], case_ids=["n2048"],
                        key_values={"dtypes": "float32", "n_elements": 2048}, config=CONFIG, config_index=3,
                        configs_listed=4, configs_tried=4, measured_ms=15.3, seconds=1.6, timer="interpreter_cpu",
                        timings=[AutotuneTiming(config=CONFIG, median_ms=15.3)])
FIRST = FirstCall(case_id="n2048", seconds=2.03, import_seconds=0.39, call_seconds=1.63, what="entry",
                  timer="interpreter_cpu", autotuned=1)
RECORD = AutotuneRecord(kernels=["add_kernel"], choices=[CHOICE], seconds=9.1, untouched_first_call=FIRST,
                        winner_first_call=FIRST.model_copy(update={"seconds": 0.5, "autotuned": 0}),
                        winner_experiment_id="r001-c001")


def test_configurations_and_keys_read_as_a_person_writes_them():
    assert config_text(CONFIG) == "BLOCK_SIZE=512 num_ctas=1 num_stages=3 num_warps=4 ctas_per_cga=(2,1,1)"
    assert key_text(CHOICE.key_values) == "n_elements=2048 dtypes=float32"
    assert choice_line(CHOICE) == (
        "autotune choice kernel=add_kernel key='n_elements=2048 dtypes=float32' cases=n2048 "
        "config='BLOCK_SIZE=512 num_ctas=1 num_stages=3 num_warps=4 ctas_per_cga=(2,1,1)' measured_ms=15.3 tried=4/4 "
        "timer=interpreter_cpu seconds=1.6")


def test_the_report_gives_each_choice_and_the_first_calls_before_and_after():
    lines = report_lines(RECORD)
    assert lines[0].startswith("autotune: add_kernel [n_elements=2048 dtypes=float32] -> BLOCK_SIZE=512 ")
    assert "15.3 ms by the interpreter on the CPU; 4 of 4 configurations tried" in lines[0]
    assert lines[1].startswith("first call, untouched kernel: 2.03 s on case n2048 (load 0.39 s")
    assert "1 key(s) autotuned; the Triton interpreter's figure, not a GPU's" in lines[1]
    assert lines[2].startswith("first call, winner r001-c001: 0.50 s on case n2048") and "no autotune" in lines[2]


def test_a_list_compiled_ahead_on_threads_says_so_while_and_after_it_compiles():
    compiling = AutotuneProgressEvent(kind="autotune_progress", command_id=1, kernel="matmul_kernel_tlx_ws",
                                      key={"M": 4096}, case_id="m4096", configuration=1, of=96, config={},
                                      compiling_threads=8)
    assert progress_line(compiling, 3.0) == ("autotune kernel=matmul_kernel_tlx_ws case=m4096 key='M=4096' "
                                             "progress='compiling 96 configurations on 8 threads' elapsed_s=3.0")
    assert "progress='compiling 96 configurations on 8 threads' elapsed_s=18.0" in quiet_line(compiling, 18.0)
    timing = compiling.model_copy(update={"compiling_threads": None, "configuration": 2, "config": CONFIG})
    assert "progress='configuration 2 of 96' config='BLOCK_SIZE=512 " in progress_line(timing, 20.0)

    ahead = CHOICE.model_copy(update={"compiled_ahead": CompiledAhead(threads=8, seconds=12.34), "timer": "triton"})
    assert choice_line(ahead).endswith("seconds=1.6 compiled_ahead_threads=8 compiled_ahead_s=12.3")
    assert report_lines(RECORD.model_copy(update={"choices": [ahead]}))[0].endswith(
        "1.6 s, compiled ahead on 8 threads in 12.3 s)")
    counted = CHOICE.model_copy(update={"compiled_ahead": CompiledAhead(threads=8, seconds=3.1, configurations=96,
                                                                         compiled=0)})
    assert choice_line(counted).endswith("compiled_ahead_threads=8 compiled_ahead_s=3.1 compiled_ahead=0/96")
    assert report_lines(RECORD.model_copy(update={"choices": [counted]}))[0].endswith(
        "0 of 96 compiled ahead on 8 threads in 3.1 s)")
    failed = CHOICE.model_copy(update={"compiled_ahead": CompiledAhead(failed="RuntimeError: no driver")})
    assert choice_line(failed).endswith("compiled_ahead=failed reason='RuntimeError: no driver'")
    assert "compiled one by one (compiling ahead failed: RuntimeError: no driver))" in report_lines(
        RECORD.model_copy(update={"choices": [failed]}))[0]


def test_an_untouched_first_call_the_deadline_stopped_is_reported_as_longer_than_its_time():
    why = "longer than 60.0 s: stopped at the limit of its measurement (a fresh process pays at least that)"
    record = RECORD.model_copy(update={"untouched_first_call": None, "untouched_first_call_unmeasured": why})
    assert report_lines(record)[1] == f"first call, untouched kernel: {why}"
    assert autotune_check(record).message.endswith(f"; first call {why}")


def test_validates_check_carries_the_record():
    check = autotune_check(RECORD)
    assert check.status == "passed" and "ran once per key in a trusted step" in check.message
    assert AutotuneRecord.model_validate(check.details) == RECORD


def test_the_html_report_shows_the_choice(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"report": {"autotune": RECORD.model_dump(mode="json")}}))
    completion = CompletionReport(
        finished=True, exit_code=0, success=True, output_dir=str(tmp_path), error=None, kernel=None, inputs=None,
        workload=[], device="cpu", backend="cpu", architecture="interpreter", aggregate_speedup=None,
        worst_final_cv=None, max_cv=None, all_protected_correct=None, stopping_reason=None, winner_experiment_id=None,
        best_kernel_path=None, commit=None, commits=[], wall_seconds=None, sources=[])
    page = run_page(completion, tmp_path)
    assert "<h2>The kernel&#x27;s own autotune</h2>" in page
    assert "add_kernel [n_elements=2048 dtypes=float32] -&gt; BLOCK_SIZE=512" in page
    assert "first call, winner r001-c001: 0.50 s" in page


def test_only_a_list_of_more_than_one_configuration_may_autotune():
    header = "import triton\n"
    many = header + ("@triton.autotune(configs=[triton.Config({'B': 1}), triton.Config({'B': 2})], key=['n'])\n"
                     "@triton.jit\ndef k(n, B: tl.constexpr):\n    pass\n")
    one = header + "@triton.autotune([triton.Config({'B': 1})], key=['n'])\n@triton.jit\ndef k(n, B):\n    pass\n"
    built = header + "@triton.autotune(configs=get_configs(), key=['n'])\n@triton.jit\ndef k(n, B):\n    pass\n"
    assert (autotuned_kernels(many), autotuned_kernels(one), autotuned_kernels(built)) == (["k"], [], ["k"])
    assert autotuned_kernels("def broken(:\n") == []
