"""`tlx-agent` command line: optimize (default), validate, init-bundle, schema, doctor, simulate, report, skill,
batch.

stdout carries exactly one JSON document (optimize: the run's summary, with the path of the full result.json;
or the error document); stderr carries the live log. Exit codes (protocol/outcome.py, one table for every
subcommand): 0 winner promoted and revalidated; 2 no qualifying winner; 3 commit failed; 1 invalid input or
internal error; 130 interrupted (4, human review, is reserved and not returned yet). `validate` prints
bundle.lock.json and exits 0 only when every check passed, 1 otherwise (the failed checks are named on stderr
and in the lock). `batch` exits 0 every job improved, 2 none did, 5 some did, 1 invalid manifest or output dir
(orchestrator/cli/batch.py).

Every parser refuses abbreviated flags (`--max-round` is not `--max-rounds`), every flag has help text and
says its default (`tests/cli/test_parser.py`), and README.md's flag table is generated from these parsers.
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from orchestrator.cli import report, simulate, skill
from orchestrator.cli.output import emit, fail
from protocol.bundle import INTERPRETER_BUDGET, Budget, BundleError
from protocol.commands import DoctorOutput
from protocol.outcome import ExitCode

THIS_PYTHON = "the interpreter running tlx-agent"  # how help text names the default sys.executable
INTERPRETER_CV_NOTE = f" (CPU interpreter targets: {INTERPRETER_BUDGET['max_cv']})"
SUBCOMMANDS = ("optimize", "validate", "init-bundle", "schema", "doctor", "simulate", "report", "skill", "batch")


class UsageError(Exception):
    pass


def parse_recorded_command(argv: list[str]) -> argparse.Namespace:
    """A command recorded in run.json, parsed again (for --resume); bad usage is a ValueError."""
    try:
        return build_parser().parse_args(argv)
    except UsageError as exc:
        raise ValueError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; our contract says invalid input is exit 1 with one line. No abbreviations:
    a flag typed short of its name is an error, not a guess."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def package_version() -> str:
    try:
        return metadata.version("tlx-agent")
    except metadata.PackageNotFoundError:  # a checkout run with `python -m orchestrator.cli`, not installed
        return "unknown (not installed)"


def _confidence(text: str) -> float:
    value = float(text)
    if not 0.5 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0.5 and 1 (exclusive), e.g. 0.99")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Budget()
    inputs = parser.add_argument_group("inputs (required unless --resume)")
    inputs.add_argument("--resume", type=Path, metavar="OUT",
                        help="continue the run whose output directory is OUT (its orchestrator died); every input and "
                             "setting comes from OUT/run.json and OUT/bundle/; only --max-total-seconds and "
                             "--max-rounds may be given with it (docs/resume.md)")
    inputs.add_argument("--kernel", type=Path, metavar="FILE", help="complete kernel source file")
    inputs.add_argument("--harness", type=Path, metavar="FILE", help="bundle harness.py")
    inputs.add_argument("--cases", type=Path, metavar="FILE", help="bundle cases.json")
    inputs.add_argument("--target", type=Path, metavar="FILE", help="bundle target.json")
    inputs.add_argument("--output-dir", type=Path, metavar="DIR", help="fresh (empty or new) artifact directory")
    inputs.add_argument("--budget", type=Path, metavar="FILE",
                        help="budget.json overriding the numeric flags key by key (optional)")
    inputs.add_argument("--reference-kernel", type=Path, metavar="FILE",
                        help="trusted reference implementation, frozen into the bundle (optional)")
    inputs.add_argument("--prior-run", type=Path, metavar="DIR",
                        help="earlier output dir: its source hashes and evidence, read-only (optional)")
    gen = parser.add_argument_group("candidate generation")
    gen.add_argument("--provider", choices=("tune", "replay", "openai", "anthropic", "codex", "claude"),
                     default="tune", help="candidate generator (default: %(default)s, the offline tuner; README: "
                                          "Choosing a generator)")
    gen.add_argument("--replay-dir", type=Path, metavar="DIR",
                     help="directory of candidates 001.py, 002.py, ... for --provider replay")
    gen.add_argument("--model", help="model name passed to the provider (never invented; default: the provider's own)")
    gen.add_argument("--base-url", metavar="URL", help="endpoint for openai (default: OPENAI_BASE_URL) or anthropic and claude "
                                        "(default: ANTHROPIC_BASE_URL)")
    budget = parser.add_argument_group("budget")
    budget.add_argument("--max-rounds", type=int, metavar="N",
                        help=f"rounds of candidates: default {defaults.max_rounds}")
    budget.add_argument("--candidates-per-round", type=int, metavar="N",
                        help=f"candidates asked for per round: default {defaults.candidates_per_round}")
    budget.add_argument("--max-candidate-seconds", type=float, metavar="S",
                        help=f"deadline of one evaluation's worker: default {defaults.max_candidate_seconds:g}")
    budget.add_argument("--max-total-seconds", type=float, metavar="S",
                        help=f"the whole run, the built-in preflight and revalidation included: default "
                             f"{defaults.max_total_seconds:g}")
    budget.add_argument("--min-speedup", type=float, metavar="X",
                        help="weighted geometric-mean speedup over the incumbent a candidate needs: default "
                             f"{defaults.min_speedup}")
    budget.add_argument("--max-cv", type=float, metavar="CV",
                        help=f"largest per-case timing CV: default {defaults.max_cv}{INTERPRETER_CV_NOTE}")
    budget.add_argument("--benchmark-repetitions", type=int, metavar="N",
                        help=f"samples each benchmark takes at least: default {defaults.benchmark_repetitions}")
    budget.add_argument("--max-case-regression", type=float, metavar="FRACTION",
                        help="reject a candidate when a protected case's speedup has its upper confidence bound "
                             f"below 1 - FRACTION, whatever the aggregate: default {defaults.max_case_regression:g} "
                             "(target.json may set it; 1 turns it off)")
    budget.add_argument("--max-autotune-seconds", type=float, metavar="S",
                        help="a kernel that autotunes itself: its own autotune runs once per key, before any "
                             "candidate, within this many seconds (compiles included; docs/autotune.md): default "
                             f"{defaults.max_autotune_seconds:g}")
    measure = parser.add_argument_group("measurement and profiling")
    measure.add_argument("--profile", dest="profile", action="store_true", default=True,
                         help="collect Proton and native profiles (default: on)")
    measure.add_argument("--no-profile", dest="profile", action="store_false",
                         help="no profiles: faster, and the profile veto and evidence checks have nothing to judge")
    measure.add_argument("--diagnostic-instrumentation", action="store_true",
                         help="also collect diagnostic-only Proton intra-kernel traces for the baseline and the "
                              "finalist (never benchmarked, promoted or committed)")
    measure.add_argument("--schedule", default="aba",
                         help="measurement order per candidate: a = incumbent, b = candidate (default %(default)s)")
    measure.add_argument("--confirm-runs", type=int, default=2, metavar="PAIRS",
                         help="when only the noise test stands in a candidate's way, measure up to this many more "
                              "candidate/incumbent pairs before deciding (default %(default)s, 0 = off)")
    measure.add_argument("--triage", dest="triage", action="store_true", default=True,
                         help="measure a candidate first and reject it on that one run when it is slower than the "
                              "incumbent's last run beyond a 3%% margin and the run's noise (default: on); any other "
                              "candidate is measured again side by side (see --reuse-incumbent-run)")
    measure.add_argument("--no-triage", dest="triage", action="store_false",
                         help="measure every candidate in --schedule's order from its first run")
    measure.add_argument("--reuse-incumbent-run", dest="reuse_incumbent_run", action="store_true", default=True,
                         help="with triage, decide a candidate its first run does not reject on the incumbent's "
                              "last run (the one triage compared it with), its own run and one more incumbent run: "
                              "an A/B/A in the order they ran, two workers instead of three (default: on)")
    measure.add_argument("--no-reuse-incumbent-run", dest="reuse_incumbent_run", action="store_false",
                         help="with triage, measure the incumbent and the candidate once more after its first run "
                              "(candidate/incumbent/candidate)")
    measure.add_argument("--overlap-compile-ahead", dest="overlap_compile_ahead", action="store_true", default=True,
                         help="on a GPU target, compile every candidate of a round ahead on the host from the "
                              "round's start, so a later candidate's compile runs while earlier ones are measured "
                              "(default: on)")
    measure.add_argument("--no-overlap-compile-ahead", dest="overlap_compile_ahead", action="store_false",
                         help="compile each candidate ahead only when its turn comes, with nothing else running")
    measure.add_argument("--confidence", type=_confidence, default=0.99,
                         help="one-sided confidence of the promotion test and of each case's bound (default "
                              "%(default)s)")
    measure.add_argument("--arch", help="expected architecture (h200, h100, hopper, sm_90, b200, cpu, ...; default: "
                                        "not checked)")
    preflight = parser.add_argument_group("bundle preflight")
    preflight.add_argument("--bundle-lock", type=Path, metavar="FILE",
                           help="bundle.lock.json from `tlx-agent validate`; every locked file must still match")
    preflight.add_argument("--skip-validation", action="store_true",
                           help="experts: skip the built-in preflight (recorded in run.json)")
    _add_sandbox_arguments(parser)
    sandbox = parser.add_argument_group("worker start")
    sandbox.add_argument("--worker-start", choices=("fresh", "forkserver"), default="forkserver",
                         help="how workers start (default: %(default)s): forked by a per-run fork server that "
                              "imported torch and triton once (0.32 s instead of 5.9 s to ready on the H200, the "
                              "judge on; docs/tuner.md), or a fresh interpreter each; every isolation layer is "
                              "applied in each worker either way")
    vcs = parser.add_argument_group("commit")
    vcs.add_argument("--vcs", choices=("auto", "git", "hg"), default="auto",
                     help="version control of the kernel's checkout (default: %(default)s, detected from the "
                          "kernel's path)")
    vcs.add_argument("--commit-message", help="subject of promotion commits (default: the candidate's change line)")
    vcs.add_argument("--commit-winner", dest="commit_winner", action="store_true", default=True,
                     help="commit the revalidated winner to the kernel's checkout (default: on)")
    vcs.add_argument("--no-commit-winner", dest="commit_winner", action="store_false",
                     help="write artifacts only, commit nothing")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def _add_sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    sandbox = parser.add_argument_group("sandbox")
    sandbox.add_argument("--isolation", choices=("strict", "standard", "off"), default="standard",
                         help="worker isolation (default: %(default)s): strict refuses to run unless every layer "
                              "is active; standard uses what this machine supports; off applies none (see "
                              "`tlx-agent doctor`)")
    sandbox.add_argument("--worker-python", default=sys.executable,
                         help=f"interpreter for workers (default: {THIS_PYTHON})")
    sandbox.add_argument("--data-limit-gib", type=_positive, default=None,
                         help="RLIMIT_DATA for workers in GiB (default: no limit)")


def _add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Budget()
    inputs = parser.add_argument_group("inputs")
    inputs.add_argument("--kernel", type=Path, required=True, help="complete kernel source file (left untouched)")
    inputs.add_argument("--harness", type=Path, required=True, help="bundle harness.py")
    inputs.add_argument("--cases", type=Path, required=True, help="bundle cases.json")
    inputs.add_argument("--target", type=Path, required=True, help="bundle target.json")
    inputs.add_argument("--output-dir", type=Path,
                        help="fresh directory for bundle.lock.json and worker logs (default: a new temp dir)")
    inputs.add_argument("--budget", type=Path, help="budget.json (its max_cv/benchmark_repetitions apply)")
    inputs.add_argument("--reference-kernel", type=Path, help="reference implementation, hashed into the lock")
    checks = parser.add_argument_group("checks")
    checks.add_argument("--max-cv", type=float,
                        help="largest within-worker CV and between-worker median spread per case: default "
                             f"{defaults.max_cv}{INTERPRETER_CV_NOTE}")
    checks.add_argument("--benchmark-repetitions", type=int, help=f"default {defaults.benchmark_repetitions}")
    checks.add_argument("--benchmark-workers", type=int, default=3,
                        help="fresh workers that benchmark (at least 3; default %(default)s)")
    checks.add_argument("--max-candidate-seconds", type=float,
                        help=f"deadline of each worker: default {defaults.max_candidate_seconds:g}")
    checks.add_argument("--max-autotune-seconds", type=float,
                        help="a kernel that autotunes itself: the deadline of its one autotune step (docs/autotune.md): "
                             f"default {defaults.max_autotune_seconds:g}")
    checks.add_argument("--arch", help="expected architecture (h200, h100, hopper, sm_90, b200, cpu, ...)")
    checks.add_argument("--profile", dest="profile", action="store_true", default=True,
                        help="check that the summary profile selects the main kernel (default: on)")
    checks.add_argument("--no-profile", dest="profile", action="store_false", help="skip the profile check")
    _add_sandbox_arguments(parser)
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def _add_init_bundle_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", type=Path, required=True, help="kernel source file")
    parser.add_argument("--entry", required=True, help="the public function the harness calls")
    parser.add_argument("--out", type=Path, required=True, help="directory for harness.py, cases.json, target.json")
    from orchestrator.bundle.starter_plan import KINDS

    parser.add_argument("--kind", choices=KINDS,
                        help="default: inferred from the entry's body. elementwise: 1-D (n,) tensors; rowwise: "
                             "(rows, cols); norm: x (rows, cols), weight/bias (cols,); reduction: (rows, cols) -> "
                             "(rows,); gemm: (m, k) @ (k, n); bmm: (batch, m, k) @ (batch, k, n)")
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: Triton interpreter (TRITON_INTERPRET=1), small cases; cuda: GPU, large cases "
                             "(default: %(default)s)")
    parser.add_argument("--arch", help="architecture for target.json (required with --backend cuda, e.g. h200)")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                        help="the tensors' dtype (default: the dtype the entry allocates its result with, else float32)")
    parser.add_argument("--force", action="store_true", help="overwrite existing bundle files in --out")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tlx-agent", description="Hardened Triton/TLX kernel optimization agent.")
    parser.add_argument("--version", action="version", version=f"tlx-agent {package_version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_optimize_arguments(sub.add_parser("optimize", help="run the optimization loop (default)"))
    _add_validate_arguments(sub.add_parser(
        "validate", help="preflight a bundle against the untouched kernel and write bundle.lock.json"))
    _add_init_bundle_arguments(sub.add_parser(
        "init-bundle", help="write a starter harness.py, cases.json and target.json for a kernel"))
    sub.add_parser("schema", help="print the JSON Schemas of every public model")
    doctor = sub.add_parser("doctor", help="check this machine: isolation layers, torch, Triton (and TLX), the "
                                           "GPU, ncu, Proton, codex and claude, each with a fix where it fails")
    doctor.add_argument("--worker-python", default=sys.executable,
                        help=f"interpreter whose torch and Triton the workers would use (default: {THIS_PYTHON})")
    doctor.add_argument("--isolation", choices=("strict", "standard", "off"), default="standard",
                        help="isolation mode to probe (default: %(default)s)")
    simulate.add_arguments(sub.add_parser("simulate", help="decide a recorded run again from its records (no worker)"))
    report.add_arguments(sub.add_parser("report", help="the completion report of a run: workload, device, latencies, "
                                                       "speedup, CV, correctness, stopping reason, commit"))
    skill.add_arguments(sub.add_parser("skill", help="install the agent skill where Claude Code or Codex finds it"))
    from orchestrator.cli.batch import add_arguments as add_batch_arguments

    add_batch_arguments(sub.add_parser("batch", help="optimize many kernels from a manifest, one process per job; "
                                                     "exit 0 all improved, 2 none, 5 some"))
    return parser


def doctor_command(args: argparse.Namespace) -> int:
    """Probe the isolation layers and the tools (torch, Triton, TLX, Proton, the GPU, ncu, codex, claude) in real
    child processes; stdout JSON, stderr the readable table. Exit 0: it reports, it does not judge."""
    from orchestrator.worker.doctor import format_doctor_report, probe_isolation_sync, strict_refusals
    from orchestrator.worker.toolchain import format_checks, toolchain_checks

    statuses = probe_isolation_sync(args.worker_python, args.isolation)
    tools = toolchain_checks(args.worker_python)
    sys.stderr.write(format_doctor_report(statuses) + "\n" + format_checks(tools) + "\n")
    emit(DoctorOutput(isolation_mode=args.isolation, layers=statuses, strict_ok=not strict_refusals(statuses),
                      worker_python=args.worker_python, tools=tools).model_dump(mode="json"))
    return ExitCode.OK


def interruptible() -> None:
    """SIGINT is how a run is stopped cleanly (Ctrl-C, and `batch` stopping its jobs: exit 130, partial artifacts,
    no worker left). A command a shell without job control started in the background (`... &` in a script)
    inherits SIGINT ignored, and Python then installs no handler: the default one is put back, so the documented
    stop works however the command was started."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    interruptible()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*SUBCOMMANDS, "-h", "--help", "--version"):
        argv = ["optimize", *argv]  # agent skills call the CLI with flags only
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        return fail(str(exc))
    try:
        if args.command == "schema":
            from protocol.schema import all_schemas

            emit(all_schemas())
            return ExitCode.OK
        if args.command == "doctor":
            return doctor_command(args)
        if args.command == "simulate":
            return simulate.simulate_main(args)
        if args.command == "report":
            return report.report_main(args)
        if args.command == "skill":
            return skill.skill_main(args)
        if args.command == "batch":
            from orchestrator.cli.batch import batch_main

            return batch_main(args, _add_optimize_arguments)
        if args.command == "validate":
            from orchestrator.cli.validate import validate_main

            return validate_main(args, argv)
        if args.command == "init-bundle":
            from orchestrator.cli.init_bundle import init_bundle_main

            return init_bundle_main(args)
        from orchestrator.cli.optimize import optimize_main

        return optimize_main(args, argv, parse_recorded_command)
    except KeyboardInterrupt:
        return fail("interrupted", ExitCode.INTERRUPTED)
    except BundleError as exc:
        return fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - last resort: one line, traceback only with --debug
        if debug:
            traceback.print_exc()
        return fail(f"internal error: {type(exc).__name__}: {exc}" + ("" if debug else " (rerun with --debug)"))
