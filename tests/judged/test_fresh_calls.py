"""What every judged GPU call is made of, shown on CPU tensors: fresh inputs, poisoned wrapper buffers and
outputs, checks drawn at random after the call, and no byte of the verdict alive while the call runs.

The judge's `CallSource` is device-agnostic; here the "replay" bound to a call is Python over CPU tensors that
behaves as a dishonest kernel would (a memo kept in a wrapper buffer, skipped work, a scan of every tensor in
the process for the answer). The GPU runs the same code over the judge's replays (scripts/gpu/h200_cheats.sh).
"""

from __future__ import annotations

import gc
import itertools
import secrets

import pytest
import torch

from sandbox_worker.harness_kit import checks, context
from sandbox_worker.harness_kit.entry_point import JudgedEntry
from sandbox_worker.judged.fresh_calls import CallCheckFailed, CallSource

N = 4096


def _inputs(case, device, salt):
    generator = checks.make_generator(device, salt=salt)
    n = int(case["parameters"]["n"])
    return (checks.random_tensor((n,), torch.float32, device, generator),
            checks.random_tensor((n,), torch.float32, device, generator))


def _reference(x, y):
    return x + y


SPEC = JudgedEntry(entry="vector_add", kernel_name="add_kernel", make_inputs=_inputs, reference=_reference)
CASE = {"case_id": "n4096", "parameters": {"n": N}}


@pytest.fixture(autouse=True)
def command_seed():
    context.set_command_context(seed=secrets.randbits(64), phase="benchmark")
    yield
    context.set_command_context(seed=None, phase=None)


class Bound:
    """What `ReplayPlan.bind` returns, over CPU tensors: a call, its outputs and its wrapper buffers."""

    def __init__(self, tensors, body):
        self.inputs = tensors
        self.out = torch.empty(N, dtype=torch.float32)
        self.buffers = [torch.empty(N * 4 + 8, dtype=torch.uint8)]  # the wrapper's scratch: memo + tag
        self.outputs = (self.out,)
        self.body = body

    def __call__(self):
        self.body(self)
        return self.outputs


def honest(bound):
    torch.add(bound.inputs[0], bound.inputs[1], out=bound.out)


def _source(body, **kwargs):
    return CallSource(spec=SPEC, case=CASE, device="cpu", bind=lambda tensors: Bound(tensors, body),
                      salts=itertools.count(1_000_000), **kwargs)


def test_every_call_gets_a_fresh_input_set_and_an_honest_kernel_passes_every_check():
    source = _source(honest, check_probability=1.0)
    seen = []
    for _ in range(20):
        call = source.prepare()
        seen.append(call.drawn.tensors[0][:4].clone())
        assert source.after_call(call, call.bound(), "call")
    assert source.calls == source.checked == 20
    assert len({tuple(t.tolist()) for t in seen}) == 20  # no input set is ever seen twice


def test_wrapper_buffers_and_outputs_are_poisoned_before_every_call_so_a_memo_never_survives():
    """A cross-call memo: the kernel keeps its last answer and a tag in its scratch buffer and, on a later call
    that finds the tag, writes the memo instead of computing. Each call's buffer is refilled with unpredictable
    bytes first, so the tag is never there; without the poison (the control) the memo is found at once."""
    TAG = torch.tensor([0x5A] * 8, dtype=torch.uint8)
    hits = []

    def memo(bound):
        scratch = bound.buffers[0]
        if torch.equal(scratch[:8], TAG):
            bound.out.copy_(scratch[8:].view(torch.float32))
            hits.append(True)
            return
        honest(bound)
        scratch[8:].view(torch.float32).copy_(bound.out)
        scratch[:8].copy_(TAG)

    source = _source(memo, check_probability=1.0)
    kept = Bound([], memo)  # the control: one binding whose buffer nothing refills
    for _ in range(8):
        call = source.prepare()
        source.after_call(call, call.bound(), "call")
        kept.inputs = call.drawn.tensors
        kept()
    assert source.checked == 8 and hits == [True] * 7  # every control call after the first found its memo
    hits.clear()
    for _ in range(50):
        call = source.prepare()
        assert not torch.equal(call.bound.buffers[0][:8], TAG)
        assert torch.isnan(call.bound.out).all()
        source.after_call(call, call.bound(), "call")
    assert hits == []


