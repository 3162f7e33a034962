"""A pinned autotune list written as one configuration (orchestrator/providers/tune/one_config.py): the recorded
choice's values, the hooks of the entry it was, nothing to prune, every other byte as it was."""

from __future__ import annotations

import ast

from orchestrator.autotune.detect import autotuned_kernels
from orchestrator.providers.tune.one_config import by_weight, one_configuration
from protocol.autotune import AutotuneChoice
from protocol.bundle import Case

HOOKED = '''import triton
import triton.language as tl


def widen(nargs):
    pass


def narrow(nargs):
    pass


@triton.autotune(
    [triton.Config({"BLOCK": 64}, num_warps=2, pre_hook=narrow),
     triton.Config({"BLOCK": 128}, num_warps=4, pre_hook=widen)],
    key=["n"],
    prune_configs_by={"early_config_prune": lambda configs, nargs, **kw: configs},
)
@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass
'''


def choice(index: int | None, block: int, case_ids: list[str], kernel: str = "scale_kernel") -> AutotuneChoice:
    return AutotuneChoice(kernel=kernel, key=[4096], key_values={"n": 4096}, case_ids=case_ids,
                          config={"kwargs": {"BLOCK": block}, "num_warps": 4, "num_stages": 3, "maxnreg": None},
                          config_index=index, configs_listed=2, configs_tried=2)


def test_the_choice_is_written_with_the_hooks_of_the_entry_it_was_and_nothing_to_prune():
    written = one_configuration(HOOKED, "scale_kernel", [choice(1, 128, ["c"])])
    assert written is not None
    ast.parse(written)
    decorator = written[written.index("@triton.autotune("):written.index("@triton.jit")]
    assert decorator == ("@triton.autotune(\n    [triton.Config({'BLOCK': 128}, num_warps=4, num_stages=3, "
                         "pre_hook=widen)],\n    key=[\"n\"],\n)\n")
    assert written.replace(decorator, "") == HOOKED.replace(
        HOOKED[HOOKED.index("@triton.autotune("):HOOKED.index("@triton.jit")], "")


def test_a_list_it_cannot_name_an_entry_of_is_left_as_written():
    starred = HOOKED.replace('[triton.Config({"BLOCK": 64}', '[*EXTRA, triton.Config({"BLOCK": 64}')
    assert one_configuration(starred, "scale_kernel", [choice(1, 128, ["c"])]) is None
    assert one_configuration(HOOKED, "no_such_kernel", [choice(1, 128, ["c"])]) is None
    # a hook the config function binds for itself would be unbound in the decorator
    local = HOOKED.replace("pre_hook=widen)", "pre_hook=local_hook)")
    assert one_configuration(local, "scale_kernel", [choice(1, 128, ["c"])]) is None
    inline = HOOKED.replace("pre_hook=widen)", "pre_hook=lambda nargs: widen(nargs))")
    assert "pre_hook=lambda nargs: widen(nargs))]" in one_configuration(inline, "scale_kernel", [choice(1, 128, ["c"])])


def test_the_choices_are_ordered_by_the_weight_of_their_cases():
    cases = [Case(case_id="small", parameters={}, weight=1.0), Case(case_id="large", parameters={}, weight=2.0),
             Case(case_id="ragged", parameters={}, weight=1.5)]
    choices = [choice(1, 128, ["large"]), choice(0, 64, ["small", "ragged"]), choice(1, 128, ["x"], kernel="other")]
    assert by_weight(choices, cases, "scale_kernel") == [choices[1], choices[0]]  # 2.5 against 2.0
    assert by_weight(choices, cases, "missing") == []


def test_choices_that_differ_per_key_are_written_one_per_key_and_never_autotune():
    """Keys that chose differently each keep their own configuration: one entry each, and an
    `early_config_prune` that keeps the key's own (the first for a key no choice was made for)."""
    wide = choice(1, 128, ["large"])
    narrow = choice(0, 64, ["small"]).model_copy(update={"key": [1001], "key_values": {"n": 1001, "dtypes": ["fp32"]}})
    written = one_configuration(HOOKED, "scale_kernel", [wide, narrow])
    assert written is not None and autotuned_kernels(written) == [] and autotuned_kernels(HOOKED) == ["scale_kernel"]
    decorator = ast.parse(written).body[-1].decorator_list[0]
    listed = [ast.unparse(entry) for entry in decorator.args[0].elts]
    assert listed == ["triton.Config({'BLOCK': 128}, num_warps=4, num_stages=3, pre_hook=widen)",
                      "triton.Config({'BLOCK': 64}, num_warps=4, num_stages=3, pre_hook=narrow)"]
    pruning = next(k.value for k in decorator.keywords if k.arg == "prune_configs_by")
    prune = eval(compile(ast.Expression(pruning), "<pruning>", "eval"))["early_config_prune"]  # noqa: S307
    assert prune(["wide", "narrow"], {"x_ptr": None, "n": 1001}) == ["narrow"]
    assert prune(["wide", "narrow"], {"x_ptr": None, "n": 4096}) == ["wide"]
    assert prune(["wide", "narrow"], {"x_ptr": None}, n=77) == ["wide"]  # a key never chosen for: the heaviest's
