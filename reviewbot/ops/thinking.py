"""``reviewbot doctor``'s thinking check: what the probe showed of Qwen3.5's thinking (pure).

Whether the model thought as ``REVIEWBOT_ENABLE_THINKING`` asks, whether the probe's call
survived the server's parsers or stayed inside the thinking (vllm#39056), how many tokens the
one-finding probe spent thinking against ``max_output_tokens``, and the setting recommended for
this server (docs/thinking.md).

Owns: the thinking check's status, words and fix. Must not: ask the server (the doctor's
probes do), or print.
"""

from __future__ import annotations

from reviewbot.model import ModelAnswer
from reviewbot.ops.doctor import REASONING_PARSER_FIX, Check, Status
from reviewbot.toolcalls import TOOL_CALL_OPEN

__all__ = ["THINKING_SHARE_WARN", "thinking_check"]

THINKING_SETTINGS = {
    None: "REVIEWBOT_ENABLE_THINKING unset: the server's choice (Qwen3.5 thinks by default)",
    True: "REVIEWBOT_ENABLE_THINKING=true",
    False: "REVIEWBOT_ENABLE_THINKING=false",
}
# Above this share of max_output_tokens spent thinking on the one-finding probe, thinking off
# is recommended: a real chunk (many findings, tool rounds) thinks longer than the probe.
THINKING_SHARE_WARN = 0.5
DEFAULT_OUTPUT_BUDGET = 4096  # LLMSettings.max_output_tokens's default


def thinking_check(
    enable_thinking: bool | None,
    answer: ModelAnswer | None,
    thinking_tokens: int | None = None,
    output_budget: int = DEFAULT_OUTPUT_BUDGET,
) -> Check:
    """What the probe showed of Qwen3.5's thinking, against REVIEWBOT_ENABLE_THINKING: whether
    the probe's call survived the parsers, the tokens it spent thinking (``thinking_tokens``:
    the server's count, else reviewbot's of the reasoning text) against ``output_budget``
    (max_output_tokens), and the setting recommended for this server."""
    setting = THINKING_SETTINGS[enable_thinking]
    if answer is None:
        return Check("thinking", Status.WARN, f"{setting}; not checked: the probe got no answer")
    if "<think>" in answer.content or "</think>" in answer.content:
        return Check(
            "thinking",
            Status.WARN,
            f"{setting}; the model's thinking came back inside the answer's text",
            REASONING_PARSER_FIX,
        )
    thought = bool(answer.reasoning.strip())
    if enable_thinking is False and thought:
        return Check(
            "thinking",
            Status.WARN,
            f"{setting}, but the model thought anyway: the server ignores chat_template_kwargs",
            "serve a Qwen3.5 chat template that reads enable_thinking",
        )
    if enable_thinking is True and not thought:
        return Check(
            "thinking",
            Status.WARN,
            f"{setting}, but the probe's answer has no reasoning: the server ignores "
            "chat_template_kwargs",
            "serve a Qwen3.5 chat template that reads enable_thinking",
        )
    if not thought:
        return Check(
            "thinking",
            Status.OK,
            f"off: the probe's answer came without reasoning; {setting} (what thinking would "
            "cost here: REVIEWBOT_ENABLE_THINKING=true reviewbot doctor --model-only)",
        )
    return _thinking_spent(setting, answer, thinking_tokens, output_budget)


def _thinking_spent(
    setting: str, answer: ModelAnswer, thinking_tokens: int | None, output_budget: int
) -> Check:
    """The probe thought: did its call survive the parsers, and what did thinking cost."""
    spent = f"{thinking_tokens} tokens" if thinking_tokens is not None else "an unknown number"
    share = thinking_tokens / output_budget if thinking_tokens is not None and output_budget else 0
    cost = f"{spent} of thinking ({share:.0%} of max_output_tokens={output_budget})"
    if not answer.tool_calls and TOOL_CALL_OPEN in answer.reasoning:
        return Check(
            "thinking",
            Status.WARN,
            f"on, {cost}; the probe's call was written inside the thinking and the server's "
            "reasoning parser kept it there (vllm#39056): reviewbot reads such calls (counted "
            "as recovered), but a call cut off there is lost",
            f"recommended: REVIEWBOT_ENABLE_THINKING=false, or a vLLM whose parser ends the "
            f"thinking at {TOOL_CALL_OPEN} (0.32 does)",
        )
    if share > THINKING_SHARE_WARN:
        return Check(
            "thinking",
            Status.WARN,
            f"on, {cost} for a one-finding probe: a real chunk thinks longer, and an answer "
            "cut off while thinking costs a second request with thinking off",
            "recommended: REVIEWBOT_ENABLE_THINKING=false, or a larger REVIEWBOT_MAX_OUTPUT_TOKENS",
        )
    return Check(
        "thinking",
        Status.OK,
        f"on, {cost}; the probe's call survived the parsers; {setting}; recommended: "
        "thinking on (measure both on your own merge requests: docs/thinking.md)",
    )