def test_a_kernel_that_skips_work_on_most_calls_is_caught_by_checks_drawn_after_the_call():
    """To move a median a cheat must skip more than half its calls; each skipped call leaves the poisoned
    output and is checked with probability 1/2, drawn only after it finished."""
    calls = itertools.count()

    def lazy(bound):
        if next(calls) % 4:  # three calls in four do nothing
            return
        honest(bound)

    source = _source(lazy)
    with pytest.raises(CallCheckFailed, match=r"call \d+ \(checked at random after it ran\): .*NaN"):
        for _ in range(200):
            call = source.prepare()
            source.after_call(call, call.bound(), "call")
    assert source.checked >= 1


def test_checks_are_drawn_at_random_with_the_stated_probability():
    source = _source(honest)
    for _ in range(2000):
        call = source.prepare()
        source.after_call(call, call.bound(), "call")
    assert 0.45 < source.checked / source.calls < 0.55


def test_no_byte_of_the_reference_or_of_the_private_inputs_exists_while_the_call_runs():
    """A kernel that reads every tensor the process holds, looking for this call's answer (and for a private
    copy of its inputs it could rewrite together with them), finds neither: both are made after the call."""
    found = []

    def scanner(bound):
        x, y = bound.inputs
        answer = x + y
        for obj in gc.get_objects():
            if type(obj) is torch.Tensor and obj.shape == answer.shape and obj is not bound.out and obj is not answer:
                if torch.equal(obj, answer):
                    found.append("reference")
                elif torch.equal(obj, x) and obj.data_ptr() != x.data_ptr():
                    found.append("private copy")
        del answer
        honest(bound)

    source = _source(scanner, check_probability=1.0)
    for _ in range(10):
        call = source.prepare()
        source.after_call(call, call.bound(), "call")
    assert source.checked == 10
    assert found == []
    # the control: a reference computed before the call, as a judge that prepares it early would, is found
    call = source.prepare()
    early = SPEC.reference(*call.drawn.tensors)
    call.bound()
    assert found == ["reference"]
    del early


def test_a_kernel_that_rewrites_its_inputs_is_caught_and_cannot_weaken_the_reference():
    """Zeroing the inputs and writing zeros agrees with a reference computed on those inputs; the judge draws
    the private copy again from the seed after the call, so the check sees both."""
    def zero_everything(bound):
        for tensor in bound.inputs:
            tensor.zero_()
        bound.out.zero_()

    source = _source(zero_everything)
    call = source.prepare()
    verdict, _ = source.check(call, call.bound())
    assert not verdict["passed"]
    assert "input" in verdict["diagnostics"] or "elements" in verdict["diagnostics"]


def test_a_harness_whose_inputs_do_not_repeat_for_a_seed_and_salt_is_refused_by_name():
    draws = itertools.count()

    def unseeded(case, device, salt):
        torch.manual_seed(next(draws))
        return (torch.rand(N), torch.rand(N))

    source = CallSource(spec=JudgedEntry(entry="f", kernel_name="k", make_inputs=unseeded, reference=_reference),
                        case=CASE, device="cpu")
    assert "make_inputs gives different values for the same seed and salt" in \
        source.require_deterministic_inputs(0)
    assert _source(honest).require_deterministic_inputs(0) is None


def test_each_input_set_depends_on_the_command_seed_which_is_64_bits_from_the_csprng():
    """Two commands never share an input set, and an input set is drawn from nothing a candidate can read."""
    source = _source(honest)
    first = source.draw(7).tensors[0].clone()
    context.set_command_context(seed=secrets.randbits(64), phase="benchmark")
    second = source.draw(7).tensors[0]
    assert not torch.equal(first, second)
