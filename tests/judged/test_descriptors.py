"""Tensor descriptors under the GPU judge, on CPU tensors: the candidate process records a host-side
`TensorDescriptor` as the storage it views and its geometry, never an address; the judge reads that as hostile
data and rebuilds the descriptor over its own storage, refusing a geometry that leaves the storage."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from sandbox_worker.judged.recording import _Recorder, _Storages
from sandbox_worker.judged.replay import RecordRefused, ReplayPlan, parse_record, tensor_descriptor

KERNEL = "d" * 64


def _record_with(descriptor: dict) -> dict:
    return {"steps": [{"launch": KERNEL, "grid": [4, 1, 1], "arguments": [{"descriptor": descriptor}, {"int": 64}]}],
            "buffers": [], "outputs": [{"input": 1, "offset": 0, "shape": [64, 64], "stride": [64, 1],
                                        "dtype": "float16"}]}


def test_the_candidate_process_records_a_descriptor_as_a_storage_and_its_geometry():
    a = torch.zeros(256, 128, dtype=torch.float16)
    out = torch.zeros(64, 64, dtype=torch.float16)
    recorder = _Recorder(_Storages([a, out]))
    kernel = SimpleNamespace(hash=KERNEL, src=SimpleNamespace(signature={"a_desc": "tensordesc<fp16[64, 64]>",
                                                                         "n": "i32"}))
    view = a[64:]  # a descriptor over a view: its storage and byte offset are what is recorded
    recorder.launch(kernel, (4, 1, 1, None, None, None, None, None, None,
                             TensorDescriptor.from_tensor(view, [64, 64]), 64))
    descriptor = recorder.steps[0]["arguments"][0]["descriptor"]
    assert descriptor == {"input": 0, "offset": 64 * 128 * 2, "dtype": "float16", "shape": [192, 128],
                          "strides": [128, 1], "block_shape": [64, 64], "padding": "zero",
                          "round_f32_to_tf32": False}
    parsed = parse_record(_record_with(descriptor), inputs=2)
    assert parsed.steps[0]["arguments"][0]["descriptor"]["block_shape"] == [64, 64]
    assert parse_record(parsed.to_record(), inputs=2) == parsed


def test_the_judge_rebuilds_the_descriptor_over_its_own_storage():
    judge_a = torch.randn(256, 128).to(torch.float16)
    geometry = {"input": 0, "offset": 64 * 128 * 2, "dtype": "float16", "shape": [192, 128], "strides": [128, 1],
                "block_shape": [64, 64], "padding": "zero", "round_f32_to_tf32": False}
    storages = judge_a.untyped_storage()

    def tensor_at(ref, dtype, shape, stride):
        span = (sum((s - 1) * st for s, st in zip(shape, stride, strict=True)) + 1) * 2
        if ref["offset"] + span > storages.nbytes():
            raise RecordRefused("a recorded input reference lies outside its storage")
        return torch.empty(0, dtype=dtype).set_(storages, ref["offset"] // 2, shape, stride)

    rebuilt = ReplayPlan._argument({"descriptor": geometry}, lambda ref, span=0: 0, tensor_at)
    assert isinstance(rebuilt, TensorDescriptor)
    assert rebuilt.base.data_ptr() == judge_a[64:].data_ptr() and list(rebuilt.block_shape) == [64, 64]
    assert torch.equal(rebuilt.base, judge_a[64:])
    with pytest.raises(RecordRefused, match="outside its storage"):
        ReplayPlan._argument({"descriptor": {**geometry, "shape": [256, 128]}}, lambda ref, span=0: 0, tensor_at)
    with pytest.raises(RecordRefused, match="cannot be rebuilt"):  # a last stride that is not 1
        tensor_descriptor(judge_a, {**geometry, "shape": [128, 128], "strides": [128, 2]})


@pytest.mark.parametrize(("change", "reason"), [
    ({"shape": [1, 2, 3, 4, 5, 6], "strides": [1] * 6, "block_shape": [1] * 6}, "1 to 5 integers"),
    ({"strides": [1]}, "strides"),
    ({"padding": "garbage"}, "unknown padding"),
    ({"dtype": "complex64"}, "known dtype"),
    ({"input": 7}, "index"),
])
def test_a_descriptor_the_judge_cannot_own_is_refused(change, reason):
    descriptor = {"input": 0, "offset": 0, "dtype": "float16", "shape": [64, 64], "strides": [64, 1],
                  "block_shape": [64, 64], "padding": "zero", **change}
    with pytest.raises(RecordRefused, match=reason):
        parse_record(_record_with(descriptor), inputs=2)
