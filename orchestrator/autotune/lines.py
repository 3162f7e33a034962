"""How a kernel's autotune is said: live-log lines, report lines (pure functions of the records)."""

from __future__ import annotations

from typing import Any

from orchestrator.text import one_line
from protocol.autotune import AutotuneChoice, AutotuneRecord, CompiledAhead, FirstCall
from protocol.lock import CheckResult
from protocol.worker import AutotuneProgressEvent

TIMER_WORDS = {"triton": "the kernel's own benchmarker", "interpreter_cpu": "the interpreter on the CPU"}


def config_parts(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded configuration's kwargs, and every launch option that is set (the rest of `describe_config`)."""
    kwargs = config.get("kwargs") if isinstance(config.get("kwargs"), dict) else {}
    return kwargs, {name: value for name, value in config.items() if name != "kwargs" and value is not None}


def config_text(config: dict[str, Any]) -> str:
    """`BLOCK_SIZE=512 num_warps=4 num_stages=3`: the kwargs, then every launch option that is set."""
    kwargs, options = config_parts(config)
    parts = [*kwargs.items(), *options.items()]  # a kwarg named like a launch option is said twice, as recorded
    return " ".join(f"{name}={_value(value)}" for name, value in parts) or "(no parameters)"


def key_text(key_values: dict[str, Any]) -> str:
    """`n_elements=2048 dtypes=float32,float32,float32`: the key's arguments, then the dtypes Triton adds."""
    ordered = sorted(key_values.items(), key=lambda item: item[0] == "dtypes")
    return " ".join(f"{name}={_value(value)}" for name, value in ordered) or "(no key arguments)"


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ",".join(_value(v) for v in value) + ")"
    return str(value)


def _q(text: str, limit: int = 300) -> str:
    return repr(one_line(text, limit))


def _progress_text(event: AutotuneProgressEvent) -> str:
    if event.compiling_threads:
        return f"compiling {event.of} configurations on {event.compiling_threads} threads"
    return f"configuration {event.configuration} of {event.of}"


def progress_line(event: AutotuneProgressEvent, seconds: float) -> str:
    case = f" case={event.case_id}" if event.case_id else ""
    config = "" if event.compiling_threads else f" config={_q(config_text(event.config))}"
    return (f"autotune kernel={event.kernel}{case} key={_q(key_text(event.key))} "
            f"progress={_q(_progress_text(event))}{config} elapsed_s={seconds:.1f}")


def quiet_line(last: AutotuneProgressEvent | None, seconds: float) -> str:
    if last is None:
        return f"autotune status=running progress='loading and compiling the kernel' elapsed_s={seconds:.1f}"
    case = f" case={last.case_id}" if last.case_id else ""
    return (f"autotune status=running kernel={last.kernel}{case} key={_q(key_text(last.key))} "
            f"progress={_q(_progress_text(last))} elapsed_s={seconds:.1f}")


def choice_text(choice: AutotuneChoice) -> str:
    measured = f"{choice.measured_ms:.4g} ms" if choice.measured_ms is not None else "not timed (one configuration)"
    ahead = choice.compiled_ahead
    compiled = ("" if ahead is None else f", {_ahead_count(ahead)}compiled ahead on {ahead.threads} threads in "
                f"{ahead.seconds:.1f} s" if ahead.failed is None
                else f", compiled one by one (compiling ahead failed: {ahead.failed})")
    return (f"{choice.kernel} [{key_text(choice.key_values)}] -> {config_text(choice.config)} ({measured} by "
            f"{TIMER_WORDS[choice.timer]}; {choice.configs_tried} of {choice.configs_listed} configurations tried, "
            f"{choice.seconds:.1f} s{compiled})")


def choice_line(choice: AutotuneChoice) -> str:
    return (f"autotune choice kernel={choice.kernel} key={_q(key_text(choice.key_values))} "
            f"cases={','.join(choice.case_ids) or '-'} config={_q(config_text(choice.config))} "
            f"measured_ms={choice.measured_ms if choice.measured_ms is not None else 'none'} "
            f"tried={choice.configs_tried}/{choice.configs_listed} timer={choice.timer} seconds={choice.seconds:.1f}"
            + _compiled_ahead_words(choice))


def _compiled_ahead_words(choice: AutotuneChoice) -> str:
    ahead = choice.compiled_ahead
    if ahead is None:
        return ""
    if ahead.failed is not None:
        return f" compiled_ahead=failed reason={_q(ahead.failed)}"
    counted = (f" compiled_ahead={ahead.compiled}/{ahead.configurations}"
               if ahead.compiled is not None and ahead.configurations is not None else "")
    return f" compiled_ahead_threads={ahead.threads} compiled_ahead_s={ahead.seconds:.1f}{counted}"


def _ahead_count(ahead: CompiledAhead) -> str:
    """'96 of 96 ' where the count is known; fewer than listed says the rest compiled (or failed) one by one."""
    if ahead.compiled is None or ahead.configurations is None:
        return ""
    return f"{ahead.compiled} of {ahead.configurations} "


def first_call_text(first: FirstCall) -> str:
    what = "its JUDGE entry" if first.what == "entry" else "the harness's verify"
    figure = "; the Triton interpreter's figure, not a GPU's" if first.timer == "interpreter_cpu" else ""
    tuned = f", {first.autotuned} key(s) autotuned" if first.autotuned else ", no autotune"
    return (f"{first.seconds:.2f} s on case {first.case_id} (load {first.import_seconds:.2f} s, first call through "
            f"{what} {first.call_seconds:.2f} s{tuned}{figure})")


def first_call_line(which: str, first: FirstCall) -> str:
    return (f"first_call kernel={which} case={first.case_id} seconds={first.seconds:.2f} "
            f"load_s={first.import_seconds:.2f} call_s={first.call_seconds:.2f} autotuned={first.autotuned} "
            f"timer={first.timer}")


def report_lines(record: AutotuneRecord) -> list[str]:
    """The report's block: each choice, and first-call latency before and after."""
    lines = [f"autotune: {choice_text(choice)}" for choice in record.choices]
    if not record.choices:
        lines.append(f"autotune: {', '.join(record.kernels) or 'the kernel'} declared an autotune list, but no "
                     "call autotuned (every list was pruned to one configuration)")
    if record.untouched_first_call is not None:
        lines.append(f"first call, untouched kernel: {first_call_text(record.untouched_first_call)}")
    elif record.untouched_first_call_unmeasured:
        lines.append(f"first call, untouched kernel: {record.untouched_first_call_unmeasured}")
    if record.winner_first_call is not None:
        lines.append(f"first call, winner {record.winner_experiment_id}: {first_call_text(record.winner_first_call)}")
    return lines


def autotune_check(record: AutotuneRecord) -> CheckResult:
    """validate's `autotune` check: the step ran once per key; each choice, and the untouched kernel's first call."""
    chosen = "; ".join(choice_text(c) for c in record.choices) or "no call autotuned (lists pruned to one configuration)"
    first = (f"; first call {first_call_text(record.untouched_first_call)}" if record.untouched_first_call else
             f"; first call {record.untouched_first_call_unmeasured}" if record.untouched_first_call_unmeasured else "")
    return CheckResult(name="autotune", status="passed",
                       message=f"the untouched kernel's own autotune ran once per key in a trusted step "
                               f"({record.seconds:.1f} s): {chosen}{first}",
                       details=record.model_dump(mode="json"))
