"""VRAM arithmetic for serving a model with vLLM: weights, KV cache, state, what fits.

Pure functions: a :class:`ModelShape`, a :class:`Gpu` and the launch settings in, a
:class:`CapacityPlan` out. The formulas are explained in ``docs/capacity.md``; in short:

- weights per GPU: every matrix is split across the tensor-parallel ranks, except the full
  attention's K/V projections when there are fewer KV heads than ranks (each rank then keeps a
  whole KV head) and the small replicated pieces (router, norms). Quantized formats cover every
  linear layer of the decoder (attention, DeltaNet projections, experts, shared expert) and add
  their scales (and zeros) per group; embeddings, lm-head, routers, the DeltaNet decay/beta
  projections and conv, and the norms stay 16-bit.
- KV cache per token per GPU: only full-attention layers, 2 (K and V) x KV heads on this rank x
  head_dim x KV dtype bytes.
- linear-attention state per sequence per GPU: conv state + recurrent state of each DeltaNet layer.
- vLLM pages both into blocks of one size (the attention block grows until one block holds a
  DeltaNet state) and hands out blocks per layer group; a sequence of L tokens takes
  ``ceil(L / block)`` attention blocks plus 2 state blocks per DeltaNet group (prefix caching
  keeps the state at the last block boundary too).

Owns: the VRAM arithmetic, the checks of the launch settings and the recommended ``vllm serve``
values. Must not: read a file (a ``ModelShape`` is handed in), probe a GPU or a server, or print.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from reviewbot.ops.gpus import Gpu
from reviewbot.ops.model_shape import DTYPE_BYTES, MAX_POSITIONS, ModelShape

GIB = 1024**3

# --- defaults of the launch settings --------------------------------------------------------
DEFAULT_MAX_MODEL_LEN = 65536
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# Above this, CUDA graphs, NCCL and allocator fragmentation have too little room: OOM at load.
MAX_SAFE_GPU_MEMORY_UTILIZATION = 0.95
# vLLM's chunked-prefill chunk: the most prompt tokens one forward pass processes.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
SMALLER_BATCHED_TOKENS = (4096, 2048)
# The planner never recommends more sequences than this: decode is already compute-bound far
# below it, and every extra long prompt in the queue adds a full prefill to the last one's TTFT.
MAX_RECOMMENDED_NUM_SEQS = 64
# vLLM's default --max-num-seqs, used to size the sampler's logits during memory profiling.
VLLM_DEFAULT_MAX_NUM_SEQS = 256
# Upper bounds of the launch settings: far above any server (8 GPUs a box, tensor parallel
# across a few boxes, vLLM's largest --max-num-seqs in the thousands), so a typo is one clear
# line instead of an absurd plan; token counts are bounded like the model's positions.
MAX_GPUS = 1024
MAX_NUM_SEQS = 65_536
MAX_TOKENS = MAX_POSITIONS
MAX_TTFT_TARGET_S = 86_400.0  # a day

# --- quantization ---------------------------------------------------------------------------
QUANTIZATIONS = ("bf16", "fp16", "fp8", "gptq-int4", "awq-int4")
QUANTIZATION_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "none": None,
    "auto": None,
    "gptq": "gptq-int4",
    "gptq_marlin": "gptq-int4",
    "awq": "awq-int4",
    "awq_marlin": "awq-int4",
    "int4": "gptq-int4",
}
INT4_BYTES = 0.5
# GPTQ/AWQ store one fp16 scale and one packed 4-bit zero per group of input rows.
INT4_GROUP_OVERHEAD_BYTES = 2 + 0.5
DEFAULT_INT4_GROUP_SIZE = 128
FP8_BYTES = 1
# Block-wise fp8 checkpoints carry one fp32 scale per 128 x 128 block.
FP8_BLOCK_SCALE_BYTES = 4 / (128 * 128)
# vLLM's minimum compute capability per format (QuantizationConfig.get_min_capability):
# GPTQ/AWQ run through Marlin, which supports Turing (75); fp8 loads on 75+ and runs weight-only
# through Marlin below Ada (89), where there are no fp8 tensor cores.
MIN_CAPABILITY = {"gptq-int4": (7, 5), "awq-int4": (7, 5), "fp8": (7, 5)}

# --- KV cache dtype -------------------------------------------------------------------------
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")

# --- vLLM's paged KV cache for hybrid models ------------------------------------------------
# Attention kernels take blocks of a multiple of 16 tokens.
KERNEL_BLOCK_ALIGNMENT = 16
# With prefix caching, vLLM's "align" mamba cache mode keeps two state blocks per sequence and
# DeltaNet group (MambaSpec.max_memory_usage_bytes: page_size * (2 + speculative blocks)).
STATE_BLOCKS_PER_SEQUENCE = 2

# --- memory vLLM keeps outside weights and KV cache (per GPU) -------------------------------
# Non-torch allocations counted in the budget: cuBLAS/cuDNN workspaces, the CUDA context's growth.
RUNTIME_RESERVE_GIB = 0.5
# NCCL buffers for tensor-parallel all-reduces (only when TP > 1).
NCCL_RESERVE_GIB = 0.25
# Captured CUDA graphs' private memory pool (vLLM logs 0.3-1 GiB for its default batch sizes).
CUDA_GRAPH_RESERVE_GIB = 0.5
# Peak activations of one forward pass of max_num_batched_tokens tokens, as a multiple of one
# hidden-state tensor (residual, norms, projections, MoE routing buffers, DeltaNet chunks).
ACTIVATION_HIDDEN_COPIES = 24
# The sampler's fp32 logits for max_num_seqs rows (plus one working copy).
LOGITS_COPIES = 2
FP32_BYTES = 4
# These four were chosen so that the H200 measurement in docs/capacity.md (Qwen3.5-35B-A3B bf16:
# 64.69 GiB weights + 62.38 GiB KV cache at utilization 0.92) is reproduced: 2.1 GiB left over.

# --- prefill time (an estimate; loadtest measures it) ---------------------------------------
# A first token = a fixed cost (the API server, tokenizing, scheduling, the first streamed delta)
# + the prefill's compute at a share of the datasheet tensor TFLOPS. Fitted on one H200 with the
# shipped FP8 profile (vLLM 0.26, 2026-12-02, docs/capacity.md): a 5,210-token prompt alone
# 0.30 s, a 56,950-token one 1.75 s (compute alone had said 0.08 s and 1.62 s: the fixed cost was
# missing). The earlier bf16 point (61K tokens alone in 1.8 s) is 1.92 s by this fit (+7%).
FIRST_TOKEN_OVERHEAD_S = 0.225
PREFILL_EFFICIENCY = 0.361
# Tensor-parallel ranks do not scale perfectly (all-reduce after every layer).
TENSOR_PARALLEL_EFFICIENCY = 0.8
# Concurrent long prompts are prefilled one after another: 8 prompts of 61K tokens sent at once,
# the last one's first token came after 12.6 s (1.8 s + 7 x 1.54 s), so each prompt ahead in the
# queue adds 0.857 of a lone prefill (chunks of different prompts share a forward pass a little).
QUEUED_PREFILL_COST_RATIO = (12.6 - 1.8) / (7 * 1.8)
# A Gated DeltaNet layer updates a (key x value) state per value head: ~6 flops per element.
DELTANET_FLOPS_PER_STATE_ELEMENT = 6


class CapacityError(ValueError):
    """Launch settings that cannot be planned (bad input: one line, exit 2)."""


@dataclass(frozen=True)
class LaunchSettings:
    gpus: int = 1
    tensor_parallel_size: int | None = None
    quantization: str | None = None
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    prefix_caching: bool = True
    # The first-token wait the deepest queue position may have (None: sequences are limited by
    # memory only), for prompts of ``prompt_tokens`` (None: max_model_len, the worst case).
    ttft_target_s: float | None = None
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class WeightBreakdown:
    """Bytes per GPU of each part of the weights."""

    embeddings: float
    lm_head: float
    full_attention: float
    linear_attention: float
    mlp: float
    replicated: float

    @property
    def total(self) -> float:
        return (
            self.embeddings
            + self.lm_head
            + self.full_attention
            + self.linear_attention
            + self.mlp
            + self.replicated
        )


@dataclass(frozen=True)
class PagedCache:
    """How vLLM lays the KV cache and DeltaNet states out in blocks (per GPU)."""

    block_size: int
    page_bytes: int
    layers_per_group: int
    attention_groups: int
    state_groups: int

    def blocks_per_sequence(self, tokens: int, state_blocks: int) -> int:
        return math.ceil(tokens / self.block_size) * self.attention_groups + (
            self.state_groups * state_blocks
        )

    def blocks_in(self, cache_bytes: float) -> int:
        return max(0, int(cache_bytes // (self.page_bytes * self.layers_per_group)))


@dataclass(frozen=True)
class Recommended:
    max_num_seqs: int
    gpu_memory_utilization: float
    dtype: str
    max_num_batched_tokens: int
    kv_cache_dtype: str
    max_num_seqs_reason: str = ""


@dataclass
class CapacityPlan:
    model: str
    gpu: str
    gpus: int
    tensor_parallel_size: int
    quantization: str
    max_model_len: int
    kv_cache_dtype: str
    gpu_memory_utilization: float
    weights_gib_per_gpu: float
    weights_breakdown_gib_per_gpu: dict[str, float]
    reserve_gib_per_gpu: float
    kv_bytes_per_token_per_gpu: int
    state_bytes_per_sequence_per_gpu: int
    vllm_block_size: int
    kv_cache_blocks: int
    kv_cache_gib_per_gpu: float
    max_sequences_at_max_model_len: float
    kv_cache_tokens: int
    recommended: Recommended
    ttft_estimate_s: dict[str, Any] | None
    fits: bool
    # The recommended settings hold one sequence of max_model_len and keep every value the user
    # chose (a smaller prefill chunk the user did not ask for is the planner's own choice): the
    # ``vllm serve`` command of this plan starts. False: `reviewbot.ops.alternatives` says
    # what would fit instead.
    runnable: bool
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- small helpers --------------------------------------------------------------------------


def normalize_quantization(value: str | None) -> str | None:
    if value is None:
        return None
    key = value.strip().lower()
    if key in QUANTIZATION_ALIASES:
        return QUANTIZATION_ALIASES[key]
    if key not in QUANTIZATIONS:
        raise CapacityError(f"unknown quantization {value!r} (one of {', '.join(QUANTIZATIONS)})")
    return key


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> int:
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise CapacityError(
            f"unknown KV cache dtype {kv_cache_dtype!r} (one of {', '.join(KV_CACHE_DTYPES)})"
        )
    if kv_cache_dtype.startswith("fp8"):
        return FP8_BYTES
    if kv_cache_dtype == "auto":
        return model_dtype_bytes
    return DTYPE_BYTES[kv_cache_dtype]


def kv_heads_per_gpu(shape: ModelShape, tp: int) -> int:
    """GQA KV heads are split across ranks; with more ranks than KV heads each keeps one."""
    return max(1, shape.num_key_value_heads // tp)


def quantized_bytes_per_param(
    quantization: str, group_size: int = DEFAULT_INT4_GROUP_SIZE
) -> float:
    if quantization in ("bf16", "fp16"):
        return DTYPE_BYTES["bfloat16"]
    if quantization == "fp8":
        return FP8_BYTES + FP8_BLOCK_SCALE_BYTES
    return INT4_BYTES + INT4_GROUP_OVERHEAD_BYTES / group_size


# --- weights --------------------------------------------------------------------------------


def weight_bytes_per_gpu(shape: ModelShape, quantization: str, tp: int) -> WeightBreakdown:
    """Weights each tensor-parallel rank holds (the language model only: profiles run vLLM
    with ``--language-model-only``, so the vision encoder is not loaded)."""
    half = DTYPE_BYTES["bfloat16"]
    packed = quantized_bytes_per_param(quantization)
    hidden = shape.hidden_size
    embedding = shape.vocab_size * hidden / tp * half
    lm_head = 0.0 if shape.tie_word_embeddings else embedding
    q_width = shape.num_attention_heads * shape.head_dim * (2 if shape.attn_output_gate else 1)
    attention = (
        (
            hidden * q_width / tp
            + 2 * hidden * shape.head_dim * kv_heads_per_gpu(shape, tp)
            + shape.num_attention_heads * shape.head_dim * hidden / tp
        )
        * packed
        * shape.full_attention_layers
    )
    deltanet_projections = (
        hidden * shape.linear_conv_dim  # fused q, k, v projection
        + hidden * shape.linear_value_dim  # output gate z
        + shape.linear_value_dim * hidden  # output projection
    ) * packed
    deltanet_small = (
        2 * hidden * shape.linear_num_value_heads  # decay a and beta b
        + shape.linear_conv_dim * shape.linear_conv_kernel_dim  # causal conv
    ) * half
    deltanet = (deltanet_projections + deltanet_small) / tp * shape.linear_attention_layers
    if shape.is_moe:
        experts = shape.num_experts * 3 * hidden * shape.moe_intermediate_size / tp * packed
        shared = 3 * hidden * shape.shared_expert_intermediate_size / tp * packed
        mlp = (experts + shared) * shape.num_layers
        router = (hidden * shape.num_experts + hidden) * half * shape.num_layers
    else:
        mlp = 3 * hidden * shape.intermediate_size / tp * packed * shape.num_layers
        router = 0.0
    norms = (2 * shape.num_layers + 1) * hidden * half
    return WeightBreakdown(embedding, lm_head, attention, deltanet, mlp, router + norms)


# --- KV cache and state ---------------------------------------------------------------------


def kv_bytes_per_token_per_gpu(shape: ModelShape, tp: int, kv_bytes: int) -> int:
    """Only full-attention layers keep K and V for every token."""
    return shape.full_attention_layers * 2 * kv_heads_per_gpu(shape, tp) * shape.head_dim * kv_bytes


def state_bytes_per_layer_per_gpu(shape: ModelShape, tp: int, model_bytes: int) -> int:
    """One DeltaNet layer's fixed state for one sequence: conv window + recurrent matrix."""
    if not shape.is_hybrid:
        return 0
    conv = shape.linear_conv_dim // tp * (shape.linear_conv_kernel_dim - 1) * model_bytes
    recurrent = (
        shape.linear_num_value_heads
        // tp
        * shape.linear_key_head_dim
        * shape.linear_value_head_dim
        * DTYPE_BYTES.get(shape.mamba_ssm_dtype, FP32_BYTES)
    )
    return conv + recurrent


