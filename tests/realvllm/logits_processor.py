"""The scripted model inside the real vLLM: a custom logits processor that forces an answer.

Loaded by the server of the real-vLLM tier with
``--logits-processors tests.realvllm.logits_processor:ScriptedModel`` (the repository on
``PYTHONPATH``). For every request it decodes the prompt's token ids, asks
``tests.realvllm.script.answer_text`` what a reviewer answers, encodes that text with the served
tokenizer and then, at each decoding step, leaves exactly one token possible: the answer's next
token, and ``<|im_end|>`` after the last. The weights stay random (``--load-format dummy``);
everything else is vLLM's own: the chat template rendering, the reasoning and ``qwen3_coder``
tool parsers reading the forced text, streaming, usage, prefix caching and metrics.

Interface: the V1 model runner's ``vllm.v1.sample.logits_processor.LogitsProcessor``. vLLM 0.32's
CPU build has no Triton, so it runs the V1 model runner ("Model Runner V2 requires Triton; using
the V1 model runner instead" in the server log); the Model Runner V2 interface of the "Custom
Logits Processors" docs page (``vllm.v1.worker.gpu.sample.logits_processor``) is refused there.
A request with structured output (a JSON schema) is forced to the scripted JSON answer, which the
grammar accepts; ``max_tokens`` still cuts the answer (``finish_reason: length``).

A prompt holding ``ENGINE_CRASH_MARKER`` makes ``apply`` raise: the engine core dies the way it
does on a device error, and vLLM answers every later request 500 "EngineCore encountered an
issue" (issue 19 saw a per-request ``seed`` do that on CPU; with this processor loaded it does not,
so the tier kills the engine this way).

Owns: turning the script's text into forced tokens. Must not: decide the answer
(``tests.realvllm.script`` does).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tokenizers import Tokenizer
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from tests.realvllm.script import ENGINE_CRASH_MARKER, IM_END, answer_text

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

LOG = logging.getLogger("reviewbot.scripted_model")
TOKENIZER_FILE = "tokenizer.json"
FORCED_LOGIT = 0.0


@dataclass
class _Forced:
    """One request's forced answer and its running output (vLLM's own list, read live)."""

    answer_ids: list[int]
    output_ids: list[int]
    crash: bool = False


class ScriptedModel(LogitsProcessor):
    """Forces each request's scripted answer, token by token, then ``<|im_end|>``."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        tokenizer_dir = Path(vllm_config.model_config.tokenizer)
        self._tokenizer = Tokenizer.from_file(str(tokenizer_dir / TOKENIZER_FILE))
        end = self._tokenizer.token_to_id(IM_END)
        if end is None:
            raise ValueError(f"the tokenizer in {tokenizer_dir} has no {IM_END} token")
        self._end_id = end
        self._requests: dict[int, _Forced] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it decides the argmax

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self._requests, batch_update, self._new_request)

    def _new_request(
        self, params: SamplingParams, prompt_ids: list[int] | None, output_ids: list[int]
    ) -> _Forced | None:
        if prompt_ids is None:
            return None
        prompt = self._tokenizer.decode(prompt_ids, skip_special_tokens=False)
        text = answer_text(prompt, _json_schema(params))
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        LOG.info("scripted answer: %d prompt tokens -> %d answer tokens", len(prompt_ids), len(ids))
        return _Forced([*ids, self._end_id], output_ids, ENGINE_CRASH_MARKER in prompt)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for row, forced in self._requests.items():
            if forced.crash:
                raise RuntimeError(f"{ENGINE_CRASH_MARKER}: the scripted model kills the engine")
            step = len(forced.output_ids)
            token = forced.answer_ids[min(step, len(forced.answer_ids) - 1)]
            logits[row].fill_(float("-inf"))
            logits[row, token] = FORCED_LOGIT
        return logits


def _json_schema(params: SamplingParams) -> dict[str, Any] | None:
    """The JSON schema of a structured-output request, or None."""
    structured = getattr(params, "structured_outputs", None)
    schema = getattr(structured, "json", None) if structured is not None else None
    if isinstance(schema, str):
        return json.loads(schema)
    return schema if isinstance(schema, dict) else None
