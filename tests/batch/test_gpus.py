"""Which GPUs a local batch uses: the --gpus spelling, CUDA_VISIBLE_DEVICES, and nvidia-smi's list."""

from __future__ import annotations

import pytest

from orchestrator.batch.gpus import (
    GpuSpecError,
    parse_gpu_spec,
    parse_nvidia_smi_list,
    visible_from_environment,
)

NVIDIA_SMI_L = """GPU 0: NVIDIA H200 (UUID: GPU-0b6f0a4c-1111-2222-3333-444455556666)
GPU 1: NVIDIA H200 (UUID: GPU-9d0e2a1b-1111-2222-3333-444455556666)
  MIG 1g.18gb     Device  0: (UUID: MIG-aaaa)
"""


def test_gpu_spec():
    assert parse_gpu_spec("0,1") == ["0", "1"]
    assert parse_gpu_spec(" 3 ") == ["3"]
    assert parse_gpu_spec("none") == [] and parse_gpu_spec("NONE") == []
    assert parse_gpu_spec("all") is None  # discover
    with pytest.raises(GpuSpecError, match="indices like 0,1"):
        parse_gpu_spec("0,gpu1")
    with pytest.raises(GpuSpecError, match="twice"):
        parse_gpu_spec("1,1")


def test_visible_devices_from_the_environment():
    assert visible_from_environment({}) is None  # unset: every GPU is visible
    assert visible_from_environment({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_from_environment({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_from_environment({"CUDA_VISIBLE_DEVICES": "-1"}) == []


def test_nvidia_smi_list_gives_gpu_indices_not_mig_devices():
    assert parse_nvidia_smi_list(NVIDIA_SMI_L) == ["0", "1"]
    assert parse_nvidia_smi_list("") == []