def paged_cache(shape: ModelShape, tp: int, kv_bytes: int, model_bytes: int) -> PagedCache:
    """vLLM's block layout: one page size for every layer, layers grouped in equal groups."""
    attention_page_per_token = 2 * kv_heads_per_gpu(shape, tp) * shape.head_dim * kv_bytes
    full, linear = shape.full_attention_layers, shape.linear_attention_layers
    if not shape.is_hybrid:
        return PagedCache(
            KERNEL_BLOCK_ALIGNMENT, KERNEL_BLOCK_ALIGNMENT * attention_page_per_token, full, 1, 0
        )
    state_page = state_bytes_per_layer_per_gpu(shape, tp, model_bytes)
    # At least one aligned block, even for a state that takes no room on this rank.
    block = KERNEL_BLOCK_ALIGNMENT * max(
        1, math.ceil(state_page / (KERNEL_BLOCK_ALIGNMENT * attention_page_per_token))
    )
    group = min(full, linear) if full else linear
    return PagedCache(
        block_size=block,
        page_bytes=block * attention_page_per_token,
        layers_per_group=group,
        attention_groups=math.ceil(full / group) if full else 0,
        state_groups=math.ceil(linear / group),
    )


def max_sequences(cache: PagedCache, blocks: int, tokens: int, prefix_caching: bool) -> float:
    """vLLM's "maximum concurrency": sequences of ``tokens`` that fit in ``blocks``."""
    state_blocks = STATE_BLOCKS_PER_SEQUENCE if prefix_caching else 1
    return blocks / cache.blocks_per_sequence(tokens, state_blocks)


