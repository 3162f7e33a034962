"""`tlx-agent init-bundle`: check the flags, write the three bundle files, print where they are.

What goes into the files (the signature read from the kernel, the plan inferred from it, the harness
template, the cases and the target) is orchestrator/bundle/init_bundle.py. Every guess is printed as a
`[tlx-agent] init-bundle guessed ...` line, returned in the JSON and listed at the top of harness.py.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from orchestrator.bundle.alignment import async_copy_evidence
from orchestrator.bundle.arch import lookup
from orchestrator.bundle.entry_signature import read_entry
from orchestrator.bundle.init_bundle import render_cases, render_harness, render_target
from orchestrator.bundle.inputs import parse_python
from orchestrator.bundle.starter_plan import Guess, plan_starter
from orchestrator.cli.output import emit
from orchestrator.ledger.live_log import LiveLog
from protocol.bundle import BundleError
from protocol.commands import InitBundleOutput
from protocol.outcome import ExitCode


def init_bundle_main(args: argparse.Namespace) -> int:
    kernel = args.kernel.expanduser().resolve()
    out = args.out.expanduser().resolve()
    source, tree = parse_python(kernel, "kernel")
    if args.backend == "cuda":
        if not args.arch:
            raise BundleError("--backend cuda needs --arch (for example h200 or b200) for target.json's architecture")
        spec = lookup(args.arch)
        if spec is None or spec.kind != "cuda":
            raise BundleError(f"--arch {args.arch!r} is not a known CUDA architecture (h200, h100, b200, a100, sm_90, ...)")
    elif args.arch and (lookup(args.arch) is None or lookup(args.arch).kind != "cpu"):  # type: ignore[union-attr]
        raise BundleError(f"--backend cpu runs the Triton interpreter; --arch {args.arch!r} does not apply")
    signature = read_entry(tree, args.entry, kernel)
    plan = plan_starter(signature, kind=args.kind, dtype=args.dtype, backend=args.backend)
    async_copy = async_copy_evidence(tree) if args.backend == "cuda" else None
    if async_copy:
        plan.guesses.append(Guess(
            "cases", "the ragged case keeps its outer dimension odd and rounds the others up to multiples of 16 "
            "elements", f"the kernel copies asynchronously ({async_copy}): cp.async and TMA need 16-byte aligned "
            "rows", "give cases.json an unaligned ragged case back if the kernel handles one"))
    if args.backend == "cpu" and plan.dtype == "bfloat16":
        said = "--dtype bfloat16" if args.dtype else f"{signature.name}() allocates bfloat16, so the inputs are bfloat16"
        raise BundleError(f"{said} with --backend cpu: the Triton interpreter has no bf16 arithmetic"
                          + ("" if args.dtype else "; pass --dtype float32 or float16"))
    files = {"harness.py": out / "harness.py", "cases.json": out / "cases.json", "target.json": out / "target.json"}
    existing = [str(path) for path in files.values() if path.exists()]
    if existing and not args.force:
        raise BundleError(f"{', '.join(existing)} already exist(s); choose another --out or pass --force")
    if out.exists() and not out.is_dir():
        raise BundleError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    files["harness.py"].write_text(render_harness(kernel_file=kernel.name, signature=signature, plan=plan,
                                                  source=source, harness_path=str(files["harness.py"])),
                                   encoding="utf-8")
    files["cases.json"].write_text(json.dumps(render_cases(plan.kind, args.backend, aligned=async_copy is not None), indent=2) + "\n", encoding="utf-8")
    target = render_target(backend=args.backend, arch=args.arch, signature=signature, plan=plan)
    files["target.json"].write_text(json.dumps(target, indent=2) + "\n", encoding="utf-8")
    command = ["tlx-agent", "validate", "--kernel", str(kernel), "--harness", str(files["harness.py"]),
               "--cases", str(files["cases.json"]), "--target", str(files["target.json"])]
    if args.backend == "cpu":
        command += ["--arch", "cpu"]
    elif args.arch:
        command += ["--arch", args.arch]
    log = LiveLog(sys.stderr)
    log.event(f"init-bundle entry={signature.name} kind={plan.kind} ({plan.kind_source}) backend={args.backend} "
              f"dtype={plan.dtype} inputs={signature.inputs} outputs={signature.outputs} reference={plan.reference} "
              f"main_scope={signature.main_scope} out={str(out)!r}")
    for guess in plan.guesses:
        log.event("init-bundle guessed " + guess.line())
    first = ("write reference() in harness.py and set REFERENCE_TODO = None" if plan.reference == "todo"
             else "check the guesses listed at the top of harness.py")
    log.event(f"init-bundle next: {first}, then run: " + shlex.join(command))
    emit(InitBundleOutput(
        success=True, exit_code=ExitCode.OK, bundle_dir=str(out), files={name: str(path) for name, path in files.items()},
        entry=signature.name, kind=plan.kind, kind_source=plan.kind_source, backend=args.backend, dtype=plan.dtype,
        inputs=list(signature.inputs), outputs=list(signature.outputs),
        shapes={name: list(shape) for name, shape in plan.shapes.items()}, scalars=plan.scalars,
        reference=plan.reference, guesses=[guess.line() for guess in plan.guesses], main_scope=signature.main_scope,
        validate_command=command,
    ).model_dump(mode="json"))
    return ExitCode.OK
