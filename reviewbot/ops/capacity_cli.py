"""``reviewbot capacity``: parse the options, plan, print a table or JSON (wiring only)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import NoReturn

import click
from rich.console import Console
from rich.table import Table

from reviewbot.ops.capacity import (
    DEFAULT_MAX_MODEL_LEN,
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    CapacityError,
    CapacityPlan,
    LaunchSettings,
    plan_capacity,
)
from reviewbot.ops.gpus import GPUS, UnknownGpuError, find_gpu
from reviewbot.ops.model_shape import (
    ModelConfigError,
    load_config_file,
    shipped_model,
    shipped_model_names,
)

EXIT_BAD_INPUT = 2
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
# TTFT queue positions shown in the table (all of them are in --json).
SHOWN_QUEUE_POSITIONS = (1, 2, 4, 8, 16, 32, 64)


def _fail(message: str) -> NoReturn:
    click.echo(f"reviewbot: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def serve_command(model: str, plan: CapacityPlan, multimodal: bool) -> str:
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


def print_plan(plan: CapacityPlan, model: str, multimodal: bool, console: Console) -> None:
    table = Table(
        title=f"{plan.model} on {plan.tensor_parallel_size}x {plan.gpu}", show_header=False
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    recommended = plan.recommended
    rows = [
        ("quantization", plan.quantization),
        ("weights per GPU", f"{plan.weights_gib_per_gpu:.2f} GiB"),
        ("activation + CUDA graph reserve", f"{plan.reserve_gib_per_gpu:.2f} GiB"),
        (
            "KV cache per token per GPU",
            f"{plan.kv_bytes_per_token_per_gpu:,} bytes (full-attention layers only)",
        ),
        (
            "linear-attention state per sequence",
            f"{plan.state_bytes_per_sequence_per_gpu / 2**20:,.1f} MiB per GPU",
        ),
        ("vLLM block size", f"{plan.vllm_block_size} tokens"),
        (
            "KV cache per GPU",
            f"{plan.kv_cache_gib_per_gpu:.2f} GiB at utilization {plan.gpu_memory_utilization}",
        ),
        (
            f"sequences of {plan.max_model_len:,} tokens",
            f"{plan.max_sequences_at_max_model_len:.2f}",
        ),
        ("fits", "yes" if plan.fits else "[red]no[/red]"),
        (
            "recommended",
            f"--max-num-seqs {recommended.max_num_seqs} --gpu-memory-utilization "
            f"{recommended.gpu_memory_utilization} --dtype {recommended.dtype} "
            f"--max-num-batched-tokens {recommended.max_num_batched_tokens}",
        ),
        ("why that many sequences", recommended.max_num_seqs_reason),
    ]
    if plan.ttft_estimate_s:
        estimate = plan.ttft_estimate_s
        queue = estimate["by_queue_position_s"]
        shown = ", ".join(
            f"#{k}: {queue[k - 1]:.1f} s" for k in SHOWN_QUEUE_POSITIONS if k <= len(queue)
        )
        rows.append(
            (
                f"first token, {estimate['prompt_tokens']:,}-token prompt (estimate)",
                f"alone {estimate['alone_s']:.1f} s; queued {shown}",
            )
        )
    for what, value in rows:
        table.add_row(what, value)
    console.print(table)
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    console.print(
        "start with:", serve_command(model, plan, multimodal), markup=False, highlight=False
    )


@click.command("capacity")
@click.option(
    "--model",
    "model_name",
    metavar="NAME",
    help="A shipped Qwen3.5 model, e.g. Qwen/Qwen3.5-35B-A3B (a -GPTQ-Int4 or -FP8 "
    "suffix sets --quantization).",
)
@click.option(
    "--model-config",
    "config_path",
    metavar="PATH",
    help="Any Hugging Face config.json instead of --model.",
)
@click.option(
    "--gpu",
    "gpu_name",
    required=True,
    metavar="NAME",
    help=f"One of: {', '.join(g.name for g in GPUS.values())}.",
)
@click.option("--gpus", type=int, default=1, show_default=True, help="GPUs in the box.")
@click.option(
    "--tensor-parallel-size",
    type=int,
    metavar="N",
    help="vLLM --tensor-parallel-size (default: --gpus).",
)
@click.option(
    "--quantization",
    metavar="Q",
    help=f"One of {', '.join(QUANTIZATIONS)} (default: the model's own).",
)
@click.option(
    "--max-model-len",
    type=int,
    default=DEFAULT_MAX_MODEL_LEN,
    show_default=True,
    help="Context length every sequence must be able to reach.",
)
@click.option(
    "--kv-cache-dtype",
    default="auto",
    show_default=True,
    help=f"One of {', '.join(KV_CACHE_DTYPES)}.",
)
@click.option(
    "--gpu-memory-utilization",
    type=float,
    metavar="U",
    help="Share of each GPU vLLM may use (default 0.92).",
)
@click.option(
    "--max-num-batched-tokens",
    type=int,
    metavar="N",
    help="Prefill chunk size; sizes the activation reserve (default 8192).",
)
@click.option(
    "--max-num-seqs",
    type=int,
    metavar="N",
    help="If already chosen; sizes the sampler's reserve (default vLLM's 256).",
)
@click.option(
    "--ttft-target-s",
    type=float,
    metavar="S",
    help="Recommend no more sequences than start within S seconds when they arrive together "
    "(default: as many as memory holds).",
)
@click.option(
    "--prompt-tokens",
    type=int,
    metavar="N",
    help="Prompt length for the first-token estimate (default: --max-model-len).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable plan.")
def capacity_command(
    model_name: str | None,
    config_path: str | None,
    gpu_name: str,
    gpus: int,
    tensor_parallel_size: int | None,
    quantization: str | None,
    max_model_len: int,
    kv_cache_dtype: str,
    gpu_memory_utilization: float | None,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    ttft_target_s: float | None,
    prompt_tokens: int | None,
    as_json: bool,
) -> None:
    """Plan GPU memory for serving a model with vLLM: weights, KV cache, sequences that fit."""
    if (model_name is None) == (config_path is None):
        _fail(
            "give exactly one of --model NAME or --model-config config.json "
            f"(shipped models: {', '.join(shipped_model_names())})"
        )
    try:
        shape = (
            shipped_model(model_name) if model_name else load_config_file(Path(str(config_path)))
        )
        gpu = find_gpu(gpu_name)
        plan = plan_capacity(
            shape,
            gpu,
            LaunchSettings(
                gpus=gpus,
                tensor_parallel_size=tensor_parallel_size,
                quantization=quantization,
                max_model_len=max_model_len,
                kv_cache_dtype=kv_cache_dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                max_num_batched_tokens=max_num_batched_tokens,
                max_num_seqs=max_num_seqs,
                ttft_target_s=ttft_target_s,
                prompt_tokens=prompt_tokens,
            ),
        )
    except (CapacityError, ModelConfigError, UnknownGpuError) as error:
        _fail(str(error))
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=2))
        return
    print_plan(plan, model_name or shape.name, shape.multimodal, Console())
