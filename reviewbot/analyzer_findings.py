"""What a deterministic analyzer found: the vocabulary shared by the readers of the pipeline's
reports, the built-in analyzers and the review that merges their findings with the model's.

An analyzer finding comes from a linter, a secret scanner or a SAST tool: read from a report the
pipeline already produced (SARIF 2.1.0, GitLab's SAST / secret-detection JSON, Code Quality
JSON) or from a built-in analyzer run on the checkout. It names its tool and the tool's rule, a
path and a line of the head commit, and a snippet of the flagged code (masked when the tool is a
secret scanner: a secret's value is never stored or echoed).

Its fingerprint does not depend on the line number (tool + rule + path + the normalised
snippet, or the message where the snippet is unknown), so a finding that moves with the code
keeps its identity across pushes and re-runs.

Owns: the analyzer finding, a problem with one analyzer or report, one collection's outcome,
and where a posted finding came from. Must not: read a file, run a tool or know a report's
format (``reviewbot.analyzers`` does).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum

from reviewbot.findings import Category, Severity

__all__ = [
    "AnalyzerFinding",
    "AnalyzerProblem",
    "AnalyzerRun",
    "FindingSource",
    "analyzer_fingerprint",
]

ANALYZER_FINGERPRINT_HEX_CHARS = 20
FINGERPRINT_SEPARATOR = "\x1f"
WHITESPACE_RUN = re.compile(r"\s+")


class FindingSource(StrEnum):
    """Where a finding came from; ``both`` when the model and an analyzer reported one problem."""

    MODEL = "model"
    ANALYZER = "analyzer"
    BOTH = "both"


def analyzer_fingerprint(tool: str, rule: str, path: str, snippet: str, message: str = "") -> str:
    """A line-number-free identity: tool, rule, path and the normalised snippet (the normalised
    message where the snippet is empty)."""
    evidence = _normalized(snippet) or _normalized(message)
    parts = [tool.strip().lower(), rule.strip(), path, evidence]
    digest = hashlib.sha256(FINGERPRINT_SEPARATOR.join(parts).encode("utf-8")).hexdigest()
    return digest[:ANALYZER_FINGERPRINT_HEX_CHARS]


def _normalized(text: str) -> str:
    return WHITESPACE_RUN.sub(" ", text).strip()


@dataclass(frozen=True, slots=True)
class AnalyzerFinding:
    """One finding of one analyzer, on the head commit's side.

    ``path`` is repository-relative (no leading ``./`` or ``/``); ``line``/``end_line`` are
    1-based lines of the head file (``end_line`` None for one line). ``message`` and
    ``snippet`` are the tool's text, with secrets already masked when ``secret`` is set.
    ``origin`` names where it was read ("built-in ruff", "SARIF gl-sast.sarif", ...).
    """

    tool: str
    rule: str
    path: str
    line: int
    end_line: int | None
    severity: Severity
    category: Category
    message: str
    snippet: str = ""
    secret: bool = False
    origin: str = ""

    @property
    def fingerprint(self) -> str:
        return analyzer_fingerprint(self.tool, self.rule, self.path, self.snippet, self.message)


@dataclass(frozen=True, slots=True)
class AnalyzerProblem:
    """An analyzer that did not run, or a report that could not be used, and why: named in the
    summary ("analyzer ruff did not run: timed out after 30 s"), never a silent 0."""

    name: str
    reason: str

    def sentence(self) -> str:
        return f"{self.name}: {self.reason}"


@dataclass(frozen=True, slots=True)
class AnalyzerRun:
    """What one collection produced: the findings, the analyzers and reports used (each one named
    even when it found nothing) and the problems."""

    findings: tuple[AnalyzerFinding, ...] = ()
    used: tuple[str, ...] = ()
    problems: tuple[AnalyzerProblem, ...] = ()

    def merged(self, other: AnalyzerRun) -> AnalyzerRun:
        return AnalyzerRun(
            self.findings + other.findings, self.used + other.used, self.problems + other.problems
        )