# --- reserve and prefill time ---------------------------------------------------------------


def reserve_bytes_per_gpu(shape: ModelShape, tp: int, batched_tokens: int, num_seqs: int) -> float:
    activations = (
        batched_tokens * shape.hidden_size * DTYPE_BYTES["bfloat16"] * ACTIVATION_HIDDEN_COPIES
    )
    logits = num_seqs * shape.vocab_size / tp * FP32_BYTES * LOGITS_COPIES
    fixed = RUNTIME_RESERVE_GIB + CUDA_GRAPH_RESERVE_GIB + (NCCL_RESERVE_GIB if tp > 1 else 0)
    return fixed * GIB + activations + logits


def active_params_per_token(shape: ModelShape) -> float:
    """Parameters one token passes through (routed experts count only top-k), without embeddings."""
    total = weight_bytes_per_gpu(shape, "bf16", 1)
    half = DTYPE_BYTES["bfloat16"]
    dense = (total.full_attention + total.linear_attention) / half
    if shape.is_moe:
        expert = 3 * shape.hidden_size * shape.moe_intermediate_size
        shared = 3 * shape.hidden_size * shape.shared_expert_intermediate_size
        mlp = (shape.num_experts_per_tok * expert + shared) * shape.num_layers
    else:
        mlp = total.mlp / half
    return dense + mlp


