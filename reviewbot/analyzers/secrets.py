"""The built-in secrets scanner: token patterns over lines of text, values never kept.

Patterns (each a rule id of tool ``reviewbot-secrets``):

* ``gitlab-token``: GitLab tokens by their documented prefixes (``glpat-`` personal, ``gldt-``
  deploy, ``glrt-`` runner, ``glptt-`` trigger, ``glft-`` feed, ``glimt-``, ``glagent-``,
  ``glcbt-``, ``gloas-``, ``glsoat-``; https://docs.gitlab.com/security/tokens/#token-prefixes);
* ``aws-access-key-id``: ``AKIA``/``ASIA`` and 16 upper-case letters or digits;
* ``gcp-api-key``: ``AIza`` and 35 characters; ``gcp-service-account-key``: a service account
  file's ``"private_key": "-----BEGIN ...`` entry;
* ``private-key``: a PEM private key header (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP or plain);
* ``generic-secret``: ``password|passwd|secret|token|api_key = "..."`` (``:`` too) whose quoted
  value is at least :data:`MIN_GENERIC_LENGTH` characters of Shannon entropy at least
  :data:`ENTROPY_THRESHOLD` bits a character and no ``$VARIABLE`` / ``<placeholder>``.

Every finding is ``secret=True``: its message names the kind of secret, its snippet is the line
with each matched value replaced by :data:`MASK`. :func:`mask_secrets` masks any text the same
way (the readers apply it to secret-detection reports).

Owns: the patterns, the entropy, the masking. Must not: read a file.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from reviewbot.analyzer_findings import AnalyzerFinding
from reviewbot.findings import Category, Severity

__all__ = [
    "ENTROPY_THRESHOLD",
    "MASK",
    "SECRETS_TOOL",
    "mask_secrets",
    "scan_lines",
    "shannon_entropy",
]

SECRETS_TOOL = "reviewbot-secrets"
MASK = "********"
ENTROPY_THRESHOLD = 3.5  # bits a character; "changeme" is 2.75, a random 16-char key about 4
MIN_GENERIC_LENGTH = 12
MAX_SNIPPET_CHARS = 200
PLACEHOLDER = re.compile(r"^(?:\$\{?\w+\}?|<[^>]*>|\{\{.*\}\}|%\(?\w+\)?s?)$")


@dataclass(frozen=True)
class SecretPattern:
    rule: str
    what: str  # the kind of secret, in the message
    regex: re.Pattern[str]
    value_group: int = 0  # the group that is the secret's value (0: the whole match)
    generic: bool = False  # an assignment: its value must look random


PATTERNS = (
    SecretPattern(
        "gitlab-token",
        "a GitLab token",
        re.compile(r"\bgl(?:pat|dt|rt|ptt|ft|imt|agent|cbt|oas|soat)-[0-9A-Za-z_\-]{20,}"),
    ),
    SecretPattern(
        "aws-access-key-id", "an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
    ),
    SecretPattern("gcp-api-key", "a Google Cloud API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    SecretPattern(
        "gcp-service-account-key",
        "a Google Cloud service account private key",
        re.compile(r"\"private_key\"\s*:\s*\"(-----BEGIN[^\"]*)"),
        value_group=1,
    ),
    SecretPattern(
        "private-key",
        "a private key",
        re.compile(
            r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----"
            r"[^\"'\n]*"
        ),
    ),
    SecretPattern(
        "generic-secret",
        "a hard-coded secret",
        re.compile(
            r"(?i)\b[\w.-]*(?:password|passwd|secret|token|api[_-]?key)[\w-]*[\"']?\s*[:=]\s*"
            r"[\"']([^\"'\s]+)[\"']"
        ),
        value_group=1,
        generic=True,
    ),
)


def shannon_entropy(text: str) -> float:
    """Bits a character of ``text`` (0 for empty text)."""
    if not text:
        return 0.0
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _looks_secret(pattern: SecretPattern, value: str) -> bool:
    if not pattern.generic:
        return True
    return (
        len(value) >= MIN_GENERIC_LENGTH
        and not PLACEHOLDER.match(value)
        and shannon_entropy(value) >= ENTROPY_THRESHOLD
    )


def mask_secrets(text: str) -> str:
    """``text`` with every value a pattern matches replaced by :data:`MASK` (a generic
    assignment's value too, whatever its entropy)."""
    for pattern in PATTERNS:
        text = pattern.regex.sub(lambda m, p=pattern: _masked_match(m, p.value_group), text)
    return text


def _masked_match(match: re.Match[str], group: int) -> str:
    whole = match.group(0)
    if group == 0:
        return MASK
    start, end = match.start(group) - match.start(0), match.end(group) - match.start(0)
    return whole[:start] + MASK + whole[end:]


def scan_lines(path: str, lines: Iterable[tuple[int, str]], origin: str) -> list[AnalyzerFinding]:
    """The secrets on ``lines`` (1-based number, text) of ``path``: one finding per pattern
    and line, the value masked."""
    found: list[AnalyzerFinding] = []
    for number, text in lines:
        on_line = 0
        for pattern in PATTERNS:
            if pattern.generic and on_line:
                continue  # a token already named on this line is not named twice
            match = next(
                (
                    m
                    for m in pattern.regex.finditer(text)
                    if _looks_secret(pattern, m.group(pattern.value_group))
                ),
                None,
            )
            if match is None:
                continue
            on_line += 1
            found.append(
                AnalyzerFinding(
                    tool=SECRETS_TOOL,
                    rule=pattern.rule,
                    path=path,
                    line=number,
                    end_line=None,
                    severity=Severity.CRITICAL,
                    category=Category.SECURITY,
                    message=f"Possible {pattern.what} in the code (value masked): move it to a "
                    "secret store and revoke it.",
                    snippet=mask_secrets(text.strip())[:MAX_SNIPPET_CHARS],
                    secret=True,
                    origin=origin,
                )
            )
    return found
