"""``reviewbot capacity``: the JSON keys other tools rely on, the table, and one-line errors."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.commands import main

JSON_KEYS = {
    "weights_gib_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "state_bytes_per_sequence_per_gpu",
    "kv_cache_gib_per_gpu",
    "max_sequences_at_max_model_len",
    "recommended",
    "fits",
    "warnings",
}
RECOMMENDED_KEYS = {"max_num_seqs", "gpu_memory_utilization", "dtype"}
NINE_B_ON_4_T10 = ["--model", "Qwen/Qwen3.5-9B", "--gpu", "T10", "--gpus", "4"]
T10X4 = ["capacity", "--model", "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4", "--gpu", "T10", "--gpus", "4"]


def run(*args: str, columns: int | None = None) -> tuple[int, str, str]:
    env = {"COLUMNS": str(columns)} if columns else None
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


# A shell that runs a pasted command with `vllm` standing in for vLLM: it prints its arguments.
ECHO_VLLM = 'vllm() { printf "%s\\n" "$@"; }\n'
NARROW_TERMINAL = 40
L4_BF16_35B = ("capacity", "--model", "Qwen/Qwen3.5-35B-A3B", "--gpu", "L4")


def pasted(out: str) -> list[str]:
    """What `vllm` receives when the lines after ``start with:`` are pasted into bash."""
    command = out[out.index("start with:") + len("start with:") :].strip()
    done = subprocess.run(
        ["bash", "-c", ECHO_VLLM + command], capture_output=True, text=True, check=False
    )
    return done.stdout.splitlines()


def test_json_has_the_documented_keys() -> None:
    code, out, _ = run(*T10X4, "--max-model-len", "65536", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan.keys() >= JSON_KEYS
    assert plan["recommended"].keys() >= RECOMMENDED_KEYS
    assert plan["kv_bytes_per_token_per_gpu"] == 10240
    assert plan["recommended"]["dtype"] == "float16"
    assert plan["quantization"] == "gptq-int4" and plan["tensor_parallel_size"] == 4


def test_a_first_token_target_sets_the_sequences_of_the_start_command() -> None:
    h200 = ("capacity", "--model", "Qwen/Qwen3.5-35B-A3B-FP8", "--gpu", "H200")
    code, out, _ = run(*h200, "--ttft-target-s", "53", "--json")
    assert code == 0
    recommended = json.loads(out)["recommended"]
    assert recommended["max_num_seqs"] == 32
    assert "start within 53 s" in recommended["max_num_seqs_reason"]
    code, out, _ = run(*h200, "--ttft-target-s", "53")
    assert code == 0 and "--max-num-seqs 32" in out[out.index("start with:") :]


def test_table_shows_the_plan_and_the_start_command() -> None:
    code, out, _ = run(*T10X4, "--max-num-seqs", "8")
    assert code == 0
    assert "sequences of 65,536 tokens" in out and "10.93" in out
    start = out[out.index("start with:") :].replace("\n", " ")
    for flag in (
        "--tensor-parallel-size 4",
        "--dtype float16",
        "--enable-prefix-caching",
        "--tool-call-parser qwen3_coder",
        "--enable-prompt-tokens-details",
        "--generation-config vllm",
        "--scheduling-policy priority",
    ):
        assert flag in start


def test_the_start_command_pastes_whole_into_a_shell_at_any_width() -> None:
    """Issue 32 item 14: rich wrapped the command at the terminal's width without ``\\``, so
    a paste ran ``vllm serve`` with the first line's flags only and the rest as commands."""
    for columns in (NARROW_TERMINAL, None):
        code, out, _ = run(*T10X4, "--max-num-seqs", "8", columns=columns)
        assert code == 0
        argv = pasted(out)
        assert argv[:2] == ["serve", "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"]
        flags = " ".join(argv)
        for flag in (
            "--tensor-parallel-size 4",
            "--max-num-seqs 10",
            "--dtype float16",
            "--tool-call-parser qwen3_coder",
            "--generation-config vllm",
            "--language-model-only",
        ):
            assert flag in flags


def test_a_configuration_that_does_not_fit_exits_3_and_says_what_would() -> None:
    """Issue 32 item 14: was 'start with: vllm serve ...' and exit 0 for a model that cannot
    load. Each change it offers is planned again here and fits."""
    code, out, _ = run(*L4_BF16_35B, "--quantization", "bf16", columns=NARROW_TERMINAL)
    assert code == 3
    assert "start with" not in out and "vllm serve" not in out
    assert "does not fit as given" in out
    code, out, _ = run(*L4_BF16_35B, "--quantization", "bf16", "--json")
    assert code == 3
    would_fit = [a["flags"] for a in json.loads(out)["would_fit"]]
    assert would_fit == ["--quantization gptq-int4", "--gpus 4"]
    for flags in would_fit:
        code, out, _ = run(*L4_BF16_35B, "--quantization", "bf16", *shlex.split(flags))
        assert code == 0 and "start with:" in out
    code, out, _ = run("capacity", "--model", "Qwen/Qwen3.5-397B-A17B", "--gpu", "L4")
    assert code == 3 and "vllm serve" not in out
    assert "does not fit: nor with a shorter context, a smaller quantization or up to 8 GPUs" in (
        " ".join(out.split())
    )