def prefill_flops(shape: ModelShape, tokens: int) -> float:
    """Matmuls (2 flops per parameter per token), causal attention (QK and AV over half the
    prompt on average) and the DeltaNet state updates."""
    matmuls = 2 * active_params_per_token(shape) * tokens
    attention = (
        shape.full_attention_layers
        * 2
        * 2
        * shape.num_attention_heads
        * shape.head_dim
        * tokens
        * tokens
        / 2
    )
    deltanet = (
        shape.linear_attention_layers
        * DELTANET_FLOPS_PER_STATE_ELEMENT
        * shape.linear_num_value_heads
        * shape.linear_key_head_dim
        * shape.linear_value_head_dim
        * tokens
    )
    return matmuls + attention + deltanet


def ttft_estimate(
    shape: ModelShape, gpu: Gpu, tp: int, tokens: int, positions: int
) -> dict[str, Any] | None:
    """Seconds to the first token of a ``tokens``-long prompt, alone and at each queue position
    when ``positions`` such prompts arrive together (they are prefilled one after another; the
    fixed cost is paid once)."""
    if gpu.fp16_tensor_tflops is None:
        return None
    speed = (
        gpu.fp16_tensor_tflops
        * 1e12
        * PREFILL_EFFICIENCY
        * tp
        * (TENSOR_PARALLEL_EFFICIENCY if tp > 1 else 1)
    )
    prefill = prefill_flops(shape, tokens) / speed
    queue = [
        FIRST_TOKEN_OVERHEAD_S + prefill * (1 + QUEUED_PREFILL_COST_RATIO * (k - 1))
        for k in range(1, positions + 1)
    ]
    return {
        "prompt_tokens": tokens,
        "alone_s": round(queue[0], 2),
        "by_queue_position_s": [round(t, 2) for t in queue],
        "note": "estimate from datasheet TFLOPS; measure with reviewbot loadtest",
    }


