"""What would fit when a capacity plan does not: one change to the launch settings at a time,
each planned again and kept only when its ``vllm serve`` command would start.

The changes, cheapest first: the prefill chunk or the memory share the user pinned, a shorter
context, a smaller quantization, more GPUs (tensor parallel, within one box); when no one change
fits, a smaller quantization on more GPUs. Each is the smallest such change that fits, found by
planning (`reviewbot.ops.capacity.plan_capacity`), never by a formula of its own.

Owns: that search and the words of each alternative. Must not: do VRAM arithmetic itself,
read a file, or print.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reviewbot.ops.capacity import (
    MAX_SAFE_GPU_MEMORY_UTILIZATION,
    MIN_CAPABILITY,
    CapacityError,
    LaunchSettings,
    plan_capacity,
    split_refusals,
)
from reviewbot.ops.gpus import Gpu
from reviewbot.ops.model_shape import ModelShape

__all__ = ["MAX_SUGGESTED_GPUS", "MODEL_LEN_STEP", "Alternative", "what_would_fit"]

# A shorter context is offered in whole steps of this many tokens (a number people type).
MODEL_LEN_STEP = 1024
# More GPUs are offered up to one box's worth: tensor parallelism across boxes is slow
# (every layer's all-reduce crosses the network), and eight is the most GPUs a server holds.
MAX_SUGGESTED_GPUS = 8
# The weight formats smaller than each one, smallest last (what a checkpoint is published in).
SMALLER_FORMATS = {
    "bf16": ("fp8", "gptq-int4"),
    "fp16": ("fp8", "gptq-int4"),
    "fp8": ("gptq-int4",),
    "gptq-int4": (),
    "awq-int4": (),
}


@dataclass(frozen=True)
class Alternative:
    """One change that makes the plan fit: the flags to change, and what the change means."""

    flags: str
    why: str


def _runnable(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> bool:
    try:
        return plan_capacity(shape, gpu, settings).runnable
    except CapacityError:  # a variant the planner refuses (a split vLLM cannot make) never fits
        return False


def _pinned_values(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> list[Alternative]:
    """The prefill chunk or the memory share the user chose, left to the planner (or raised to
    the safe maximum)."""
    found = []
    if settings.max_num_batched_tokens is not None:
        plan = plan_capacity(shape, gpu, replace(settings, max_num_batched_tokens=None))
        if plan.runnable:
            chunk = plan.recommended.max_num_batched_tokens
            found.append(
                Alternative(
                    f"--max-num-batched-tokens {chunk}",
                    "a smaller prefill chunk: less activation memory, later first tokens",
                )
            )
    utilization = settings.gpu_memory_utilization
    if utilization is not None and utilization < MAX_SAFE_GPU_MEMORY_UTILIZATION:
        raised = replace(settings, gpu_memory_utilization=MAX_SAFE_GPU_MEMORY_UTILIZATION)
        if _runnable(shape, gpu, raised):
            found.append(
                Alternative(
                    f"--gpu-memory-utilization {MAX_SAFE_GPU_MEMORY_UTILIZATION}",
                    "the largest share of each GPU vLLM can take without running out at load",
                )
            )
    return found


def _shorter_context(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> list[Alternative]:
    """The longest ``--max-model-len`` in whole MODEL_LEN_STEPs that fits (fewer tokens never
    need more memory, so a bisection finds it)."""

    def fits(steps: int) -> bool:
        tokens = steps * MODEL_LEN_STEP
        prompt = settings.prompt_tokens
        return _runnable(
            shape,
            gpu,
            replace(
                settings,
                max_model_len=tokens,
                prompt_tokens=prompt if prompt is not None and prompt <= tokens else None,
            ),
        )

    low, high = 1, (settings.max_model_len - 1) // MODEL_LEN_STEP
    if high < low or not fits(low):
        return []
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return [
        Alternative(
            f"--max-model-len {low * MODEL_LEN_STEP}",
            "the longest context that fits (reviewbot cuts its prompts to the server's context)",
        )
    ]


def _smaller_formats(gpu: Gpu, quantization: str) -> list[str]:
    """The formats smaller than ``quantization`` that vLLM runs on ``gpu``."""
    return [
        smaller
        for smaller in SMALLER_FORMATS.get(quantization, ())
        if gpu.compute_capability >= MIN_CAPABILITY.get(smaller, gpu.compute_capability)
    ]


def _smaller_weights(
    shape: ModelShape, gpu: Gpu, settings: LaunchSettings, quantization: str
) -> list[Alternative]:
    for smaller in _smaller_formats(gpu, quantization):
        if _runnable(shape, gpu, replace(settings, quantization=smaller)):
            return [
                Alternative(
                    f"--quantization {smaller}",
                    f"weights in {smaller}: serve a checkpoint published in that format",
                )
            ]
    return []


def _fewest_gpus(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> int | None:
    """The smallest tensor parallel size above the present one, within one box, that splits
    the heads evenly and fits; None when none does."""
    for more in range((settings.tensor_parallel_size or settings.gpus) + 1, MAX_SUGGESTED_GPUS + 1):
        if not split_refusals(shape, more) and _runnable(shape, gpu, _on_gpus(settings, more)):
            return more
    return None


def _on_gpus(settings: LaunchSettings, tp: int) -> LaunchSettings:
    pinned = settings.tensor_parallel_size is not None
    return replace(
        settings, gpus=max(settings.gpus, tp), tensor_parallel_size=tp if pinned else None
    )


def _gpus_flags(settings: LaunchSettings, tp: int) -> str:
    gpus = max(settings.gpus, tp)
    flags = [f"--gpus {gpus}"] if gpus != settings.gpus else []
    if settings.tensor_parallel_size is not None or gpus != tp:
        flags.append(f"--tensor-parallel-size {tp}")
    return " ".join(flags)


def _more_gpus(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> list[Alternative]:
    tp = _fewest_gpus(shape, gpu, settings)
    if tp is None:
        return []
    why = f"tensor parallel {tp}: each GPU holds 1/{tp} of the weights"
    return [Alternative(_gpus_flags(settings, tp), why)]


def _smaller_weights_on_more_gpus(
    shape: ModelShape, gpu: Gpu, settings: LaunchSettings, quantization: str
) -> list[Alternative]:
    """Two changes, when no single one fits: the smaller format that needs the fewest GPUs
    (the larger format of two that need as many), on those GPUs."""
    best: tuple[int, str] | None = None
    for smaller in _smaller_formats(gpu, quantization):
        tp = _fewest_gpus(shape, gpu, replace(settings, quantization=smaller))
        if tp is not None and (best is None or tp < best[0]):
            best = (tp, smaller)
    if best is None:
        return []
    tp, smaller = best
    return [
        Alternative(
            f"--quantization {smaller} {_gpus_flags(settings, tp)}",
            f"weights in {smaller}, tensor parallel {tp}: each GPU holds 1/{tp} of them",
        )
    ]


def what_would_fit(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> list[Alternative]:
    """Alternatives to ``settings`` whose plan is runnable, cheapest first: each one change,
    or a smaller format on more GPUs when no one change fits; empty when nothing does (or when
    ``settings`` already fits)."""
    if _runnable(shape, gpu, settings):
        return []
    quantization = plan_capacity(shape, gpu, settings).quantization
    found = _pinned_values(shape, gpu, settings)
    found += _shorter_context(shape, gpu, settings)
    found += _smaller_weights(shape, gpu, settings, quantization)
    found += _more_gpus(shape, gpu, settings)
    return found or _smaller_weights_on_more_gpus(shape, gpu, settings, quantization)
