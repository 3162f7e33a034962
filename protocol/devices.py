"""What a device can do at most: datasheet peaks per GPU, each with its source.

The judge believes no measurement faster than physics allows (`orchestrator/decision/physics.py`), and the
report shows each case's percent of these peaks. Figures are the vendor's dense (no sparsity) peaks at boost
clock: no kernel exceeds them, so a result above one is a measurement that was faked or a harness whose work
figures count more than the kernel must do. A device with no entry gets no physics check, and the run says so.

`name_pattern` is matched, case-insensitively, against the name torch reports (`torch.cuda.get_device_name`);
entries are tried in order, so the more specific names come first ("H100 NVL" before "H100").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class DevicePeaks(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    name_pattern: str  # a regular expression over the reported device name
    memory_bytes_per_s: float  # DRAM (HBM/GDDR) bandwidth
    # dense FLOP/s by the dtype of the arithmetic: float64, float32 (CUDA cores), tfloat32, float16 and bfloat16
    # (tensor cores), float8, int8 (operations per second)
    flop_per_s: dict[str, float]
    source: str
    # streaming multiprocessors (NVIDIA's architecture documentation per product): what a persistent kernel's
    # wrapper reads from torch.cuda.get_device_properties, answered without a GPU by compile ahead
    multiprocessors: int | None = None

    @property
    def highest_flop_per_s(self) -> float:
        return max(self.flop_per_s.values())

    def flop_per_s_for(self, dtype: str | None) -> float:
        """The peak for arithmetic in `dtype` ("float16", "bf16", "fp8", ...); the highest peak when the dtype is
        unknown or has no entry, so an unknown dtype never makes an honest kernel look impossible."""
        key = _FLOP_DTYPES.get((dtype or "").lower().removeprefix("torch."))
        return self.flop_per_s.get(key, self.highest_flop_per_s) if key else self.highest_flop_per_s


_FLOP_DTYPES = {
    "float64": "float64", "fp64": "float64", "double": "float64",
    "float32": "tfloat32", "fp32": "tfloat32", "float": "tfloat32",  # Triton's fp32 dot uses tf32 by default
    "tfloat32": "tfloat32", "tf32": "tfloat32",
    "float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "float16", "bf16": "float16",
    "float8": "float8", "fp8": "float8", "float8_e4m3fn": "float8", "float8_e5m2": "float8",
    "int8": "int8",
}

_HOPPER = "NVIDIA H100/H200 Tensor Core GPU datasheets (nvidia.com/en-us/data-center/h100, /h200), dense figures"
_HOPPER_SXM = {"float64": 34e12, "float32": 67e12, "tfloat32": 494.5e12, "float16": 989.5e12, "float8": 1_979e12,
               "int8": 1_979e12}
_HOPPER_NVL = {"float64": 30e12, "float32": 60e12, "tfloat32": 417e12, "float16": 835e12, "float8": 1_670e12,
               "int8": 1_670e12}
_AMPERE_FLOPS = {"float64": 9.7e12, "float32": 19.5e12, "tfloat32": 156e12, "float16": 312e12, "int8": 624e12}
_AMPERE = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), dense figures"
_BLACKWELL = "NVIDIA DGX B200 / HGX B200 datasheet (nvidia.com/en-us/data-center/hgx), per GPU, dense figures"
_ADA = "NVIDIA L40S / L4 datasheets (nvidia.com/en-us/data-center/l40s, /l4), dense figures"

DEVICE_PEAKS: tuple[DevicePeaks, ...] = (
    DevicePeaks(name="GH200", multiprocessors=132, name_pattern=r"GH200", memory_bytes_per_s=4.9e12,
                flop_per_s=_HOPPER_SXM,
                source="NVIDIA GH200 Grace Hopper Superchip datasheet (HBM3e variant), dense figures"),
    DevicePeaks(name="H200 NVL", multiprocessors=132, name_pattern=r"H200\s*NVL", memory_bytes_per_s=4.8e12,
                flop_per_s=_HOPPER_NVL, source=_HOPPER),
    DevicePeaks(name="H200 SXM", multiprocessors=132, name_pattern=r"H200", memory_bytes_per_s=4.8e12,
                flop_per_s=_HOPPER_SXM, source=_HOPPER),
    DevicePeaks(name="H100 NVL", multiprocessors=132, name_pattern=r"H100\s*NVL", memory_bytes_per_s=3.9e12,
                flop_per_s=_HOPPER_NVL, source=_HOPPER),
    DevicePeaks(name="H100 PCIe", multiprocessors=114, name_pattern=r"H100\s*PCIe", memory_bytes_per_s=2.0e12,
                flop_per_s={"float64": 26e12, "float32": 51e12, "tfloat32": 378e12, "float16": 756e12,
                            "float8": 1_513e12, "int8": 1_513e12}, source=_HOPPER),
    DevicePeaks(name="H100 SXM", multiprocessors=132, name_pattern=r"H100", memory_bytes_per_s=3.35e12,
                flop_per_s=_HOPPER_SXM, source=_HOPPER),
    DevicePeaks(name="B200", multiprocessors=148, name_pattern=r"B200", memory_bytes_per_s=8.0e12,
                flop_per_s={"float64": 40e12, "float32": 80e12, "tfloat32": 1_100e12, "float16": 2_250e12,
                            "float8": 4_500e12, "int8": 4_500e12}, source=_BLACKWELL),
    DevicePeaks(name="A100 80GB PCIe", multiprocessors=108, name_pattern=r"A100.*80GB.*PCIe|A100.*PCIe.*80GB", memory_bytes_per_s=1.935e12,
                flop_per_s=_AMPERE_FLOPS, source=_AMPERE),
    DevicePeaks(name="A100 80GB SXM", multiprocessors=108, name_pattern=r"A100.*80GB", memory_bytes_per_s=2.039e12,
                flop_per_s=_AMPERE_FLOPS, source=_AMPERE),
    DevicePeaks(name="A100 40GB", multiprocessors=108, name_pattern=r"A100", memory_bytes_per_s=1.555e12,
                flop_per_s=_AMPERE_FLOPS, source=_AMPERE),
    DevicePeaks(name="L40S", multiprocessors=142, name_pattern=r"L40S", memory_bytes_per_s=864e9,
                flop_per_s={"float32": 91.6e12, "tfloat32": 183e12, "float16": 362e12, "float8": 733e12,
                            "int8": 733e12}, source=_ADA),
    DevicePeaks(name="L4", multiprocessors=58, name_pattern=r"\bL4\b", memory_bytes_per_s=300e9,
                flop_per_s={"float32": 30.3e12, "tfloat32": 60e12, "float16": 121e12, "float8": 242e12,
                            "int8": 242e12}, source=_ADA),
)


def peaks_for(device_name: str | None) -> DevicePeaks | None:
    """The first entry whose pattern occurs in `device_name`; None for an unknown device (or none named)."""
    if not device_name:
        return None
    return next((entry for entry in DEVICE_PEAKS if re.search(entry.name_pattern, device_name, re.IGNORECASE)), None)
