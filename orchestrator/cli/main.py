"""`tlx-agent` command line: optimize (default), validate, init-bundle, schema, doctor, simulate, report, skill,
batch.

stdout carries exactly one JSON document (the result, or the error); stderr carries the live log.
Exit codes (protocol/outcome.py): 0 winner promoted and revalidated; 2 no qualifying winner; 3 commit failed;
1 invalid input or internal error; 130 interrupted (4, human review, is reserved and not returned yet).
`validate` prints bundle.lock.json and exits 0 only when every check passed, 1 otherwise (the failed checks
are named on stderr and in the lock). `batch` exits 0 every job improved, 2 none did, 4 some did, 1 invalid
manifest or output dir (orchestrator/batch/command.py).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from orchestrator.cli import report, simulate, skill
from orchestrator.cli.output import emit, fail
from protocol.bundle import INTERPRETER_BUDGET, Budget, BundleError
from protocol.commands import DoctorOutput
from protocol.outcome import ExitCode

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
    """argparse exits 2 on bad usage; our contract says invalid input is exit 1 with one line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Budget()
    inputs = parser.add_argument_group("inputs (required unless --resume)")
    inputs.add_argument("--resume", type=Path, metavar="OUT",
                        help="continue the run whose output directory is OUT (its orchestrator died); every input and "
                             "setting comes from OUT/run.json and OUT/bundle/; only --max-total-seconds and "
                             "--max-rounds may be given with it (docs/resume.md)")
    inputs.add_argument("--kernel", type=Path, help="complete kernel source file")
    inputs.add_argument("--harness", type=Path, help="bundle harness.py")
    inputs.add_argument("--cases", type=Path, help="bundle cases.json")
    inputs.add_argument("--target", type=Path, help="bundle target.json")
    inputs.add_argument("--output-dir", type=Path, help="fresh (empty or new) artifact directory")
    inputs.add_argument("--budget", type=Path, help="budget.json overriding the numeric flags key by key")
    inputs.add_argument("--reference-kernel", type=Path, help="trusted reference implementation, frozen into the bundle")
    inputs.add_argument("--prior-run", type=Path, help="earlier output dir: its source hashes and evidence (read-only)")
    gen = parser.add_argument_group("candidate generation")
    gen.add_argument("--provider", choices=("tune", "replay", "openai", "anthropic", "codex", "claude"),
                     default="tune", help="candidate generator (README: Choosing a generator)")
    gen.add_argument("--replay-dir", type=Path, help="directory of candidates 001.py, 002.py, ... for --provider replay")
    gen.add_argument("--model", help="model name passed to the provider (never invented)")
    gen.add_argument("--base-url", help="endpoint for openai (default: OPENAI_BASE_URL) or anthropic and claude "
                                        "(default: ANTHROPIC_BASE_URL)")
    budget = parser.add_argument_group("budget")
    budget.add_argument("--max-rounds", type=int, help=f"default {defaults.max_rounds}")
    budget.add_argument("--candidates-per-round", type=int, help=f"default {defaults.candidates_per_round}")
    budget.add_argument("--max-candidate-seconds", type=float, help=f"default {defaults.max_candidate_seconds:g}")
    budget.add_argument("--max-total-seconds", type=float, help=f"default {defaults.max_total_seconds:g}")
    budget.add_argument("--min-speedup", type=float, help=f"default {defaults.min_speedup}")
    budget.add_argument("--max-cv", type=float,
                        help=f"largest per-case timing CV: default {defaults.max_cv}{INTERPRETER_CV_NOTE}")
    budget.add_argument("--benchmark-repetitions", type=int, help=f"default {defaults.benchmark_repetitions}")
    budget.add_argument("--max-case-regression", type=float, metavar="FRACTION",
                        help="reject a candidate when a protected case's speedup has its upper confidence bound "
                             f"below 1 - FRACTION, whatever the aggregate: default {defaults.max_case_regression:g} "
                             "(target.json may set it; 1 turns it off)")
    measure = parser.add_argument_group("measurement and profiling")
    measure.add_argument("--profile", dest="profile", action="store_true", default=True,
                         help="collect Proton and native profiles (default: on)")
    measure.add_argument("--no-profile", dest="profile", action="store_false")
    measure.add_argument("--diagnostic-instrumentation", action="store_true",
                         help="also collect diagnostic-only Proton intra-kernel traces for the baseline and the "
                              "finalist (never benchmarked, promoted or committed)")
    measure.add_argument("--schedule", default="aba",
                         help="measurement order per candidate: a = incumbent, b = candidate (default aba)")
    measure.add_argument("--confirm-runs", type=int, default=2, metavar="PAIRS",
                         help="when only the noise test stands in a candidate's way, measure up to this many more "
                              "candidate/incumbent pairs before deciding (default 2, 0 = off)")
    measure.add_argument("--confidence", type=float, default=0.99, help="confidence of the promotion test")
    measure.add_argument("--arch", help="expected architecture (h200, h100, hopper, sm_90, b200, cpu, ...)")
    preflight = parser.add_argument_group("bundle preflight")
    preflight.add_argument("--bundle-lock", type=Path,
                           help="bundle.lock.json from `tlx-agent validate`; every locked file must still match")
    preflight.add_argument("--skip-validation", action="store_true",
                           help="experts: skip the built-in preflight (recorded in run.json)")
    sandbox = parser.add_argument_group("sandbox")
    sandbox.add_argument("--isolation", choices=("strict", "standard", "off"), default="standard")
    sandbox.add_argument("--worker-python", default=sys.executable, help="interpreter for workers")
    sandbox.add_argument("--worker-start", choices=("fresh", "forkserver"), default="forkserver",
                         help="how workers start: forked by a per-run fork server that imported torch and triton "
                              "once (default; 0.25 s instead of 4.6 s to ready on the H200), or a fresh interpreter "
                              "each; every isolation layer is applied in each worker either way")
    sandbox.add_argument("--data-limit-gib", type=float, default=None, help="RLIMIT_DATA for workers in GiB")
    vcs = parser.add_argument_group("commit")
    vcs.add_argument("--vcs", choices=("auto", "git", "hg"), default="auto")
    vcs.add_argument("--commit-message", help="subject of promotion commits")
    vcs.add_argument("--commit-winner", dest="commit_winner", action="store_true", default=True)
    vcs.add_argument("--no-commit-winner", dest="commit_winner", action="store_false",
                     help="write artifacts only, commit nothing")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


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
    checks.add_argument("--benchmark-workers", type=int, default=3, help="fresh workers that benchmark (>= 3)")
    checks.add_argument("--max-candidate-seconds", type=float,
                        help=f"deadline of each worker: default {defaults.max_candidate_seconds:g}")
    checks.add_argument("--arch", help="expected architecture (h200, h100, hopper, sm_90, b200, cpu, ...)")
    checks.add_argument("--profile", dest="profile", action="store_true", default=True,
                        help="check that the summary profile selects the main kernel (default: on)")
    checks.add_argument("--no-profile", dest="profile", action="store_false")
    sandbox = parser.add_argument_group("sandbox")
    sandbox.add_argument("--isolation", choices=("strict", "standard", "off"), default="standard")
    sandbox.add_argument("--worker-python", default=sys.executable, help="interpreter for workers")
    sandbox.add_argument("--data-limit-gib", type=float, default=None, help="RLIMIT_DATA for workers in GiB")
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
                        help="cpu: Triton interpreter (TRITON_INTERPRET=1), small cases; cuda: GPU, large cases")
    parser.add_argument("--arch", help="architecture for target.json (required with --backend cuda, e.g. h200)")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                        help="the tensors' dtype (default: the dtype the entry allocates its result with, else float32)")
    parser.add_argument("--force", action="store_true", help="overwrite existing bundle files in --out")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tlx-agent", description="Hardened Triton/TLX kernel optimization agent.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_optimize_arguments(sub.add_parser("optimize", help="run the optimization loop (default)"))
    _add_validate_arguments(sub.add_parser(
        "validate", help="preflight a bundle against the untouched kernel and write bundle.lock.json"))
    _add_init_bundle_arguments(sub.add_parser(
        "init-bundle", help="write a starter harness.py, cases.json and target.json for a kernel"))
    sub.add_parser("schema", help="print the JSON Schemas of every public model")
    doctor = sub.add_parser("doctor", help="show which isolation layers this machine supports")
    doctor.add_argument("--worker-python", default=sys.executable)
    doctor.add_argument("--isolation", choices=("strict", "standard", "off"), default="standard")
    simulate.add_arguments(sub.add_parser("simulate", help="decide a recorded run again from its records (no worker)"))
    report.add_arguments(sub.add_parser("report", help="the completion report of a run: workload, device, latencies, "
                                                       "speedup, CV, correctness, stopping reason, commit"))
    skill.add_arguments(sub.add_parser("skill", help="install the agent skill where Claude Code or Codex finds it"))
    from orchestrator.batch.command import add_arguments as add_batch_arguments

    add_batch_arguments(sub.add_parser("batch", help="optimize many kernels from a manifest, one process per job; "
                                                     "exit 0 all improved, 2 none, 4 some"))
    return parser


def doctor_command(args: argparse.Namespace) -> int:
    """Probe the isolation layers in a real child process; stdout JSON, stderr the readable table."""
    from orchestrator.worker.doctor import format_doctor_report, probe_isolation_sync, strict_refusals

    statuses = probe_isolation_sync(args.worker_python, args.isolation)
    sys.stderr.write(format_doctor_report(statuses) + "\n")
    emit(DoctorOutput(isolation_mode=args.isolation, layers=statuses,
                      strict_ok=not strict_refusals(statuses)).model_dump(mode="json"))
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*SUBCOMMANDS, "-h", "--help"):
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
            from orchestrator.batch.command import batch_main

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
