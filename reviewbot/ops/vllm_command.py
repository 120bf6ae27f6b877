"""The ``vllm serve`` command line that starts a model server as a capacity plan sizes it.

Owns: the flags every reviewbot model server needs, whatever the hardware (see deploy/vllm/),
and the sized ones from a `reviewbot.ops.capacity.CapacityPlan`. Pure: a plan in, a shell
command out, one flag a line, each line but the last ending in a backslash.

Must not: plan anything itself (`reviewbot.ops.capacity` does) or print.
"""

from __future__ import annotations

import shlex

from reviewbot.ops.capacity import CapacityPlan

__all__ = [
    "CONTINUATION",
    "REVIEWBOT_SERVE_FLAGS",
    "TEXT_ONLY_FLAG",
    "vllm_serve_lines",
]

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
    # thread answers and first reviews before long reviews (docs/model-server.md)
    "--scheduling-policy",
    "priority",
)
# reviewbot sends text only: skip a vision-language model's encoder (weights and profiling).
TEXT_ONLY_FLAG = "--language-model-only"
# Between the lines of a command printed for pasting: a shell reads it as one command.
CONTINUATION = " \\\n    "


def vllm_serve_lines(model: str, plan: CapacityPlan, multimodal: bool) -> str:
    """The ``vllm serve`` command for a plan as printed: one flag (with its value) a line, each
    line but the last ending in `` \\``, so a paste into a shell runs it whole at any terminal
    width."""
    groups: list[list[str]] = []
    for word in _argv(model, plan, multimodal):
        if word.startswith("--") or not groups:
            groups.append([])
        groups[-1].append(shlex.quote(word))
    return CONTINUATION.join(" ".join(group) for group in groups)


def _argv(model: str, plan: CapacityPlan, multimodal: bool) -> list[str]:
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
    return argv
