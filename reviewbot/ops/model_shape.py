"""A model's shape, read from its Hugging Face ``config.json``: layers, heads, layer types, experts.

Qwen3.5 configs nest the language model under ``text_config`` and mix two kinds of layers:
``full_attention`` (gated attention with a KV cache that grows with every token) and
``linear_attention`` (Gated DeltaNet: a fixed-size state per sequence). The kinds come from
``layer_types`` or, when a config only gives ``full_attention_interval``, every n-th layer is
full attention. Plain transformers (no ``layer_types``) are all full attention.

The Qwen3.5 family ships in ``reviewbot/ops/models/*.json``, each with the address it was read
from and what could not be checked.

Owns: reading a ``config.json`` (a file the user names, through `reviewbot.input_files`, or one
shipped in ``reviewbot/ops/models/``) into a ``ModelShape``. Must not: download a config, or do the
memory arithmetic (`reviewbot.ops.capacity` does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from reviewbot.input_files import InputFileRefused, read_input_file

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"
LAYER_KINDS = (FULL_ATTENTION, LINEAR_ATTENTION)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}
# Suffixes of quantized checkpoints' names and the quantization they stand for.
QUANTIZED_NAME_SUFFIXES = {"-gptq-int4": "gptq-int4", "-awq": "awq-int4", "-fp8": "fp8"}
# A config.json is a few KB; a larger file is not one (and is not read whole to find out).
MAX_CONFIG_FILE_BYTES = 4 * 1024 * 1024
# The largest value each dimension may have: an order of magnitude or more above every
# published decoder (the largest have ~128 layers, hidden 16-25K, 128 heads, 512 experts,
# 256K-token vocabularies, 10M positions), so a typo or a hostile file (1e11 layers) is refused
# with one line instead of being multiplied into a MemoryError or an absurd plan.
MAX_LAYERS = 4096
MAX_HIDDEN_SIZE = 1 << 18  # 262,144
MAX_HEADS = 4096
MAX_HEAD_DIM = 8192
MAX_VOCAB_SIZE = 1 << 24  # 16,777,216
MAX_INTERMEDIATE_SIZE = 1 << 21  # 2,097,152
MAX_EXPERTS = 1 << 16  # 65,536
MAX_CONV_KERNEL = 1024
MAX_POSITIONS = 1 << 30
MAX_SHOWN_CHARS = 40
DIMENSION_LIMITS = {
    "num_hidden_layers": MAX_LAYERS,
    "full_attention_interval": MAX_LAYERS,
    "hidden_size": MAX_HIDDEN_SIZE,
    "num_attention_heads": MAX_HEADS,
    "num_key_value_heads": MAX_HEADS,
    "linear_num_key_heads": MAX_HEADS,
    "linear_num_value_heads": MAX_HEADS,
    "head_dim": MAX_HEAD_DIM,
    "linear_key_head_dim": MAX_HEAD_DIM,
    "linear_value_head_dim": MAX_HEAD_DIM,
    "linear_conv_kernel_dim": MAX_CONV_KERNEL,
    "vocab_size": MAX_VOCAB_SIZE,
    "intermediate_size": MAX_INTERMEDIATE_SIZE,
    "moe_intermediate_size": MAX_INTERMEDIATE_SIZE,
    "shared_expert_intermediate_size": MAX_INTERMEDIATE_SIZE,
    "num_experts": MAX_EXPERTS,
    "num_experts_per_tok": MAX_EXPERTS,
    "max_position_embeddings": MAX_POSITIONS,
}


class ModelConfigError(ValueError):
    """A config.json that cannot be read as a decoder model (one clear line for the user)."""


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder that decide its memory; all per model, before tensor parallel."""

    name: str
    source: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    layer_types: tuple[str, ...]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    attn_output_gate: bool
    max_position_embeddings: int | None
    dtype: str
    # Gated DeltaNet (linear attention); zero for models without it.
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    mamba_ssm_dtype: str = "float32"
    # Dense MLP (zero for MoE models) or mixture of experts.
    intermediate_size: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    quantization: str | None = None
    # A vision-language checkpoint (vLLM can skip its encoder with --language-model-only).
    multimodal: bool = False

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    @property
    def full_attention_layers(self) -> int:
        return self.layer_types.count(FULL_ATTENTION)

    @property
    def linear_attention_layers(self) -> int:
        return self.layer_types.count(LINEAR_ATTENTION)

    @property
    def is_hybrid(self) -> bool:
        return self.linear_attention_layers > 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def linear_key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def linear_conv_dim(self) -> int:
        """Channels of the causal conv over the fused q, k, v projection."""
        return 2 * self.linear_key_dim + self.linear_value_dim


