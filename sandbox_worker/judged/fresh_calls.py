"""Every replayed call on inputs nobody has seen, in memory nothing was left in, and checked only afterwards.

What a GPU kernel can reach while the judge replays it is the judge's own CUDA context: any address in it.
So the judge keeps nothing there that a kernel could use, and leaves nothing a kernel could carry from one call
to the next:

- *Fresh inputs for every call*, warm-up and timed alike: each call's input set is drawn from the command's
  seed (64 bits from the orchestrator's CSPRNG, never sent to the candidate) and a salt of its own, on the
  judge's GPU, just before the call. A memo of earlier calls (in a wrapper buffer, in freed memory, anywhere)
  holds answers to questions that are never asked again, and no input set exists before its call.
- *Poison before every call*: every buffer the wrapper allocated is refilled with bytes from the operating
  system's CSPRNG (through a device generator seeded with them) and every output with NaN (integers: a
  sentinel), so no state survives between calls and skipped work leaves poison behind.
- *Nothing of the verdict is resident while the candidate's kernels run*: the reference and the private copy
  of the inputs are computed after the call has finished (the inputs are drawn again from the same seed and
  salt, which is the private copy), compared, and overwritten with poison; the next input set does not exist
  yet. A kernel that reads every address it can find finds only its own inputs and outputs.
- *Checked at random, after the fact*: which calls are checked is drawn with `secrets` after each call, so
  neither the call nor anything before it can know (`CHECK_PROBABILITY`); a call that skipped or corrupted its
  work is found with that probability each time, and a cheat that moves a median must do so on most calls.

Standard library at module level; torch inside the functions. Device-agnostic: the same code runs on CPU
tensors (the tests) and on the GPU (the judge).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sandbox_worker.harness_kit import checks
from sandbox_worker.judged.judge import compare_to_reference

CHECK_PROBABILITY = 0.5  # per call, drawn after it; see the module doc and docs/security.md for what it detects


class CallCheckFailed(Exception):
    """A checked call was wrong after verification passed; the message names the call and what was wrong."""


@dataclass
class Drawn:
    """One input set on the judge's device: every argument as `make_inputs` gave it (tensors contiguous) and,
    for an entry that writes into output arguments, those outputs (poisoned)."""

    salt: int
    arguments: tuple[Any, ...]
    out_arguments: tuple[Any, ...] = ()

    @property
    def tensors(self) -> list[Any]:
        return [a for a in self.arguments if _is_tensor(a)]

    @property
    def replay_tensors(self) -> list[Any]:
        """The storages a record names as inputs, in order: tensor arguments, then output arguments."""
        return [*self.tensors, *self.out_arguments]


@dataclass
class Call:
    """A drawn input set with the replay bound to it; `bound()` launches the recorded kernels on it."""

    drawn: Drawn
    bound: Any  # replay._Bound, or anything with __call__, .outputs and .buffers

    def outputs(self, returned: Any) -> tuple[Any, ...]:
        """What the check reads: the output arguments, or the views the replay returned."""
        if self.drawn.out_arguments:
            return self.drawn.out_arguments
        return tuple(returned) if isinstance(returned, (tuple, list)) else (returned,)


@dataclass
class CallSource:
    """Draws, binds, poisons and checks the calls of one case. `bind(tensors)` maps the record onto the judge's
    tensors; `output_specs` are (shape, dtype) of the outputs an entry with output arguments writes into."""

    spec: Any  # harness_kit.entry_point.JudgedEntry
    case: dict[str, Any]
    device: str
    bind: Callable[[list[Any]], Any] | None = None
    output_specs: tuple[tuple[tuple[int, ...], Any], ...] = ()
    salts: Iterator[int] = field(default_factory=lambda: iter(range(1_000, 2**31)))
    check_probability: float = CHECK_PROBABILITY
    calls: int = 0
    checked: int = 0
    _noise_generator: Any = None

    # ---- drawing and binding ------------------------------------------------------------------------

    def draw(self, salt: int | None = None) -> Drawn:
        """A fresh input set (the next salt unless one is given) and poisoned output arguments."""
        import torch

        salt = next(self.salts) if salt is None else salt
        raw = tuple(self.spec.make_inputs(self.case, self.device, salt))
        arguments = tuple(a.contiguous() if _is_tensor(a) else a for a in raw)
        outs = tuple(torch.empty(shape, dtype=dtype, device=self.device) for shape, dtype in self.output_specs) \
            if self.spec.outputs_are_arguments else ()
        checks.poison_(list(outs))
        return Drawn(salt=salt, arguments=arguments, out_arguments=outs)

    def prepare(self, drawn: Drawn | None = None) -> Call:
        """The next call: a fresh input set (or `drawn`), the record bound to it, buffers and outputs poisoned."""
        if self.bind is None:
            raise RuntimeError("a call source without a record cannot bind a call")
        drawn = drawn if drawn is not None else self.draw()
        call = Call(drawn=drawn, bound=self.bind(drawn.replay_tensors))
        self.poison(call)
        return call

    def refresh(self, call: Call) -> None:
        """New input values in the same tensors (a CUDA graph keeps the addresses it captured)."""
        fresh = self.draw()
        for kept, new in zip(call.drawn.tensors, fresh.tensors, strict=True):
            kept.copy_(new)
        call.drawn.salt = fresh.salt

    # ---- poison ---------------------------------------------------------------------------------------

    def noise(self, nbytes: int) -> Any:
        """`nbytes` random bytes on the device, from a generator seeded by the operating system's CSPRNG."""
        import torch

        if self._noise_generator is None:
            self._noise_generator = torch.Generator(device=torch.device(self.device))
            self._noise_generator.manual_seed(secrets.randbits(63))
        return torch.randint(0, 256, (max(nbytes, 1),), dtype=torch.uint8, device=self.device,
                             generator=self._noise_generator)

    def poison(self, call: Call) -> None:
        """Wrapper buffers refilled with unpredictable bytes, then outputs with NaN (or a sentinel)."""
        buffers = list(getattr(call.bound, "buffers", ()))
        if buffers:
            noise = self.noise(max(int(b.numel()) for b in buffers))
            for buffer in buffers:
                buffer.copy_(noise[: buffer.numel()])
        checks.poison_(list(getattr(call.bound, "outputs", ())))
        checks.poison_(list(call.drawn.out_arguments))

    # ---- checks, after the call ---------------------------------------------------------------------

    def draw_check(self) -> bool:
        """Whether the call that has just finished is checked: a CSPRNG draw made after it."""
        return secrets.randbelow(1 << 20) < int(self.check_probability * (1 << 20))

    def after_call(self, call: Call, returned: Any, what: str) -> bool:
        """Count the call and check it when the draw says so; raises `CallCheckFailed` when it was wrong."""
        self.calls += 1
        if not self.draw_check():
            return False
        verdict, _expected = self.check(call, returned)
        self.checked += 1
        if not verdict["passed"]:
            raise CallCheckFailed(f"{what} {self.calls} (checked at random after it ran): {verdict['diagnostics']}")
        return True

    def check(self, call: Call, returned: Any, *, keep_expected: bool = False) -> tuple[dict[str, Any], tuple[Any, ...]]:
        """The verdict on a finished call. Its inputs are drawn again from the same seed and salt (the private
        copy, made only now), compared with what the call's inputs hold, and the reference is computed on them;
        afterwards both are overwritten with poison unless `keep_expected` (verify keeps the reference to
        compare two trials)."""
        private = self.spec.make_inputs(self.case, self.device, call.drawn.salt)
        private = tuple(a.contiguous() if _is_tensor(a) else a for a in private)
        verdicts = []
        if not self.spec.compare.get("allow_input_mutation"):
            verdicts.append(checks.inputs_unchanged(call.drawn.tensors, [a for a in private if _is_tensor(a)]))
        expected = self.spec.reference(*checks.clone_args(private))
        expected = tuple(e.detach() for e in (expected if isinstance(expected, (tuple, list)) else (expected,)))
        outputs = tuple(o.detach() for o in call.outputs(returned))
        verdicts.insert(0, compare_to_reference(self.spec, outputs, expected, private))
        verdict = checks.merge_verdicts(verdicts)
        checks.poison_([a for a in private if _is_tensor(a)])
        if not keep_expected:
            checks.poison_(list(expected))
        return verdict, expected

    def require_deterministic_inputs(self, salt: int) -> str | None:
        """Why the judge cannot check calls of this case (None when it can): the private copy of a call's
        inputs is the same set drawn again, so `make_inputs` must give the same values for a seed and salt."""
        first = [a for a in self.spec.make_inputs(self.case, self.device, salt) if _is_tensor(a)]
        second = [a for a in self.spec.make_inputs(self.case, self.device, salt) if _is_tensor(a)]
        if len(first) != len(second) or not all(checks.outputs_equal(a, b) for a, b in zip(first, second,
                                                                                           strict=True)):
            return ("the harness's make_inputs gives different values for the same seed and salt; the judge draws "
                    "a call's inputs again to check it, so draw them from checks.make_generator(device, salt=salt)")
        return None


def output_specs_for(spec: Any, case: dict[str, Any], device: str, salt: int) -> tuple[tuple[tuple[int, ...], Any], ...]:
    """(shape, dtype) of each output: the reference on an input set drawn only for this, never replayed and
    poisoned before any candidate kernel runs."""
    probe = tuple(spec.make_inputs(case, device, salt))
    expected = spec.reference(*checks.clone_args(probe))
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    specs = tuple((tuple(e.shape), e.dtype) for e in expected)
    checks.poison_(list(expected))
    return specs


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)