# --- the plan -------------------------------------------------------------------------------


def _check_settings(settings: LaunchSettings, tp: int) -> None:
    _check_count("--gpus", settings.gpus, MAX_GPUS)
    target = settings.ttft_target_s
    if target is not None and not 0 < target <= MAX_TTFT_TARGET_S:
        raise CapacityError(
            f"--ttft-target-s must be a positive number of seconds up to {MAX_TTFT_TARGET_S:,.0f}"
        )
    _check_count("--max-model-len", settings.max_model_len, MAX_TOKENS)
    prompt = settings.prompt_tokens
    if prompt is not None and not 0 < prompt <= settings.max_model_len:
        raise CapacityError("--prompt-tokens must be between 1 and --max-model-len")
    _check_count("--tensor-parallel-size", tp, MAX_GPUS)
    if tp > settings.gpus:
        raise CapacityError(f"tensor parallel size {tp} is larger than the {settings.gpus} GPU(s)")
    utilization = settings.gpu_memory_utilization
    if utilization is not None and not 0 < utilization <= 1:
        raise CapacityError("--gpu-memory-utilization must be in (0, 1]")
    for flag, value, high in (
        ("--max-num-batched-tokens", settings.max_num_batched_tokens, MAX_TOKENS),
        ("--max-num-seqs", settings.max_num_seqs, MAX_NUM_SEQS),
    ):
        if value is not None:
            _check_count(flag, value, high)


def _check_count(flag: str, value: int, high: int) -> None:
    if value < 1:
        raise CapacityError(f"{flag} must be at least 1, got {value}")
    if value > high:
        raise CapacityError(f"{flag} must be at most {high:,}, got {value:,}")