def _require_int(config: dict[str, Any], key: str, where: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ModelConfigError(f"{where}: {key} must be a positive integer (found {_shown(value)})")
    return _within_limit(value, key, where)


def _optional_int(config: dict[str, Any], key: str, default: int, where: str) -> int:
    """``key``'s value, ``default`` when absent (or null); 0 only where the default is 0 (a
    part the model does not have)."""
    value = config.get(key)
    if value is None:
        return default
    least = 0 if default == 0 else 1
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        kind = "a positive integer" if least else "an integer of 0 or more"
        raise ModelConfigError(f"{where}: {key} must be {kind} (found {_shown(value)})")
    return _within_limit(value, key, where)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _within_limit(value: int, key: str, where: str) -> int:
    limit = DIMENSION_LIMITS[key]
    if value > limit:
        raise ModelConfigError(
            f"{where}: {key} {_shown(value)} is larger than any model the planner can size "
            f"(at most {limit:,})"
        )
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


def _optional_positions(text: dict[str, Any], where: str) -> int | None:
    if text.get("max_position_embeddings") is None:
        return None
    return _require_int(text, "max_position_embeddings", where)


def _layer_types(text: dict[str, Any], where: str) -> tuple[str, ...]:
    count = _require_int(text, "num_hidden_layers", where)
    declared = text.get("layer_types")
    if declared is not None:
        if not isinstance(declared, list) or len(declared) != count:
            raise ModelConfigError(
                f"{where}: layer_types must list num_hidden_layers ({count}) kinds"
            )
        unknown = sorted({_shown(kind) for kind in declared if kind not in LAYER_KINDS})
        if unknown:
            raise ModelConfigError(f"{where}: unsupported layer type(s) {', '.join(unknown)}")
        return tuple(declared)
    if text.get("full_attention_interval") is None:
        return (FULL_ATTENTION,) * count
    interval = _require_int(text, "full_attention_interval", where)
    return tuple(
        FULL_ATTENTION if (index + 1) % interval == 0 else LINEAR_ATTENTION
        for index in range(count)
    )


def _quantization(config: dict[str, Any]) -> str | None:
    """The checkpoint's quantization in the planner's names (``gptq-int4``, ``fp8``...), or a
    description of one it cannot size (``gptq-int8``, ``bitsandbytes``), which the planner
    refuses with a clear error unless ``--quantization`` says how to size it."""
    quant = config.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method in ("gptq", "awq"):
        return f"{method}-int{quant.get('bits', '?')}"
    if method == "compressed-tensors":
        return _compressed_tensors_quantization(quant)
    return method or None


def _compressed_tensors_quantization(quant: dict[str, Any]) -> str:
    """llm-compressor's format: the weights' ``num_bits`` and ``type`` in ``config_groups``
    (FP8 checkpoints are float 8-bit; W4A16 ones int 4-bit with group scales, as GPTQ)."""
    groups = quant.get("config_groups")
    groups = groups if isinstance(groups, dict) else {}
    weights = [group.get("weights") for group in groups.values() if isinstance(group, dict)]
    formats = {
        (str(w.get("type", "")).lower(), w.get("num_bits")) for w in weights if isinstance(w, dict)
    }
    if formats == {("float", 8)}:
        return "fp8"
    if formats == {("int", 4)}:
        return "gptq-int4"
    shown = ", ".join(f"{kind} {bits}-bit" for kind, bits in sorted(formats, key=str)) or "?"
    return f"compressed-tensors ({shown})"


def shape_from_config(config: dict[str, Any], name: str, source: str) -> ModelShape:
    """Read a Hugging Face config.json (top-level or nested under ``text_config``)."""
    if not isinstance(config, dict):
        raise ModelConfigError(f"{source}: not a JSON object")
    text = config.get("text_config", config)
    if not isinstance(text, dict):
        raise ModelConfigError(f"{source}: text_config is not an object")
    where = source
    hidden = _require_int(text, "hidden_size", where)
    heads = _require_int(text, "num_attention_heads", where)
    layer_types = _layer_types(text, where)
    dtype = str(
        text.get("dtype") or text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16"
    )
    if text.get("head_dim") is None and hidden < heads:
        raise ModelConfigError(
            f"{where}: head_dim is not given and hidden_size {hidden} / num_attention_heads "
            f"{heads} is below 1"
        )
    shape = ModelShape(
        name=name,
        source=source,
        hidden_size=hidden,
        vocab_size=_require_int(text, "vocab_size", where),
        tie_word_embeddings=bool(
            config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
        ),
        layer_types=layer_types,
        num_attention_heads=heads,
        num_key_value_heads=_optional_int(text, "num_key_value_heads", heads, where),
        head_dim=_optional_int(text, "head_dim", hidden // heads, where),
        attn_output_gate=bool(text.get("attn_output_gate", False)),
        max_position_embeddings=_optional_positions(text, where),
        dtype=dtype if dtype in DTYPE_BYTES else "bfloat16",
        linear_num_key_heads=_optional_int(text, "linear_num_key_heads", 0, where),
        linear_num_value_heads=_optional_int(text, "linear_num_value_heads", 0, where),
        linear_key_head_dim=_optional_int(text, "linear_key_head_dim", 0, where),
        linear_value_head_dim=_optional_int(text, "linear_value_head_dim", 0, where),
        linear_conv_kernel_dim=_optional_int(text, "linear_conv_kernel_dim", 0, where),
        mamba_ssm_dtype=str(text.get("mamba_ssm_dtype", "float32")),
        intermediate_size=_optional_int(text, "intermediate_size", 0, where),
        num_experts=_optional_int(text, "num_experts", 0, where),
        num_experts_per_tok=_optional_int(text, "num_experts_per_tok", 0, where),
        moe_intermediate_size=_optional_int(text, "moe_intermediate_size", 0, where),
        shared_expert_intermediate_size=_optional_int(
            text, "shared_expert_intermediate_size", 0, where
        ),
        quantization=_quantization(config) or _quantization(text),
        multimodal="vision_config" in config
        or any(
            str(arch).endswith("ForConditionalGeneration")
            for arch in _list(config.get("architectures"))
        ),
    )
    if shape.is_hybrid and not (
        shape.linear_num_value_heads
        and shape.linear_key_head_dim
        and shape.linear_value_head_dim
        and shape.linear_conv_kernel_dim
    ):
        raise ModelConfigError(f"{where}: linear_attention layers need the linear_* head settings")
    if not shape.is_moe and not shape.intermediate_size:
        raise ModelConfigError(f"{where}: neither intermediate_size nor num_experts is set")
    if shape.is_moe and not (shape.num_experts_per_tok and shape.moe_intermediate_size):
        raise ModelConfigError(
            f"{where}: num_experts needs num_experts_per_tok and moe_intermediate_size"
        )
    return shape


def load_config_file(path: Path) -> ModelShape:
    """A model shape from a config.json on disk (errors name the file): a regular file of at
    most MAX_CONFIG_FILE_BYTES, checked before it is read."""
    try:
        config = json.loads(read_input_file(path, MAX_CONFIG_FILE_BYTES).decode("utf-8"))
    except InputFileRefused as refused:
        raise ModelConfigError(f"{path} {refused}: not a model config.json") from None
    except OSError as error:
        raise ModelConfigError(f"cannot read {path}: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ModelConfigError(f"{path} is not valid JSON: {error}") from None
    except RecursionError:
        raise ModelConfigError(f"{path} is not a model config: JSON nested too deep") from None
    return shape_from_config(config, name=path.parent.name or path.stem, source=str(path))


def _shipped_files() -> dict[str, Any]:
    folder = resources.files("reviewbot.ops") / "models"
    return {
        entry.name.removesuffix(".json").lower(): entry
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    }


def shipped_model_names() -> list[str]:
    """The Qwen3.5 models whose configs ship with reviewbot (their Hugging Face names)."""
    return sorted(json.loads(entry.read_text())["hf_repo"] for entry in _shipped_files().values())


def split_quantized_name(name: str) -> tuple[str, str | None]:
    """``Qwen/Qwen3.5-35B-A3B-GPTQ-Int4`` -> (``qwen3.5-35b-a3b``, ``gptq-int4``)."""
    key = name.strip().lower().rsplit("/", 1)[-1]
    for suffix, quantization in QUANTIZED_NAME_SUFFIXES.items():
        if key.endswith(suffix):
            return key.removesuffix(suffix), quantization
    return key, None


def shipped_model(name: str) -> ModelShape:
    """A shipped model by name, with or without ``Qwen/`` and a quantization suffix."""
    key, quantization = split_quantized_name(name)
    files = _shipped_files()
    if key not in files:
        raise ModelConfigError(
            f"unknown model {name!r} (shipped: {', '.join(shipped_model_names())}; "
            "or pass --model-config path/to/config.json)"
        )
    document = json.loads(files[key].read_text())
    shape = shape_from_config(
        document["config"], name=document["hf_repo"], source=document["source"]
    )
    if quantization is None:
        return shape
    return ModelShape(**{**shape.__dict__, "name": name, "quantization": quantization})
