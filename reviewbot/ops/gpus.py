"""The GPUs our users run vLLM on: memory, compute capability, number formats, compute.

Memory is what CUDA reports as the card's total (``nvidia-smi``'s "Total", in MiB), because that
is what vLLM multiplies by ``--gpu-memory-utilization``; it is a little below the marketing
figure (ECC and the driver keep some). Figures come from NVIDIA's datasheets and public
``nvidia-smi`` listings; the ones we could not confirm are marked in ``note``.

Owns: the table of GPUs and finding one by name. Must not: probe the local hardware (the user names
the card) or guess a figure (an unconfirmed one is marked, a missing one is None).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB_PER_GIB = 1024
# Ampere (sm80) is the first generation with bfloat16 tensor cores; Ada (sm89) the first with fp8.
BF16_MIN_CAPABILITY = (8, 0)
FP8_MIN_CAPABILITY = (8, 9)


class UnknownGpuError(ValueError):
    """The GPU name is not in the table."""


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: int
    compute_capability: tuple[int, int]
    architecture: str
    # Dense fp16/bf16 tensor-core peak (TFLOPS) from the datasheet; None where we have no
    # trustworthy figure (then no time estimate is made for this GPU).
    fp16_tensor_tflops: float | None
    note: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / MIB_PER_GIB

    @property
    def bf16(self) -> bool:
        return self.compute_capability >= BF16_MIN_CAPABILITY

    @property
    def fp8(self) -> bool:
        """Native fp8 tensor cores (fp8 weights still load on older GPUs, weight-only)."""
        return self.compute_capability >= FP8_MIN_CAPABILITY

    @property
    def sm(self) -> str:
        major, minor = self.compute_capability
        return f"sm{major}{minor}"


GPUS: dict[str, Gpu] = {
    gpu.name.lower(): gpu
    for gpu in (
        Gpu("T4", 15360, (7, 5), "Turing", 65.0),
        Gpu(
            "T10",
            15360,
            (7, 5),
            "Turing",
            None,
            note="Tesla T10: Turing TU102, 16 GB GDDR6, no bf16, no fp8 (it is not Ampere). "
            "We plan with the T4's 15360 MiB visible (same 16 GB size); public listings "
            "disagree on the T10's memory and list no tensor-core peak, so no time estimate.",
        ),
        Gpu("A10", 23028, (8, 6), "Ampere", 125.0),
        Gpu("L4", 23034, (8, 9), "Ada", 121.0),
        Gpu("RTX3090", 24576, (8, 6), "Ampere", 71.0, note="GeForce: fp16 with fp32 accumulate"),
        Gpu(
            "RTX4090",
            24564,
            (8, 9),
            "Ada",
            165.0,
            note="GeForce: fp16 with fp32 accumulate (330 with fp16 accumulate)",
        ),
        Gpu("A100-40GB", 40960, (8, 0), "Ampere", 312.0),
        Gpu("A100-80GB", 81920, (8, 0), "Ampere", 312.0),
        Gpu("H100", 81559, (9, 0), "Hopper", 989.0, note="H100 SXM 80 GB"),
        Gpu("H200", 143771, (9, 0), "Hopper", 989.0, note="H200 SXM 141 GB"),
    )
}

ALIASES = {
    "tesla-t4": "t4",
    "tesla-t10": "t10",
    "3090": "rtx3090",
    "rtx-3090": "rtx3090",
    "4090": "rtx4090",
    "rtx-4090": "rtx4090",
    "a100": "a100-80gb",
    "a100-40g": "a100-40gb",
    "a100-80g": "a100-80gb",
    "a100-40": "a100-40gb",
    "a100-80": "a100-80gb",
    "h100-80gb": "h100",
}


def find_gpu(name: str) -> Gpu:
    """The GPU called ``name`` (case, spaces and a leading "NVIDIA" do not matter)."""
    key = name.strip().lower().replace(" ", "-").replace("_", "-").removeprefix("nvidia-")
    key = ALIASES.get(key, key)
    if key not in GPUS:
        known = ", ".join(g.name for g in GPUS.values())
        raise UnknownGpuError(f"unknown GPU {name!r} (known: {known})")
    return GPUS[key]