def _check_split(shape: ModelShape, tp: int) -> None:
    """Every rank needs at least one attention head (and one DeltaNet head of each kind): with
    more ranks than heads a rank's share is zero, vLLM cannot start, and there is nothing to
    size. Fewer heads that do not divide evenly are a warning (_layout_warnings)."""
    heads = {"attention heads": shape.num_attention_heads}
    if shape.is_hybrid:
        heads["DeltaNet key heads"] = shape.linear_num_key_heads
        heads["DeltaNet value heads"] = shape.linear_num_value_heads
    for what, count in heads.items():
        if tp > count:
            raise CapacityError(
                f"tensor parallel size {tp} is larger than {shape.name}'s {count} {what}: "
                f"vLLM cannot split them; use --tensor-parallel-size {count} or less"
            )


def split_refusals(shape: ModelShape, tp: int) -> list[str]:
    """Why vLLM refuses to start ``shape`` at tensor parallel size ``tp`` (heads it cannot
    split evenly); empty when it can."""
    refusals = []
    if shape.num_attention_heads % tp:
        refusals.append(
            f"tensor parallel size {tp} does not divide the {shape.num_attention_heads} attention "
            "heads: vLLM refuses to start"
        )
    kv = shape.num_key_value_heads
    if kv % tp and tp % kv:
        refusals.append(
            f"tensor parallel size {tp} and the {kv} KV heads do not divide each other: "
            "vLLM refuses to start"
        )
    deltanet_heads = (shape.linear_num_key_heads, shape.linear_num_value_heads)
    if shape.is_hybrid and any(heads % tp for heads in deltanet_heads):
        refusals.append(
            f"tensor parallel size {tp} does not divide the DeltaNet heads ({deltanet_heads[0]} "
            f"key, {deltanet_heads[1]} value): vLLM refuses to start"
        )
    return refusals


def _layout_warnings(shape: ModelShape, settings: LaunchSettings, tp: int) -> list[str]:
    warnings = split_refusals(shape, tp)
    kv = shape.num_key_value_heads
    if tp > kv and not (kv % tp and tp % kv):
        warnings.insert(
            1 if shape.num_attention_heads % tp else 0,
            f"{kv} KV heads on {tp} ranks: each rank keeps a full copy of one KV head "
            f"(KV cache per token is {tp // kv}x what a naive split suggests)",
        )
    if settings.gpus % tp:
        warnings.append(
            f"{settings.gpus} GPUs with tensor parallel {tp}: {settings.gpus % tp} GPU(s) stay idle"
        )
    elif settings.gpus > tp:
        warnings.append(
            f"{settings.gpus // tp} servers of {tp} GPU(s) each: the figures are per "
            "server (run one vLLM per group, or --data-parallel-size)"
        )
    limit = shape.max_position_embeddings
    if limit and settings.max_model_len > limit:
        warnings.append(
            f"--max-model-len {settings.max_model_len} exceeds the model's "
            f"max_position_embeddings {limit}"
        )
    return warnings


def _smaller_prefill_steps(asked: int, advised: int) -> str:
    """What lowering ``--max-num-batched-tokens`` to make one sequence fit costs."""
    return (
        f"--max-num-batched-tokens lowered from {asked} to {advised} so that one sequence fits: "
        f"vLLM prefills at most {advised} tokens per step (less the running sequences' decode "
        "tokens, scheduled first), so first tokens come later than with "
        f"{DEFAULT_MAX_NUM_BATCHED_TOKENS}, the step the first-token estimate was fitted at; "
        "measure with reviewbot loadtest"
    )


def _format_warnings(gpu: Gpu, quantization: str, kv_cache_dtype: str) -> list[str]:
    warnings = []
    needed = MIN_CAPABILITY.get(quantization)
    if needed and gpu.compute_capability < needed:
        warnings.append(
            f"{quantization} needs compute capability {needed[0]}.{needed[1]}+, "
            f"the {gpu.name} is {gpu.sm}: vLLM refuses to load it"
        )
    if quantization == "fp8" and not gpu.fp8:
        warnings.append(
            f"the {gpu.name} ({gpu.sm}) has no fp8 tensor cores: fp8 weights run "
            "weight-only through Marlin (memory saved, no fp8 speed-up)"
        )
    if quantization == "bf16" and not gpu.bf16:
        warnings.append(f"the {gpu.name} ({gpu.sm}) has no bfloat16: serve with --dtype float16")
    if kv_cache_dtype.startswith("fp8") and not gpu.fp8:
        warnings.append(
            f"fp8 KV cache on {gpu.sm} (no fp8 tensor cores): support depends on the "
            "attention backend and vLLM version; not verified here"
        )
    return warnings