def test_a_pinned_prefill_chunk_that_does_not_fit_is_not_overridden_silently() -> None:
    """The planner lowers its own 8,192-token chunk to make a near miss fit (exit 0); one the
    user chose is their configuration: exit 3, the smaller chunk offered, nothing to start."""
    near_miss = ("capacity", "--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--quantization")
    near_miss += ("bf16", "--max-model-len", "32768")
    code, out, _ = run(*near_miss)
    assert code == 0 and "--max-num-batched-tokens 4096" in " ".join(pasted(out))
    code, out, _ = run(*near_miss, "--max-num-batched-tokens", "8192", "--json")
    assert code == 3
    plan = json.loads(out)
    assert not plan["runnable"]
    assert plan["would_fit"][0]["flags"] == "--max-num-batched-tokens 4096"
    assert "--max-model-len 29696" in [a["flags"] for a in plan["would_fit"]]


def test_model_config_takes_any_hugging_face_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "vocab_size": 128256,
                "torch_dtype": "bfloat16",
            }
        )
    )
    code, out, _ = run("capacity", "--model-config", str(config), "--gpu", "A100-80GB", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["kv_bytes_per_token_per_gpu"] == 32 * 2 * 8 * 128 * 2
    assert plan["state_bytes_per_sequence_per_gpu"] == 0 and plan["fits"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "T10"], "give exactly one of --model NAME or --model-config"),
        (["--model", "Qwen/Qwen3.5-9B", "--model-config", "x.json", "--gpu", "L4"], "exactly one"),
        (["--model", "Qwen/Qwen4-1T", "--gpu", "L4"], "unknown model 'Qwen/Qwen4-1T'"),
        (["--model", "Qwen/Qwen3.5-9B", "--gpu", "V100"], "unknown GPU 'V100'"),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--tensor-parallel-size", "2"],
            "tensor parallel size 2 is larger than the 1 GPU(s)",
        ),
        (["--model-config", "/nonexistent/config.json", "--gpu", "L4"], "cannot read /nonexistent"),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--quantization", "int3"],
            "unknown quantization 'int3'",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--ttft-target-s", "-1"],
            "--ttft-target-s must be a positive number of seconds",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--prompt-tokens", "70000"],
            "--prompt-tokens must be between 1 and --max-model-len",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--max-num-batched-tokens", "-5"],
            "--max-num-batched-tokens must be at least 1, got -5",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--max-num-batched-tokens", "0"],
            "--max-num-batched-tokens must be at least 1, got 0",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--max-num-seqs", "0"],
            "--max-num-seqs must be at least 1, got 0",
        ),
        (
            [*NINE_B_ON_4_T10, "--tensor-parallel-size", "0"],
            "--tensor-parallel-size must be at least 1",
        ),
        # issue 17 item 3: was a ZeroDivisionError (a rank's share of the heads became 0)
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "H200", "--gpus", "100000"],
            "--gpus must be between 1 and 1,024, got 100,000",
        ),
        (
            ["--model", "Qwen/Qwen3.5-35B-A3B", "--gpu", "H200", "--gpus", "64"],
            "tensor parallel size 64 is larger than Qwen/Qwen3.5-35B-A3B's 16 attention heads",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--max-model-len", str(2**40)],
            "--max-model-len must be between 1 and",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--max-num-seqs", str(2**70)],
            "--max-num-seqs must be at most 65,536",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--ttft-target-s", "inf"],
            "--ttft-target-s must be a finite number",
        ),
        (
            ["--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--gpu-memory-utilization", "nan"],
            "--gpu-memory-utilization must be a finite number",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    code, out, err = run("capacity", *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("reviewbot: error: ")
    assert message in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"hidden_size": 8}', "num_attention_heads"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deep"),
        (" " * (4 * 1024 * 1024 + 1), "larger than 4,194,304 bytes"),
    ],
)
def test_unusable_config_files_are_one_line(tmp_path: Path, content: str, message: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(content)
    code, _, err = run("capacity", "--model-config", str(config), "--gpu", "L4")
    assert code == 2 and err.count("\n") == 1 and message in err


HUGE = 10**11


@pytest.mark.parametrize(
    "dimension",
    [
        "num_hidden_layers",
        "hidden_size",
        "vocab_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
    ],
)
def test_a_config_with_1e11_sized_dimensions_is_one_line(tmp_path: Path, dimension: str) -> None:
    """Was a MemoryError (issue 17 item 3): 1e11 layers became a tuple of 1e11 layer kinds."""
    config = tmp_path / "config.json"
    llama = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
    }
    config.write_text(json.dumps({**llama, dimension: HUGE}))
    code, out, err = run("capacity", "--model-config", str(config), "--gpu", "H200")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{dimension} {HUGE} is larger than any model the planner can size" in err


