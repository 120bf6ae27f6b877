"""What every report reader shares: the size limit, the JSON parse, the commit check, a
report's path made repository-relative, and the name a report goes by in the summary.

Owns: :class:`ReportContext`, :func:`parse_report`, :func:`repository_path`,
:func:`commit_problem`. Must not: read a file or know one format's fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from reviewbot.analyzer_findings import AnalyzerProblem, AnalyzerRun

__all__ = [
    "MAX_REPORT_BYTES",
    "ReportContext",
    "commit_problem",
    "counted",
    "field_text",
    "line_number",
    "parse_report",
    "problem_run",
    "repository_path",
]

MAX_REPORT_BYTES = 20 * 1024 * 1024  # a report larger than this is refused, not read
MIN_SHA_PREFIX = 7  # a shorter revision names no commit we can compare
FILE_SCHEME = "file"


@dataclass(frozen=True)
class ReportContext:
    """What a reader checks a report against: the commits it may be for (the MR's head, and
    in a merged-results pipeline the pipeline's merge commit; empty: not checked) and the
    folders an absolute path is made relative to (the CI checkout's ``CI_PROJECT_DIR``)."""

    commits: frozenset[str] = frozenset()
    roots: tuple[str, ...] = field(default=())


def problem_run(name: str, reason: str) -> AnalyzerRun:
    return AnalyzerRun(problems=(AnalyzerProblem(name, reason),))


def parse_report(name: str, data: bytes) -> Any | AnalyzerProblem:
    """The report's JSON, or the problem: too large, not UTF-8, not JSON."""
    if len(data) > MAX_REPORT_BYTES:
        return AnalyzerProblem(
            name, f"not read: larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB"
        )
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return AnalyzerProblem(name, "not read: not UTF-8 text")
    except (json.JSONDecodeError, RecursionError) as error:
        detail = getattr(error, "msg", "nested too deep")
        return AnalyzerProblem(name, f"not read: not JSON ({detail})")


def commit_problem(name: str, revisions: Iterable[str], context: ReportContext) -> str | None:
    """The reason a report naming ``revisions`` is for another commit, or None (it names
    none, names an accepted one, or there is nothing to check against). An all-zero SHA names
    none: GitLab's secret detection writes ``0000000`` when it scans the files, not the
    history."""
    named = [
        r.strip().lower()
        for r in revisions
        if len(r.strip()) >= MIN_SHA_PREFIX and r.strip().strip("0")
    ]
    if not named or not context.commits:
        return None
    accepted = [c.lower() for c in context.commits]
    for revision in named:
        if any(c.startswith(revision) or revision.startswith(c) for c in accepted):
            return None
    return f"for commit {named[0][: MIN_SHA_PREFIX + 1]}, not the MR's head: not used"


def repository_path(location: str, context: ReportContext) -> str:
    """A report's file location as a repository-relative path: ``file://`` URIs and
    percent-encoding decoded (RFC 3986 section 2.1; SARIF 2.1.0 section 3.10 says
    ``artifactLocation.uri`` is a URI reference), ``./`` and a checkout root removed."""
    text = location.strip()
    if "://" in text or text.startswith(f"{FILE_SCHEME}:"):
        parts = urlsplit(text)
        text = parts.path if parts.scheme == FILE_SCHEME else text
    text = unquote(text).replace("\\", "/")
    for root in context.roots:
        prefix = root.rstrip("/") + "/"
        if root and text.startswith(prefix):
            text = text[len(prefix) :]
            break
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def field_text(item: Mapping[str, Any], *names: str) -> str:
    """The first of ``names`` that is non-empty text in ``item`` ("" when none is)."""
    for name in names:
        value = item.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def line_number(value: object) -> int | None:
    """A 1-based line number, or None for anything else (0, negative, text, a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def counted(number: int, noun: str = "finding") -> str:
    """``"1 finding"``, ``"3 findings"``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