@dataclass(frozen=True)
class _Fit:
    """One memory budget worked out: reserve, KV cache blocks, sequences of max_model_len."""

    utilization: float
    batched_tokens: int
    reserve_bytes: float
    blocks: int
    sequences: float


@dataclass(frozen=True)
class _Sizing:
    shape: ModelShape
    gpu: Gpu
    settings: LaunchSettings
    tp: int
    weights: WeightBreakdown
    cache: PagedCache

    def fit(self, utilization: float, batched_tokens: int) -> _Fit:
        num_seqs = self.settings.max_num_seqs or VLLM_DEFAULT_MAX_NUM_SEQS
        reserve = reserve_bytes_per_gpu(self.shape, self.tp, batched_tokens, num_seqs)
        cache_bytes = utilization * self.gpu.memory_gib * GIB - self.weights.total - reserve
        blocks = self.cache.blocks_in(cache_bytes)
        sequences = max_sequences(
            self.cache, blocks, self.settings.max_model_len, self.settings.prefix_caching
        )
        return _Fit(utilization, batched_tokens, reserve, blocks, sequences)

    def rescue(self, asked: _Fit) -> _Fit:
        """When one sequence does not fit: a smaller prefill chunk first, then (unless the user
        chose the utilization) up to the safe maximum; the asked-for fit when nothing helps."""
        candidates = [
            (asked.utilization, b) for b in SMALLER_BATCHED_TOKENS if b < asked.batched_tokens
        ]
        if self.settings.gpu_memory_utilization is None:
            candidates += [
                (MAX_SAFE_GPU_MEMORY_UTILIZATION, b)
                for b in (asked.batched_tokens, *SMALLER_BATCHED_TOKENS)
                if b <= asked.batched_tokens
            ]
        for utilization, batched in candidates:
            better = self.fit(utilization, batched)
            if better.sequences >= 1:
                return better
        return asked

    def does_not_fit(self, asked: _Fit) -> str:
        per_sequence = self.cache.blocks_per_sequence(
            self.settings.max_model_len, STATE_BLOCKS_PER_SEQUENCE
        ) * (self.cache.page_bytes * self.cache.layers_per_group)
        used = (self.weights.total + asked.reserve_bytes) / GIB
        left = max(0.0, asked.utilization * self.gpu.memory_gib - used)
        return (
            f"does not fit: {self.weights.total / GIB:.2f} GiB of weights + "
            f"{asked.reserve_bytes / GIB:.2f} GiB reserve leave {left:.2f} GiB per GPU, one "
            f"sequence of {self.settings.max_model_len} tokens needs {per_sequence / GIB:.2f} GiB"
        )


def _quantization_of(shape: ModelShape, settings: LaunchSettings) -> str:
    quantization = (
        normalize_quantization(settings.quantization)
        or shape.quantization
        or ("bf16" if shape.dtype == "bfloat16" else "fp16")
    )
    if quantization not in QUANTIZATIONS:
        raise CapacityError(
            f"{shape.name} is quantized as {quantization}, which the planner cannot size "
            f"(it knows {', '.join(QUANTIZATIONS)}): pass --quantization with the closest one "
            "to size it as that"
        )
    return quantization


