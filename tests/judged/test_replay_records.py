"""The GPU judge's reading of a record from the candidate's process: hostile data, accepted only in shape.

Replaying needs a GPU (the H200 scripts run it: scripts/gpu/h200_judge.sh); what the judge accepts or refuses
of a record, and why, is decided before any kernel loads, and is checked here.
"""

from __future__ import annotations

import copy

import pytest

from sandbox_worker.judged.replay import KernelLibrary, RecordRefused, parse_record

KERNEL = "a" * 64


def _record(**changes):
    record = {
        "steps": [{"launch": KERNEL, "grid": [4096, 1, 1],
                   "arguments": [{"input": 0, "offset": 0}, {"input": 1, "offset": 0}, {"buffer": 0, "offset": 0},
                                 {"int": 16_777_216}, {"constexpr": True}]}],
        "buffers": [{"nbytes": 67_108_864}],
        "outputs": [{"buffer": 0, "offset": 0, "shape": [16_777_216], "stride": [1], "dtype": "float32"}],
        "torch_work": [], "data_dependent": [],
    }
    record.update(changes)
    return record


def test_an_honest_record_is_read_as_launches_on_named_storages():
    recording = parse_record(_record(), inputs=2)
    assert recording.kernel_hashes == [KERNEL]
    assert recording.buffers == (67_108_864,)
    assert recording.steps[0]["arguments"][3] == {"int": 16_777_216}
    assert recording.outputs[0]["buffer"] == 0


def test_two_records_of_one_case_compare_equal_and_a_data_dependent_grid_does_not():
    same = parse_record(_record(), inputs=2)
    assert same.structure() == parse_record(_record(), inputs=2).structure()
    other = _record()
    other["steps"][0]["grid"] = [2048, 1, 1]
    assert parse_record(other, inputs=2).structure() != same.structure()


@pytest.mark.parametrize(("change", "reason"), [
    ({"torch_work": ["aten.add"]}, "torch operations on the GPU (aten.add)"),
    ({"data_dependent": ["a GPU value read on the host (.item() or a Python comparison)"]}, "depend on the data"),
    ({"steps": []}, "launched no Triton kernel"),
    ({"steps": [{"zero": {"buffer": 0, "offset": 0}, "nbytes": 64}]}, "launched no Triton kernel"),
    ({"outputs": [{"not_a_cuda_tensor": "Tensor"}]}, "output 0 is not a CUDA tensor"),
    ({"buffers": [{"nbytes": -1}]}, "buffer size"),
    ({"steps": "everything"}, "steps, buffers or outputs missing"),
])
def test_what_replay_cannot_repeat_is_refused_with_the_reason(change, reason):
    with pytest.raises(RecordRefused, match=reason.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_record(_record(**change), inputs=2)


@pytest.mark.parametrize("argument", [
    {"input": 2, "offset": 0},  # an input the call does not have
    {"buffer": 1, "offset": 0},  # a buffer the record does not declare
    {"input": 0, "buffer": 0, "offset": 0},  # two storages at once
    {"input": 0, "offset": -8},
    {"input": True, "offset": 0},  # a bool is not an index
    {"float": "not hex"},
    {"unsupported": "TensorDescriptor"},
    "0x7f00deadbeef",
])
def test_a_launch_argument_outside_the_named_storages_is_refused(argument):
    record = _record()
    record["steps"][0]["arguments"][0] = argument
    with pytest.raises(RecordRefused):
        parse_record(record, inputs=2)


def test_a_grid_of_zero_or_an_unnamed_kernel_is_refused():
    for step_change in ({"grid": [0, 1, 1]}, {"grid": [1, 1]}, {"launch": "../../etc/passwd"}, {"launch": 7}):
        record = _record()
        record["steps"][0].update(step_change)
        with pytest.raises(RecordRefused):
            parse_record(record, inputs=2)


def test_an_oversized_record_is_refused():
    record = _record()
    record["steps"] = [copy.deepcopy(record["steps"][0]) for _ in range(65)]
    with pytest.raises(RecordRefused, match="over 64 steps"):
        parse_record(record, inputs=2)


@pytest.mark.parametrize(("payload", "reason"), [
    (None, "the payload is for another kernel"),
    ({"hash": "b" * 64}, "the payload is for another kernel"),
    ({"hash": KERNEL, "metadata": {}, "signature": {"x": "*fp32"}}, "metadata, signature or binary missing"),
    ({"hash": KERNEL, "metadata": {}, "signature": {"d": "tensordesc<fp16[64, 64]>"}, "binary": ""},
     "the binary is not a CUDA kernel"),
    ({"hash": KERNEL, "metadata": {}, "signature": {"x": "*fp32"}, "binary": "not base64!"}, "not base64"),
])
def test_a_kernel_payload_the_judge_cannot_load_is_refused_before_the_driver_sees_it(payload, reason):
    library = KernelLibrary()
    with pytest.raises(RecordRefused, match=reason):
        library.load(KERNEL, payload)
    assert KERNEL not in library


def test_a_parsed_record_written_back_reads_as_the_same_recording():
    """The ncu child replays the record the judge parsed, written back in the candidate's wire format."""
    record = _record()
    record["steps"][0]["arguments"][3] = {"float": (0.1).hex()}
    record["steps"].insert(0, {"zero": {"buffer": 0, "offset": 0}, "nbytes": 64})
    recording = parse_record(record, inputs=2)
    again = parse_record(recording.to_record(), inputs=2)
    assert again == recording and again.steps[1]["arguments"][3] == {"float": 0.1}
