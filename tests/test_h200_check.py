"""The H200 check's kit (deploy/h200-check, issue 23): the server it starts is the shipped unit's
command for the H200 profile with only the documented changes, and its model is the shape the
capacity planner plans for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy_files import SYSTEMD, VLLM, expand_command, read_env_file, read_unit

pytestmark = pytest.mark.slow  # measured: see docs/development.md

ROOT = Path(__file__).parent.parent
KIT = ROOT / "deploy" / "h200-check"
PROFILE = VLLM / "h200-qwen3.5-35b-a3b-fp8.env"
# What serve.py may add to the unit's command, and nothing else (serve.py's docstring says why).
ADDED_FLAGS = {
    "--served-model-name",
    "--load-format",
    "--logits-processors",
    "--chat-template-content-format",
    "--gdn-prefill-backend",
}


def _printed(model_dir: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(KIT / "serve.py"), str(model_dir), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def _options(argv: list[str]) -> dict[str, str | None]:
    options: dict[str, str | None] = {}
    for index, word in enumerate(argv):
        if word.startswith("--"):
            following = argv[index + 1] if index + 1 < len(argv) else None
            takes_value = following is not None and not following.startswith("--")
            options[word] = following if takes_value else None
    return options


def test_the_check_serves_the_units_command_for_the_profile_with_only_the_documented_changes(
    tmp_path: Path,
) -> None:
    printed = _printed(tmp_path)
    [exec_start] = read_unit(SYSTEMD / "reviewbot-vllm@.service")["Service"]["ExecStart"]
    shipped = expand_command(exec_start, read_env_file(PROFILE))
    served = printed["argv"]
    assert served[served.index("serve") + 1] == str(tmp_path)
    shipped_options, served_options = _options(shipped), _options(served)
    for flag, value in shipped_options.items():
        assert served_options.get(flag, "absent") == value, flag
    assert set(served_options) - set(shipped_options) == ADDED_FLAGS
    assert served_options["--served-model-name"] == read_env_file(PROFILE)["PROFILE_MODEL"]
    assert served_options["--load-format"] == "dummy"
    assert printed["environment"]["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert printed["environment"]["HF_HUB_OFFLINE"] == "1"
    assert all(
        value.startswith("/tmp/")
        for key, value in printed["environment"].items()
        if key.endswith(("_HOME", "_ROOT", "_DIR"))
    )


def test_the_fp8_model_keeps_every_layer_vllm_cannot_block_quantize_in_bf16() -> None:
    sys.path.insert(0, str(KIT))
    try:
        import model_dir  # deploy/h200-check/model_dir.py
    finally:
        sys.path.remove(str(KIT))
    shipped = json.loads(model_dir.SHIPPED_CONFIG.read_text())["config"]["text_config"]
    config = model_dir.model_config(fp8=True)
    text = config["text_config"]
    assert {k: v for k, v in text.items() if k in shipped} == shipped
    quantization = config["quantization_config"]
    assert quantization["quant_method"] == "fp8"
    kept = set(quantization["modules_to_not_convert"])
    # DeltaNet's in_proj_a / in_proj_b have one row per value head: fewer than a 128-row block
    assert shipped["linear_num_value_heads"] % model_dir.FP8_BLOCK[0] != 0
    for layer in range(shipped["num_hidden_layers"]):
        for module in ("linear_attn.in_proj_a", "linear_attn.in_proj_b", "mlp.shared_expert_gate"):
            assert f"model.language_model.layers.{layer}.{module}" in kept
    assert "quantization_config" not in model_dir.model_config(fp8=False)


def test_the_burst_diffs_are_different_sized_within_bounds_and_never_crash_the_engine(
    tmp_path: Path,
) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "deploy" / "h200-check"))
    import burst

    paths = burst.diffs(4, tmp_path)
    sizes = []
    for path in paths:
        text = path.read_text()
        assert burst.ENGINE_CRASH_MARKER not in text
        sizes.append(
            sum(
                1
                for line in text.splitlines()
                if line.startswith("+") and not line.startswith("+++")
            )
        )
    assert all(burst.MIN_LINES <= size <= burst.MAX_LINES for size in sizes)
    assert sizes == sorted(sizes) and len({p.read_text() for p in paths}) == len(paths)