def plan_capacity(shape: ModelShape, gpu: Gpu, settings: LaunchSettings) -> CapacityPlan:
    """Everything ``reviewbot capacity`` reports, for one vLLM server."""
    tp = settings.gpus if settings.tensor_parallel_size is None else settings.tensor_parallel_size
    _check_settings(settings, tp)
    _check_split(shape, tp)
    quantization = _quantization_of(shape, settings)
    dtype = "bfloat16" if gpu.bf16 and quantization != "fp16" else "float16"
    model_bytes = DTYPE_BYTES[dtype]
    kv_bytes = kv_dtype_bytes(settings.kv_cache_dtype, model_bytes)
    sizing = _Sizing(
        shape,
        gpu,
        settings,
        tp,
        weights=weight_bytes_per_gpu(shape, quantization, tp),
        cache=paged_cache(shape, tp, kv_bytes, model_bytes),
    )
    asked = sizing.fit(
        settings.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
        settings.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
    )
    fits = asked.sequences >= 1
    advised = asked if fits else sizing.rescue(asked)
    warnings = _layout_warnings(shape, settings, tp)
    warnings += _format_warnings(gpu, quantization, settings.kv_cache_dtype)
    if not fits:
        warnings.insert(0, sizing.does_not_fit(asked))
    if advised.batched_tokens < asked.batched_tokens:
        warnings.append(_smaller_prefill_steps(asked.batched_tokens, advised.batched_tokens))
    by_memory = max(1, min(MAX_RECOMMENDED_NUM_SEQS, math.floor(advised.sequences)))
    prompt_tokens = settings.prompt_tokens or settings.max_model_len
    estimate = ttft_estimate(shape, gpu, tp, prompt_tokens, by_memory)
    recommended_seqs, reason = _sequences_to_recommend(
        by_memory, advised.sequences, estimate, settings.ttft_target_s
    )
    if estimate is not None and recommended_seqs < by_memory:
        estimate = ttft_estimate(shape, gpu, tp, prompt_tokens, recommended_seqs)
    return CapacityPlan(
        model=shape.name,
        gpu=gpu.name,
        gpus=settings.gpus,
        tensor_parallel_size=tp,
        quantization=quantization,
        max_model_len=settings.max_model_len,
        kv_cache_dtype=settings.kv_cache_dtype,
        gpu_memory_utilization=asked.utilization,
        weights_gib_per_gpu=round(sizing.weights.total / GIB, 3),
        weights_breakdown_gib_per_gpu={
            part: round(value / GIB, 3) for part, value in asdict(sizing.weights).items()
        },
        reserve_gib_per_gpu=round(asked.reserve_bytes / GIB, 3),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(shape, tp, kv_bytes),
        state_bytes_per_sequence_per_gpu=(
            state_bytes_per_layer_per_gpu(shape, tp, model_bytes) * shape.linear_attention_layers
        ),
        vllm_block_size=sizing.cache.block_size,
        kv_cache_blocks=asked.blocks,
        kv_cache_gib_per_gpu=round(
            asked.blocks * sizing.cache.page_bytes * sizing.cache.layers_per_group / GIB, 3
        ),
        max_sequences_at_max_model_len=round(asked.sequences, 2),
        kv_cache_tokens=int(asked.sequences * settings.max_model_len),
        recommended=Recommended(
            max_num_seqs=recommended_seqs,
            gpu_memory_utilization=advised.utilization,
            dtype=dtype,
            max_num_batched_tokens=advised.batched_tokens,
            kv_cache_dtype=settings.kv_cache_dtype,
            max_num_seqs_reason=reason,
        ),
        ttft_estimate_s=estimate,
        fits=fits,
        runnable=advised.sequences >= 1
        and settings.max_num_batched_tokens in (None, advised.batched_tokens),
        warnings=warnings,
    )


def _sequences_to_recommend(
    by_memory: int,
    fitting: float,
    estimate: dict[str, Any] | None,
    ttft_target_s: float | None,
) -> tuple[int, str]:
    """``--max-num-seqs`` and why: what memory holds, or fewer when queued prompts would wait
    longer than ``ttft_target_s`` for their first token (vLLM prefills them one after another,
    so every sequence admitted beyond that adds a whole prefill to the last one's wait)."""
    if by_memory == MAX_RECOMMENDED_NUM_SEQS and fitting > MAX_RECOMMENDED_NUM_SEQS:
        memory_reason = f"memory holds {fitting:.1f} sequences; capped at {by_memory}"
    else:
        memory_reason = f"memory holds {fitting:.2f} sequences of the full context"
    if ttft_target_s is None:
        return by_memory, memory_reason
    if estimate is None:
        return by_memory, f"{memory_reason}; no first-token estimate for this GPU"
    queue = estimate["by_queue_position_s"]
    within = sum(1 for wait in queue if wait <= ttft_target_s)
    if within >= by_memory:
        return by_memory, f"{memory_reason}; all of them start within {ttft_target_s:g} s"
    chosen = max(1, within)
    prompt = estimate["prompt_tokens"]
    if within == 0:
        return chosen, (
            f"even one {prompt:,}-token prompt waits {queue[0]:.1f} s for its first token, "
            f"over the {ttft_target_s:g} s target: 1 sequence"
        )
    return chosen, (
        f"{within} queued {prompt:,}-token prompts start within {ttft_target_s:g} s "
        f"(#{within + 1} would wait {queue[within]:.1f} s); memory would hold {by_memory}"
    )
