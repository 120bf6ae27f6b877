"""The ``vllm serve`` command line that starts a model server as a capacity plan sizes it.

Owns: the flags every reviewbot model server needs, whatever the hardware (see deploy/vllm/),
and the sized ones from a `reviewbot.ops.capacity.CapacityPlan`. Pure: a plan in, a shell
command line out.

Must not: plan anything itself (`reviewbot.ops.capacity` does) or print.
"""

from __future__ import annotations

import shlex

from reviewbot.ops.capacity import CapacityPlan

__all__ = ["REVIEWBOT_SERVE_FLAGS", "TEXT_ONLY_FLAG", "vllm_serve_command"]

# Flags every reviewbot model server needs, whatever the hardware (see deploy/vllm/).
REVIEWBOT_SERVE_FLAGS = (
    "--enable-prefix-caching",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
    "--enable-prompt-tokens-details",
    "--generation-config",
    "vllm",
)
# reviewbot sends text only: skip a vision-language model's encoder (weights and profiling).
TEXT_ONLY_FLAG = "--language-model-only"


def vllm_serve_command(model: str, plan: CapacityPlan, multimodal: bool) -> str:
    """The ``vllm serve`` command line for a plan."""
    recommended = plan.recommended
    argv = [
        "vllm",
        "serve",
        model,
        "--tensor-parallel-size",
        str(plan.tensor_parallel_size),
        "--max-model-len",
        str(plan.max_model_len),
        "--max-num-seqs",
        str(recommended.max_num_seqs),
        "--max-num-batched-tokens",
        str(recommended.max_num_batched_tokens),
        "--gpu-memory-utilization",
        str(recommended.gpu_memory_utilization),
        "--dtype",
        recommended.dtype,
        "--kv-cache-dtype",
        recommended.kv_cache_dtype,
        *REVIEWBOT_SERVE_FLAGS,
    ]
    if multimodal:
        argv.append(TEXT_ONLY_FLAG)
    if plan.quantization == "fp8" and "fp8" not in model.lower():
        argv += ["--quantization", "fp8"]
    return shlex.join(argv)