def test_a_device_as_model_config_is_refused_before_reading() -> None:
    code, _, err = run("capacity", "--model-config", "/dev/zero", "--gpu", "L4")
    assert code == 2 and "/dev/zero is not a regular file" in err


NINE_B_CONFIG = json.loads(
    (Path(__file__).resolve().parent.parent / "reviewbot/ops/models/qwen3.5-9b.json").read_text()
)["config"]


def plan_for_quantization(tmp_path: Path, quantization_config: dict, *flags: str) -> tuple:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**NINE_B_CONFIG, "quantization_config": quantization_config}))
    return run("capacity", "--model-config", str(config), "--gpu", "A10", "--json", *flags)


def weights_as(quantization: str) -> float:
    code, out, _ = run(
        "capacity",
        "--model",
        "Qwen/Qwen3.5-9B",
        "--gpu",
        "A10",
        "--json",
        "--quantization",
        quantization,
    )
    assert code == 0
    return json.loads(out)["weights_gib_per_gpu"]


@pytest.mark.parametrize(
    ("weights", "sized_as"),
    [
        ({"type": "float", "num_bits": 8}, "fp8"),  # llm-compressor FP8 checkpoints
        ({"type": "int", "num_bits": 4, "group_size": 128}, "gptq-int4"),  # W4A16
    ],
)
def test_compressed_tensors_checkpoints_are_sized_by_their_weights(
    tmp_path: Path, weights: dict, sized_as: str
) -> None:
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": weights}},
    }
    code, out, err = plan_for_quantization(tmp_path, quant)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["quantization"] == sized_as
    assert plan["weights_gib_per_gpu"] == weights_as(sized_as)


@pytest.mark.parametrize(
    ("quant", "named"),
    [
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "gptq-int8"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"type": "int", "num_bits": 8}}},
            },
            "compressed-tensors (int 8-bit)",
        ),
    ],
)
def test_a_quantization_the_planner_cannot_size_is_refused_not_guessed(
    tmp_path: Path, quant: dict, named: str
) -> None:
    code, out, err = plan_for_quantization(tmp_path, quant)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"is quantized as {named}, which the planner cannot size" in err
    assert "pass --quantization" in err
    code, out, _ = plan_for_quantization(tmp_path, quant, "--quantization", "fp8")
    assert code == 0 and json.loads(out)["quantization"] == "fp8"  # the user says how to size it


def test_replicas_print_the_router_flags_and_the_pool_settings() -> None:
    """Three boxes of --max-num-seqs 8: the pool admits 24 requests, at the router and in
    reviewbot's slots alike; one review's chunks fill one box."""
    code, out, _ = run(*T10X4, "--max-num-seqs", "8", "--replicas", "3")
    assert code == 0
    flat = " ".join(out.split())
    assert "--policy consistent_hash" in flat
    assert "--max-concurrent-requests 24" in flat
    assert "REVIEWBOT_LLM_TOTAL_CONCURRENCY=24" in flat
    assert "REVIEWBOT_CONCURRENCY=8" in flat
    assert "REVIEWBOT_LLM_SESSION_HEADER=X-Session-ID" in flat


def test_replicas_in_json_and_without_a_chosen_max_num_seqs() -> None:
    code, out, _ = run(*T10X4, "--replicas", "2", "--json")
    assert code == 0
    plan = json.loads(out)
    per_box = plan["recommended"]["max_num_seqs"]
    router = plan["router"]
    assert router["replicas"] == 2 and router["max_num_seqs"] == per_box
    assert router["settings"]["REVIEWBOT_LLM_TOTAL_CONCURRENCY"] == str(2 * per_box)
    assert f"--max-concurrent-requests {2 * per_box}" in router["flags"]


def test_no_router_without_replicas_and_zero_replicas_is_refused() -> None:
    code, out, _ = run(*T10X4, "--json")
    assert code == 0 and "router" not in json.loads(out)
    code, _, err = run(*T10X4, "--replicas", "0")
    assert code == 2 and "--replicas" in err
