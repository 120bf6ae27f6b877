"""The short digest of the analyzers' findings on one chunk's files that a chunk's prompt is
meant to carry ("already reported by analyzers, do not repeat"), within a token budget.

Each line names the tool, the rule, path:line and a short message; a secret is named by its
kind only, its value never. Lines are added in path/line order until the next one would pass
the budget; the rest are counted in a last line, so the model knows the list is cut.

Owns: the digest's text and its budget. Must not: count tokens by a rule of its own (the
caller's counter does), read reports or build a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from reviewbot.analyzer_findings import AnalyzerFinding
from reviewbot.analyzer_settings import DEFAULT_ANALYZER_DIGEST_TOKENS
from reviewbot.redaction import mask_secrets

__all__ = ["DEFAULT_ANALYZER_DIGEST_TOKENS", "analyzer_digest"]

DIGEST_MESSAGE_CHARS = 100  # a finding's message, as the digest quotes it
DIGEST_HEADING = "Already reported by analyzers (do not report these again):"


def _short(text: str) -> str:
    flat = " ".join(mask_secrets(text)[0].split())
    if len(flat) <= DIGEST_MESSAGE_CHARS:
        return flat
    return flat[: DIGEST_MESSAGE_CHARS - 1] + "…"


def _one_line(text: str) -> str:
    """A tool, rule or path on one line (git allows line breaks in paths): breaks escaped."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def digest_line(finding: AnalyzerFinding) -> str:
    """One finding as the model is told it; a secret's value never appears."""
    named = f"{_one_line(finding.tool)} {_one_line(finding.rule)}"
    where = f"{_one_line(finding.path)}:{finding.line}"
    if finding.secret:
        return f"- {named} {where}: a committed secret (value masked)"
    return f"- {named} {where}: {_short(finding.message)}"


def analyzer_digest(
    findings: Sequence[AnalyzerFinding],
    paths: Collection[str],
    count_tokens: Callable[[str], int],
    max_tokens: int = DEFAULT_ANALYZER_DIGEST_TOKENS,
) -> str:
    """The digest of ``findings`` on ``paths`` within ``max_tokens``; "" when there are none
    (or not even the heading fits)."""
    wanted = sorted(
        (finding for finding in findings if finding.path in paths),
        key=lambda finding: (finding.path, finding.line, finding.tool, finding.rule),
    )
    if not wanted:
        return ""
    lines = [DIGEST_HEADING]
    for index, finding in enumerate(wanted):
        candidate = [*lines, digest_line(finding)]
        left = len(wanted) - index - 1
        closing = [f"- … and {left} more"] if left else []
        if count_tokens("\n".join([*candidate, *closing])) > max_tokens:
            lines.append(f"- … and {len(wanted) - index} more")
            break
        lines = candidate
    text = "\n".join(lines)
    return text if count_tokens(text) <= max_tokens and len(lines) > 1 else ""
