"""The capacity planner's arithmetic (reviewbot/ops/capacity.py), checked against numbers worked
by hand (the 4x T10 case, also in docs/capacity.md) and against one real vLLM measurement:

    vLLM 0.26.0, one H200, Qwen3.5-35B-A3B-shaped model in bf16, --max-model-len 65536,
    --gpu-memory-utilization 0.92: 64.69 GiB of weights, 62.38 GiB of KV cache
    = 2,941,521 tokens = 44.88 sequences of 65,536.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.ops.alternatives import MODEL_LEN_STEP, what_would_fit
from reviewbot.ops.capacity import (
    GIB,
    MAX_RECOMMENDED_NUM_SEQS,
    CapacityError,
    CapacityPlan,
    LaunchSettings,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    paged_cache,
    plan_capacity,
    state_bytes_per_layer_per_gpu,
    ttft_estimate,
    weight_bytes_per_gpu,
)
from reviewbot.ops.gpus import Gpu, UnknownGpuError, find_gpu
from reviewbot.ops.model_shape import (
    FULL_ATTENTION,
    LINEAR_ATTENTION,
    ModelConfigError,
    shape_from_config,
    shipped_model,
    shipped_model_names,
)
from tests.hypothesis_profiles import examples

H200_WEIGHTS_GIB = 64.69
H200_KV_CACHE_GIB = 62.38
H200_KV_TOKENS = 2_941_521
H200_SEQUENCES = 44.88
MAX_MODEL_LEN = 65536


@pytest.fixture(scope="module")
def qwen35_35b() -> object:
    return shipped_model("Qwen/Qwen3.5-35B-A3B")


# --- the model shape -----------------------------------------------------------------------


def test_qwen35_35b_shape_from_its_config(qwen35_35b) -> None:
    shape = qwen35_35b
    assert (shape.num_layers, shape.full_attention_layers, shape.linear_attention_layers) == (
        40,
        10,
        30,
    )
    assert shape.layer_types[3] == FULL_ATTENTION and shape.layer_types[0] == LINEAR_ATTENTION
    assert (shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim) == (16, 2, 256)
    assert (shape.num_experts, shape.num_experts_per_tok, shape.moe_intermediate_size) == (
        256,
        8,
        512,
    )
    assert shape.linear_conv_dim == 2 * 16 * 128 + 32 * 128


def test_full_attention_interval_gives_the_same_layers_as_layer_types(qwen35_35b) -> None:
    config = {
        "text_config": {
            "hidden_size": 2048,
            "num_hidden_layers": 40,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "vocab_size": 248320,
            "full_attention_interval": 4,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "num_experts": 256,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 512,
        }
    }
    assert shape_from_config(config, "x", "x").layer_types == qwen35_35b.layer_types


def test_a_plain_transformer_is_all_full_attention() -> None:
    llama = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
    }
    shape = shape_from_config(llama, "llama", "config.json")
    assert shape.full_attention_layers == 32 and not shape.is_hybrid
    assert shape.head_dim == 128  # hidden / heads when head_dim is absent
    assert kv_bytes_per_token_per_gpu(shape, 1, 2) == 32 * 2 * 8 * 128 * 2
    assert state_bytes_per_layer_per_gpu(shape, 1, 2) == 0
    assert paged_cache(shape, 1, 2, 2).block_size == 16


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"hidden_size": 8}, "num_attention_heads"),
        (
            {
                "hidden_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 2,
                "vocab_size": 9,
                "layer_types": ["full_attention"],
            },
            "layer_types",
        ),
        (
            {
                "hidden_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "vocab_size": 9,
                "layer_types": ["sliding_attention"],
            },
            "unsupported layer type",
        ),
        (
            {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "vocab_size": 9},
            "intermediate_size",
        ),
        ({"text_config": []}, "text_config"),
    ],
)
def test_configs_that_are_not_decoders_are_refused(config: dict, message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        shape_from_config(config, "x", "config.json")


# Billions of parameters in each name; our count is the language model only (no vision
# encoder, no MTP layer), so it lands a little under the name.
NAMED_SIZE = {"0.8B": 0.8, "9B": 9, "27B": 27, "35B-A3B": 35, "122B-A10B": 122, "397B-A17B": 397}


@pytest.mark.parametrize("name", shipped_model_names())
def test_shipped_configs_add_up_to_their_names(name: str) -> None:
    shape = shipped_model(name)
    params = weight_bytes_per_gpu(shape, "bf16", 1).total / 2 / 1e9
    size = NAMED_SIZE[name.split("Qwen3.5-")[1]]
    assert size * 0.9 <= params <= size * 1.01, params


def test_quantized_names_pick_their_quantization() -> None:
    assert shipped_model("Qwen/Qwen3.5-35B-A3B-GPTQ-Int4").quantization == "gptq-int4"
    assert shipped_model("qwen3.5-35b-a3b-fp8").quantization == "fp8"
    with pytest.raises(ModelConfigError, match="unknown model"):
        shipped_model("Qwen/Qwen3-8B")


# --- the H200 measurement ------------------------------------------------------------------


def test_h200_tokens_per_gib_match_vllm(qwen35_35b) -> None:
    cache = paged_cache(qwen35_35b, tp=1, kv_bytes=2, model_bytes=2)
    assert cache.block_size == 1056  # vLLM logged this block size for the model
    blocks = cache.blocks_in(H200_KV_CACHE_GIB * GIB)
    sequences = max_sequences(cache, blocks, MAX_MODEL_LEN, prefix_caching=True)
    tokens_per_gib = sequences * MAX_MODEL_LEN / H200_KV_CACHE_GIB
    assert tokens_per_gib == pytest.approx(H200_KV_TOKENS / H200_KV_CACHE_GIB, rel=0.01)
    assert sequences == pytest.approx(H200_SEQUENCES, abs=0.01)


def test_h200_plan_reproduces_the_measurement(qwen35_35b) -> None:
    plan = plan_capacity(
        qwen35_35b,
        find_gpu("H200"),
        LaunchSettings(
            quantization="bf16",
            max_model_len=MAX_MODEL_LEN,
            gpu_memory_utilization=0.92,
        ),
    )
    assert plan.weights_gib_per_gpu == pytest.approx(H200_WEIGHTS_GIB, rel=0.01)
    assert plan.kv_cache_gib_per_gpu == pytest.approx(H200_KV_CACHE_GIB, rel=0.03)
    assert plan.max_sequences_at_max_model_len == pytest.approx(H200_SEQUENCES, rel=0.03)
    assert plan.fits and plan.recommended.dtype == "bfloat16"


def test_h200_time_to_first_token_matches_the_measurement(qwen35_35b) -> None:
    """One 61K-token prompt alone: 1.8 s; the 8th of 8 sent together: 12.6 s."""
    estimate = ttft_estimate(qwen35_35b, find_gpu("H200"), tp=1, tokens=61_000, positions=8)
    assert estimate is not None
    assert estimate["alone_s"] == pytest.approx(1.8, rel=0.1)
    assert estimate["by_queue_position_s"][-1] == pytest.approx(12.6, rel=0.1)


# --- 4x T10, TP=4, GPTQ-Int4, 64K: worked by hand (docs/capacity.md) -----------------------

INT4_BYTES_PER_PARAM = 0.5 + (2 + 0.5) / 128  # 4 bits + fp16 scale and 4-bit zero per 128
T10_GPU_BYTES = 0.92 * 15 * GIB  # 15360 MiB visible, utilization 0.92


def test_t10x4_weights_by_hand(qwen35_35b) -> None:
    embeddings = 248320 * 2048 / 4 * 2  # vocab-parallel, 16-bit; the lm-head is the same again
    attention = (2048 * 8192 / 4 + 2 * 2048 * 256 * 1 + 4096 * 2048 / 4) * INT4_BYTES_PER_PARAM
    deltanet = (
        (2048 * 8192 + 2048 * 4096 + 4096 * 2048) * INT4_BYTES_PER_PARAM
        + (2 * 2048 * 32 + 8192 * 4) * 2
    ) / 4
    moe = (256 + 1) * 3 * 2048 * 512 / 4 * INT4_BYTES_PER_PARAM  # 256 experts + shared
    replicated = (2048 * 256 + 2048) * 2 * 40 + (2 * 40 + 1) * 2048 * 2  # routers, norms
    by_hand = 2 * embeddings + 10 * attention + 30 * deltanet + 40 * moe + replicated
    weights = weight_bytes_per_gpu(qwen35_35b, "gptq-int4", tp=4)
    assert weights.total == pytest.approx(by_hand)
    assert by_hand / GIB == pytest.approx(4.584, abs=0.001)


def test_t10x4_kv_cache_by_hand(qwen35_35b) -> None:
    # 2 KV heads on 4 ranks: each rank keeps 1 whole head. Only the 10 full-attention layers.
    assert kv_bytes_per_token_per_gpu(qwen35_35b, tp=4, kv_bytes=2) == 10 * 2 * 1 * 256 * 2
    conv = 8192 // 4 * (4 - 1) * 2  # conv channels on this rank x (kernel - 1) x fp16
    recurrent = 32 // 4 * 128 * 128 * 4  # value heads on this rank x 128 x 128 x fp32
    assert state_bytes_per_layer_per_gpu(qwen35_35b, tp=4, model_bytes=2) == conv + recurrent
    cache = paged_cache(qwen35_35b, tp=4, kv_bytes=2, model_bytes=2)
    assert cache.block_size == 16 * math.ceil((conv + recurrent) / (16 * 1024)) == 528
    assert (cache.layers_per_group, cache.attention_groups, cache.state_groups) == (10, 1, 3)
    assert cache.blocks_per_sequence(MAX_MODEL_LEN, 2) == 125 + 3 * 2


def test_t10x4_plan_by_hand(qwen35_35b) -> None:
    plan = plan_capacity(
        qwen35_35b,
        find_gpu("T10"),
        LaunchSettings(
            gpus=4,
            quantization="gptq-int4",
            max_model_len=MAX_MODEL_LEN,
            max_num_seqs=8,
        ),
    )
    weights = weight_bytes_per_gpu(qwen35_35b, "gptq-int4", tp=4).total
    reserve = (0.5 + 0.5 + 0.25) * GIB + 8192 * 2048 * 2 * 24 + 8 * 248320 / 4 * 4 * 2
    blocks = int((T10_GPU_BYTES - weights - reserve) // (528 * 1024 * 10))
    assert blocks == plan.kv_cache_blocks == 1432
    assert plan.max_sequences_at_max_model_len == pytest.approx(1432 / 131, abs=0.01)
    assert plan.fits and plan.recommended.max_num_seqs == 10
    assert plan.recommended.dtype == "float16"  # Turing: no bfloat16
    assert plan.ttft_estimate_s is None  # no trustworthy T10 compute figure
    assert any("keeps a full copy of one KV head" in w for w in plan.warnings)


# --- warnings and errors -------------------------------------------------------------------


def test_a_model_too_big_for_the_gpu_does_not_fit(qwen35_35b) -> None:
    plan = plan_capacity(qwen35_35b, find_gpu("L4"), LaunchSettings(quantization="bf16"))
    assert not plan.fits
    assert plan.warnings[0].startswith("does not fit:")
    assert plan.kv_cache_blocks == 0
    assert not plan.runnable


def test_what_would_fit_is_each_the_smallest_change_that_fits() -> None:
    """Issue 32 item 14: a plan that does not fit says what would. Each alternative, applied,
    is runnable; the context offered is the longest whole step that fits (one more does not);
    the GPUs offered are the fewest that split the heads evenly and fit."""
    nine_b, l4 = shipped_model("Qwen/Qwen3.5-9B"), find_gpu("L4")
    pinned = LaunchSettings(quantization="bf16", max_model_len=32768, max_num_batched_tokens=8192)
    assert not plan_capacity(nine_b, l4, pinned).runnable
    found = {a.flags.split()[0]: a.flags.split() for a in what_would_fit(nine_b, l4, pinned)}
    assert list(found) == [
        "--max-num-batched-tokens",
        "--max-model-len",
        "--quantization",
        "--gpus",
    ]
    context = int(found["--max-model-len"][1])
    assert plan_capacity(nine_b, l4, replace(pinned, max_model_len=context)).runnable
    longer = replace(pinned, max_model_len=context + MODEL_LEN_STEP)
    assert not plan_capacity(nine_b, l4, longer).runnable
    assert plan_capacity(nine_b, l4, replace(pinned, max_num_batched_tokens=4096)).runnable
    assert found["--quantization"] == ["--quantization", "fp8"]
    assert plan_capacity(nine_b, l4, replace(pinned, quantization="fp8")).runnable
    assert found["--gpus"] == ["--gpus", "2"]
    assert plan_capacity(nine_b, l4, replace(pinned, gpus=2)).runnable
    assert what_would_fit(nine_b, l4, replace(pinned, max_num_batched_tokens=None)) == []


def test_when_no_one_change_fits_a_smaller_format_on_more_gpus_is_offered() -> None:
    """Qwen3.5-122B-A10B on one L4: neither 4-bit weights nor 8 GPUs alone hold it; 4-bit
    weights on the fewest GPUs that do are offered, and that plan is runnable. Qwen3.5-397B
    does not fit one box of L4s even so: nothing is offered (the command says so)."""
    big, l4 = shipped_model("Qwen/Qwen3.5-122B-A10B"), find_gpu("L4")
    (alternative,) = what_would_fit(big, l4, LaunchSettings())
    _, quantization, _, gpus = alternative.flags.split()
    assert quantization == "gptq-int4"
    assert plan_capacity(big, l4, LaunchSettings(quantization="gptq-int4", gpus=int(gpus))).runnable
    fewer = LaunchSettings(quantization="gptq-int4", gpus=int(gpus) // 2)
    assert not plan_capacity(big, l4, fewer).runnable
    assert what_would_fit(shipped_model("Qwen/Qwen3.5-397B-A17B"), l4, LaunchSettings()) == []


@pytest.mark.parametrize(
    ("gpu", "tp", "quantization", "kv", "expected"),
    [
        ("H100", 3, "fp8", "auto", "does not divide the 16 attention heads"),
        ("H100", 3, "fp8", "auto", "does not divide the DeltaNet heads (16 key, 32 value)"),
        ("A100-80GB", 8, "bf16", "auto", "keeps a full copy of one KV head"),
        ("T4", 1, "bf16", "auto", "no bfloat16"),
        ("A10", 1, "fp8", "auto", "weight-only through Marlin"),
        ("T4", 1, "gptq-int4", "fp8", "fp8 KV cache on sm75"),
    ],
)
def test_warnings(qwen35_35b, gpu: str, tp: int, quantization: str, kv: str, expected: str) -> None:
    plan = plan_capacity(
        qwen35_35b,
        find_gpu(gpu),
        LaunchSettings(
            gpus=tp,
            quantization=quantization,
            kv_cache_dtype=kv,
        ),
    )
    assert any(expected in w for w in plan.warnings), plan.warnings


def test_a_quantization_below_its_compute_capability_is_flagged(qwen35_35b) -> None:
    volta = Gpu("V100", 32768, (7, 0), "Volta", None)
    plan = plan_capacity(qwen35_35b, volta, LaunchSettings(quantization="gptq-int4"))
    assert any("needs compute capability 7.5+" in w for w in plan.warnings)


def test_more_gpus_than_one_server_uses(qwen35_35b) -> None:
    plan = plan_capacity(
        qwen35_35b,
        find_gpu("T10"),
        LaunchSettings(
            gpus=8,
            tensor_parallel_size=4,
            quantization="gptq-int4",
        ),
    )
    assert any("2 servers of 4 GPU(s)" in w for w in plan.warnings)


def test_fp8_kv_cache_halves_the_bytes_and_doubles_the_block(qwen35_35b) -> None:
    bf16 = paged_cache(qwen35_35b, tp=1, kv_bytes=2, model_bytes=2)
    fp8 = paged_cache(qwen35_35b, tp=1, kv_bytes=1, model_bytes=2)
    assert (bf16.block_size, fp8.block_size) == (1056, 2096)  # vLLM logged 2,096 with fp8 KV
    assert fp8.page_bytes >= state_bytes_per_layer_per_gpu(qwen35_35b, 1, 2) <= bf16.page_bytes
    assert kv_bytes_per_token_per_gpu(qwen35_35b, 1, 1) * 2 == kv_bytes_per_token_per_gpu(
        qwen35_35b, 1, 2
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (LaunchSettings(gpus=1, tensor_parallel_size=2), "larger than the 1 GPU"),
        (LaunchSettings(gpus=0), "--gpus must be at least 1"),
        (LaunchSettings(quantization="int3"), "unknown quantization"),
        (LaunchSettings(kv_cache_dtype="int2"), "unknown KV cache dtype"),
        (LaunchSettings(gpu_memory_utilization=1.5), "--gpu-memory-utilization"),
        (LaunchSettings(max_model_len=0), "--max-model-len"),
    ],
)
def test_bad_settings_are_refused(qwen35_35b, settings: LaunchSettings, message: str) -> None:
    with pytest.raises(CapacityError, match=message):
        plan_capacity(qwen35_35b, find_gpu("H200"), settings)


def test_gpu_names_are_forgiving() -> None:
    assert find_gpu("nvidia tesla t10").name == "T10"
    assert find_gpu("RTX 4090").name == "RTX4090"
    assert find_gpu("a100").name == "A100-80GB"
    t10 = find_gpu("T10")
    assert t10.compute_capability == (7, 5) and not t10.bf16 and t10.architecture == "Turing"
    with pytest.raises(UnknownGpuError, match="unknown GPU"):
        find_gpu("V100")


def test_a_near_miss_gets_a_smaller_chunk_before_more_memory() -> None:
    """16.68 GiB of weights and a 2.97 GiB reserve leave 1.04 GiB on an L4, one 32K sequence
    needs 1.11: halving the prefill chunk frees 0.75 GiB of activations, so that is the advice
    (utilization stays 0.92; it is never raised past 0.95, nor at all when the user chose one)."""
    nine_b, l4 = shipped_model("Qwen/Qwen3.5-9B"), find_gpu("L4")
    plan = plan_capacity(nine_b, l4, LaunchSettings(quantization="bf16", max_model_len=32768))
    assert not plan.fits
    assert (plan.recommended.max_num_batched_tokens, plan.recommended.gpu_memory_utilization) == (
        4096,
        0.92,
    )
    assert plan_capacity(
        nine_b,
        l4,
        LaunchSettings(
            quantization="bf16",
            max_model_len=32768,
            max_num_batched_tokens=4096,
        ),
    ).fits
    chosen = plan_capacity(
        nine_b,
        replace(l4, memory_mib=19000),
        LaunchSettings(
            quantization="bf16",
            max_model_len=32768,
            gpu_memory_utilization=0.9,
        ),
    )
    assert chosen.recommended.gpu_memory_utilization == 0.9


def test_a_smaller_prefill_step_says_what_it_costs_the_first_token() -> None:
    nine_b, l4 = shipped_model("Qwen/Qwen3.5-9B"), find_gpu("L4")
    lowered = plan_capacity(nine_b, l4, LaunchSettings(quantization="bf16", max_model_len=32768))
    assert lowered.recommended.max_num_batched_tokens == 4096
    (warning,) = [w for w in lowered.warnings if "--max-num-batched-tokens" in w]
    assert warning.startswith("--max-num-batched-tokens lowered from 8192 to 4096")
    assert "first tokens come later" in warning and "reviewbot loadtest" in warning
    chosen = LaunchSettings(quantization="bf16", max_model_len=32768, max_num_batched_tokens=4096)
    kept = plan_capacity(nine_b, l4, chosen)  # the user's own choice, and it fits: no warning
    assert not [w for w in kept.warnings if "--max-num-batched-tokens" in w]


# --- sequences within a first-token target --------------------------------------------------

# Estimated first token of the 32nd and 33rd queued 64K prompt on one H200 (52.3 s, 54.0 s).
H200_TARGET_BETWEEN_32_AND_33_S = 53.0
H200_FP8_PROFILE_MAX_NUM_SEQS = 32


def h200_fp8_plan(qwen35_35b, **settings: object) -> CapacityPlan:
    launch = replace(LaunchSettings(quantization="fp8", max_model_len=MAX_MODEL_LEN), **settings)
    return plan_capacity(qwen35_35b, find_gpu("H200"), launch)


def test_without_a_target_memory_sets_the_sequences(qwen35_35b) -> None:
    plan = h200_fp8_plan(qwen35_35b)
    assert plan.max_sequences_at_max_model_len > MAX_RECOMMENDED_NUM_SEQS
    assert plan.recommended.max_num_seqs == MAX_RECOMMENDED_NUM_SEQS
    assert "capped at 64" in plan.recommended.max_num_seqs_reason


def test_a_first_token_target_limits_the_sequences_to_those_that_start_in_time(
    qwen35_35b,
) -> None:
    plan = h200_fp8_plan(qwen35_35b, ttft_target_s=H200_TARGET_BETWEEN_32_AND_33_S)
    assert plan.recommended.max_num_seqs == H200_FP8_PROFILE_MAX_NUM_SEQS  # the shipped profile
    queue = plan.ttft_estimate_s["by_queue_position_s"]  # type: ignore[index]
    assert len(queue) == H200_FP8_PROFILE_MAX_NUM_SEQS
    assert queue[-1] <= H200_TARGET_BETWEEN_32_AND_33_S
    assert "32 queued 65,536-token prompts start within 53 s" in (
        plan.recommended.max_num_seqs_reason
    )
    shorter = h200_fp8_plan(
        qwen35_35b, ttft_target_s=H200_TARGET_BETWEEN_32_AND_33_S, prompt_tokens=16384
    )
    assert shorter.recommended.max_num_seqs == MAX_RECOMMENDED_NUM_SEQS  # short prompts: memory
    assert shorter.ttft_estimate_s["prompt_tokens"] == 16384  # type: ignore[index]


def test_a_target_even_one_prompt_misses_recommends_one_sequence(qwen35_35b) -> None:
    plan = h200_fp8_plan(qwen35_35b, ttft_target_s=0.5)
    assert plan.recommended.max_num_seqs == 1
    assert plan.recommended.max_num_seqs_reason.startswith("even one 65,536-token prompt")


def test_a_gpu_without_an_estimate_keeps_the_memory_figure(qwen35_35b) -> None:
    launch = LaunchSettings(
        gpus=4, quantization="gptq-int4", max_model_len=MAX_MODEL_LEN, ttft_target_s=1.0
    )
    plan = plan_capacity(qwen35_35b, find_gpu("T10"), launch)
    assert plan.ttft_estimate_s is None and plan.recommended.max_num_seqs == 10
    assert "no first-token estimate" in plan.recommended.max_num_seqs_reason


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (LaunchSettings(ttft_target_s=0), "--ttft-target-s"),
        (LaunchSettings(ttft_target_s=float("nan")), "--ttft-target-s"),
        (LaunchSettings(prompt_tokens=MAX_MODEL_LEN + 1), "--prompt-tokens"),
        (LaunchSettings(prompt_tokens=0), "--prompt-tokens"),
    ],
)
def test_bad_first_token_settings_are_refused(
    qwen35_35b, settings: LaunchSettings, message: str
) -> None:
    with pytest.raises(CapacityError, match=message):
        plan_capacity(qwen35_35b, find_gpu("H200"), settings)


# ---- hostile shapes and settings: a clear refusal or a finite plan, never a crash (issue 17)

DIMENSIONS = (
    "hidden_size",
    "num_attention_heads",
    "num_hidden_layers",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "intermediate_size",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "full_attention_interval",
    "max_position_embeddings",
)
HOSTILE_VALUES = st.one_of(
    st.integers(min_value=-3, max_value=70),
    st.sampled_from([0, 1, 2**31, 10**11, 2**70, 1.5, float("inf"), "8", True, None, [], {}]),
)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    overrides=st.dictionaries(st.sampled_from(DIMENSIONS), HOSTILE_VALUES, max_size=5),
    gpus=st.integers(min_value=-1, max_value=100_000),
    tp=st.one_of(st.none(), st.integers(min_value=-1, max_value=4096)),
)
def test_any_config_and_split_is_refused_clearly_or_planned(
    qwen35_35b, overrides: dict, gpus: int, tp: int | None
) -> None:
    config = {
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_hidden_layers": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "vocab_size": 248320,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 4,
        **overrides,
    }
    try:
        shape = shape_from_config(config, "fuzzed", "config.json")
        plan = plan_capacity(
            shape, find_gpu("H200"), LaunchSettings(gpus=gpus, tensor_parallel_size=tp)
        )
    except (ModelConfigError, CapacityError) as error:
        assert "\n" not in str(error) and len(str(error)) < 300
        return
    assert math.isfinite(plan.max_sequences_at_max_model_len)
    assert plan.kv_cache_blocks >= 0 and plan.vllm_block_size >= 16
