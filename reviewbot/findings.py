"""Findings: validate what the model reported, anchor it to the diff, fingerprint, dedupe, sanitise.

The model reports each problem with one ``report_finding`` call, whose parameters
:func:`report_finding_parameters` declares (the schema the model is shown). Its arguments are
untrusted: :func:`validate_call` checks them against that schema with
:func:`reviewbot.toolcalls.check_arguments`, the check the model runner answers the model with
(a ``RawFinding``, or a ``Rejected`` naming each broken field), :func:`anchor` ties it to a line
that GitLab accepts (or moves it to the nearest changed line of the same hunk, or to the summary
as a file-level finding: never lost), :func:`fingerprint` gives a line-number-free identity for
idempotent re-runs, :func:`dedupe` and :func:`select` decide what is posted, and
:mod:`reviewbot.markdown` makes the text safe to post. :func:`process` ties it together.
A finding as the store keeps it is :mod:`reviewbot.stored_findings`.

Owns: what a finding is, from the model's call to what is posted. Everything here is pure:
plain data in, plain data out. Must not: read GitLab, the model or the database, or know how
a record becomes a row (that is the store's).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reviewbot.diff import DiffLine, FileDiff, LineKind, Side, nearest_changed_line
from reviewbot.markdown import (
    DEFAULT_MAX_TITLE_CHARS,
    HTML_COMMENT_OPEN,
    QUICK_ACTION_LINE,
    lines_of,
    printable_text,
    sanitize_markdown,
    sanitize_title,
)
from reviewbot.redaction import mask_secrets
from reviewbot.toolcalls import NON_BLANK_PATTERN, check_arguments

__all__ = [
    "DEFAULT_OPTIONS",
    "REPORT_FINDING_TOOL",
    "AnchorKind",
    "Category",
    "Finding",
    "FindingState",
    "FindingsOptions",
    "FindingsResult",
    "RawFinding",
    "Rejected",
    "Selection",
    "Severity",
    "anchor",
    "dedupe",
    "fingerprint",
    "process",
    "report_finding_parameters",
    "reselected",
    "select",
    "validate_call",
    "with_carried",
    "without",
]

REPORT_FINDING_TOOL = "report_finding"
FINGERPRINT_HEX_CHARS = 20
NEAR_IDENTICAL_TITLE_RATIO = 0.9
DEFAULT_CONTEXT_LINES = 3
DEFAULT_MAX_BODY_CHARS = 4000
DEFAULT_MAX_SUGGESTION_CHARS = 4000
DEFAULT_MAX_INLINE = 30


class Severity(StrEnum):
    """Most severe first; the names of GitLab Code Quality severities."""

    BLOCKER = "blocker"
    CRITICAL = "critical"
    MAJOR = "major"
    MINOR = "minor"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the most severe; smaller is more severe."""
        return list(Severity).index(self)


class Category(StrEnum):
    BUG = "bug"
    SECURITY = "security"
    CONCURRENCY = "concurrency"
    ERROR_HANDLING = "error-handling"
    PERFORMANCE = "performance"
    DATA_LOSS = "data-loss"
    RESOURCE_LEAK = "resource-leak"
    API_MISUSE = "api-misuse"
    MAINTAINABILITY = "maintainability"
    STYLE = "style"


class AnchorKind(StrEnum):
    EXACT = "exact"
    REANCHORED = "reanchored"
    FILE = "file"


class FindingState(StrEnum):
    """What happened to a finding on GitLab."""

    POSTED = "posted"
    SUMMARY = "summary"
    DUPLICATE = "duplicate"
    DRY_RUN = "dry_run"
    RESOLVED = "resolved"
    OUTDATED = "outdated"
    FAILED = "failed"
    DELETED = "deleted"  # found again but not posted again: a reviewer had deleted its comment
    DROPPED = "dropped"  # the verification pass judged it wrong or too weak: never posted
    SUPPRESSED = "suppressed_by_learning"  # a team learning excludes it: never posted
    VOTED_OUT = "voted_out"  # a deep review's passes reported it too few times: never posted


@dataclass(frozen=True, slots=True)
class RawFinding:
    """A finding as the model reported it, with its types checked."""

    path: str
    line: int
    side: Side
    end_line: int | None
    severity: Severity
    category: Category
    title: str
    body: str
    suggestion: str | None
    chunk_index: int
    rule: str | None = None  # the review rule the model says the finding applies


@dataclass(frozen=True, slots=True)
class Rejected:
    """A call (or finding) that cannot be used, and why."""

    reason: str
    arguments: Mapping[str, Any]
    chunk_index: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """An anchored finding, ready to post.

    ``side``/``line`` (and ``end_line`` for a range) address the anchored line (``line`` is
    None for a file-level finding); an unchanged line is always addressed on the new side.
    Where GitLab wants it (``old_line``/``new_line``, line codes) is ``reviewbot.positions``'
    business. ``title``, ``body`` and ``suggestion`` are sanitised;
    ``reported_line``/``reported_side`` keep what the model said.
    """

    path: str
    old_path: str
    side: Side
    line: int | None
    end_line: int | None
    severity: Severity
    category: Category
    title: str
    body: str
    suggestion: str | None
    anchor: AnchorKind
    anchor_note: str
    line_text: str
    fingerprint: str
    chunk_index: int
    reported_line: int
    reported_side: Side
    rule: str | None = None  # a rule of the review's rule set it applies (an unknown one: None)
    # the model's text held what looked like a secret (a token, a key): masked before posting,
    # a suggestion holding one dropped
    masked: bool = False
    source: str = "model"  # model / analyzer / both (reviewbot.analyzer_findings.FindingSource)
    analyzers: tuple[str, ...] = ()  # "tool rule" of each analyzer that reported it
    votes: int | None = None  # a deep review's vote (reviewbot.votes): passes that reported it,
    passes: int | None = None  # of the passes that answered

    @property
    def is_file_level(self) -> bool:
        return self.anchor is AnchorKind.FILE


@dataclass(frozen=True, slots=True)
class TextLimits:
    title_chars: int = DEFAULT_MAX_TITLE_CHARS
    body_chars: int = DEFAULT_MAX_BODY_CHARS
    suggestion_chars: int = DEFAULT_MAX_SUGGESTION_CHARS


@dataclass(frozen=True, slots=True)
class FindingsOptions:
    context_lines: int = DEFAULT_CONTEXT_LINES
    min_severity: Severity = Severity.INFO
    categories: frozenset[Category] | None = None  # None: every category
    max_inline: int = DEFAULT_MAX_INLINE
    limits: TextLimits = field(default_factory=TextLimits)
    rules: frozenset[str] = frozenset()  # the review's rule names: a finding may cite one


DEFAULT_OPTIONS = FindingsOptions()


@dataclass(frozen=True, slots=True)
class Selection:
    inline: list[Finding]
    summary_only: list[Finding]
    filtered: list[Finding]


@dataclass(frozen=True, slots=True)
class FindingsResult:
    findings: list[Finding]
    rejected: list[Rejected]
    duplicates: list[Finding]
    selection: Selection
    counts: dict[Severity, int]
    unknown_rules: int = 0  # findings that cited a rule the review did not have (kept, no rule)


# ---------------------------------------------------------------------------------------------
# Validation

FIRST_LINE = 1


def report_finding_parameters() -> dict[str, Any]:
    """The JSON schema of a ``report_finding`` call's arguments: what the model is shown, what
    :func:`validate_call` (and the model runner) hold a call to. Flat scalars (see
    ``reviewbot.prompts``); a new copy each call."""
    text = {"type": "string", "pattern": NON_BLANK_PATTERN}
    line = {"type": "integer", "minimum": FIRST_LINE}
    return {
        "type": "object",
        "properties": {
            "path": {**text, "description": "File path exactly as in the diff's path attribute."},
            "line": {**line, "description": "Line number as shown in the diff for that side."},
            "side": {
                "type": "string",
                "enum": [side.value for side in (Side.NEW, Side.OLD)],
                "description": "'old' only for removed (-) lines; else 'new'.",
            },
            "end_line": {
                **line,
                "description": "Last line of a multi-line problem (same side).",
            },
            "severity": {"type": "string", "enum": [s.value for s in Severity]},
            "category": {"type": "string", "enum": [c.value for c in Category]},
            "title": {**text, "description": "What is wrong, briefly."},
            "body": {**text, "description": "Why it matters and how to fix it."},
            "suggestion": {
                "type": "string",
                "description": "Replacement code for line..end_line, if certain.",
            },
            "rule": {
                "type": "string",
                "description": "Name of the review rule this finding applies, if any.",
            },
        },
        "required": ["path", "line", "severity", "category", "title", "body"],
    }


REPORT_FINDING_PARAMETERS = report_finding_parameters()


def validate_call(arguments: Mapping[str, Any], chunk_index: int) -> RawFinding | Rejected:
    """Check a ``report_finding`` call's arguments against :func:`report_finding_parameters`;
    unknown keys are ignored. ``Rejected.reason`` names every broken field
    (``"`line`: required integer, missing; `severity`: must be one of ..."``).

    Numbers must be JSON integers: a string of digits is refused, because the server's tool
    parser already converts by the schema and anything else is the model going off-format.
    """
    if not isinstance(arguments, Mapping):
        return Rejected("arguments are not an object", {"value": arguments}, chunk_index)
    reasons = check_arguments(arguments, REPORT_FINDING_PARAMETERS)
    if reasons:
        return Rejected("; ".join(reasons), dict(arguments), chunk_index)
    suggestion = arguments.get("suggestion")
    return RawFinding(
        path=arguments["path"],
        line=arguments["line"],
        side=Side(arguments.get("side") or Side.NEW.value),
        end_line=arguments.get("end_line"),
        severity=Severity(arguments["severity"]),
        category=Category(arguments["category"]),
        title=printable_text(arguments["title"]).strip(),
        body=printable_text(arguments["body"]).strip(),
        suggestion=printable_text(suggestion) if suggestion and suggestion.strip() else None,
        chunk_index=chunk_index,
        rule=_cited_rule(arguments.get("rule")),
    )


def _cited_rule(value: Any) -> str | None:
    """The rule a call cites, on one line (checked against the review's rules in process)."""
    return (" ".join(printable_text(value).split()) or None) if isinstance(value, str) else None


# ---------------------------------------------------------------------------------------------
# Anchoring


@dataclass(frozen=True, slots=True)
class _Anchored:
    kind: AnchorKind
    line: DiffLine | None
    end_line: int | None
    notes: tuple[str, ...]


def anchor(
    raw: RawFinding,
    files_in_chunk: Mapping[str, FileDiff],
    *,
    context_lines: int = DEFAULT_CONTEXT_LINES,
    limits: TextLimits | None = None,
    whole_files: Mapping[str, FileDiff] | None = None,
) -> Finding | Rejected:
    """Tie ``raw`` to a diff line GitLab accepts; never raises for a bad line.

    The exact (side, line) if the diff shows it; else the nearest changed line of the same hunk
    within ``context_lines`` ("reanchored"); else a file-level finding for the summary. A line
    given on the wrong side is not guessed: it is treated like any other line the diff lacks.

    ``whole_files``: the MR's complete file diffs by new path, when the chunk's files hold only
    some of their hunks (an incremental review): identical lines are told apart by counting
    them in the whole file, so a finding gets the fingerprint a full review would give it.
    """
    file = _file_for_path(raw.path, files_in_chunk)
    if file is None:
        return Rejected("path not in chunk", _raw_arguments(raw), raw.chunk_index)
    anchored = _anchor_line(raw, file, context_lines)
    suggestion, suggestion_note = _suggestion_for(raw, file, anchored, limits or TextLimits())
    notes = anchored.notes + ((suggestion_note,) if suggestion_note else ())
    whole = (whole_files or {}).get(file.new_path, file)
    return _build_finding(raw, file, whole, anchored, suggestion, notes, limits or TextLimits())


def _file_for_path(path: str, files: Mapping[str, FileDiff]) -> FileDiff | None:
    for file in files.values():
        if path in (file.new_path, file.old_path):
            return file
    return None


def _raw_arguments(raw: RawFinding) -> dict[str, Any]:
    return {name: getattr(raw, name) for name in RawFinding.__slots__}


def _anchor_line(raw: RawFinding, file: FileDiff, context_lines: int) -> _Anchored:
    exact = file.line_at(raw.side, raw.line)
    if exact is not None:
        end_line, end_note = _checked_end_line(raw, file, exact)
        return _Anchored(AnchorKind.EXACT, exact, end_line, (end_note,) if end_note else ())
    missing = f"reported on {raw.side} line {raw.line}, which is not part of the diff"
    dropped_end = (
        (f"end_line {raw.end_line} dropped with the reported line",)
        if raw.end_line is not None
        else ()
    )
    nearest = nearest_changed_line(file, raw.side, raw.line, max_distance=context_lines)
    if nearest is None:
        note = f"{missing}; no changed line within {context_lines} lines, kept for the summary"
        return _Anchored(AnchorKind.FILE, None, None, (note, *dropped_end))
    note = f"{missing}; moved to the nearest changed line ({nearest.side} line {nearest.number})"
    return _Anchored(AnchorKind.REANCHORED, nearest, None, (note, *dropped_end))


def _checked_end_line(raw: RawFinding, file: FileDiff, start: DiffLine) -> tuple[int | None, str]:
    """Keep ``end_line`` only if it closes a range of diff lines in the start line's hunk."""
    if raw.end_line is None or raw.end_line == raw.line:
        return None, ""
    if raw.end_line < raw.line:
        return None, f"end_line {raw.end_line} dropped: it is before line {raw.line}"
    hunk = _hunk_of(file, start)
    for number in range(raw.line + 1, raw.end_line + 1):
        line = file.line_at(raw.side, number)
        if line is None or _hunk_of(file, line) != hunk:
            return None, (
                f"end_line {raw.end_line} dropped: {raw.side} line {number} is not in the same "
                "hunk of the diff"
            )
    return raw.end_line, ""


def _hunk_of(file: FileDiff, line: DiffLine) -> int:
    for index, hunk in enumerate(file.hunks):
        if any(candidate is line for candidate in hunk.lines):
            return index
    raise LookupError("line is not part of this file's hunks")


def _range_lines(
    file: FileDiff, side: Side, first: DiffLine, end_line: int | None
) -> list[DiffLine]:
    if end_line is None:
        return [first]
    start = first.number_on(side)
    assert start is not None
    lines = [file.line_at(side, number) for number in range(start, end_line + 1)]
    return [line for line in lines if line is not None]


def _suggestion_for(
    raw: RawFinding, file: FileDiff, anchored: _Anchored, limits: TextLimits
) -> tuple[str | None, str]:
    """GitLab suggestions replace new lines, so keep one only over an exact range of added lines."""
    if raw.suggestion is None:
        return None, ""
    if anchored.kind is not AnchorKind.EXACT or anchored.line is None:
        return None, "suggestion dropped: it was written for another line"
    lines = _range_lines(file, raw.side, anchored.line, anchored.end_line)
    if any(line.kind is not LineKind.ADDED for line in lines):
        return None, "suggestion dropped: a suggestion can only replace added lines"
    problem = _unsafe_suggestion(raw.suggestion, limits.suggestion_chars)
    if problem:
        return None, f"suggestion dropped: {problem}"
    return raw.suggestion, ""


def _unsafe_suggestion(suggestion: str, max_chars: int) -> str:
    if len(suggestion) > max_chars:
        return f"longer than {max_chars} characters"
    if HTML_COMMENT_OPEN in suggestion:
        return "it contains an HTML comment opener"
    if any(QUICK_ACTION_LINE.match(line) for line in lines_of(suggestion)):
        return "a line would be read as a GitLab quick action"
    return ""


def _build_finding(
    raw: RawFinding,
    file: FileDiff,
    whole_file: FileDiff,
    anchored: _Anchored,
    suggestion: str | None,
    notes: tuple[str, ...],
    limits: TextLimits,
) -> Finding:
    line = anchored.line
    side, number, end_line = _addressed(raw, file, anchored)
    line_text = line.text if line else ""
    title, title_masked = mask_secrets(raw.title)
    body, body_masked = mask_secrets(raw.body)
    suggestion_masked = suggestion is not None and mask_secrets(suggestion)[1]
    if suggestion_masked:
        suggestion = None  # a committable change would only write the secret again
    return Finding(
        path=file.new_path,
        old_path=file.old_path,
        side=side,
        line=number,
        end_line=end_line,
        severity=raw.severity,
        category=raw.category,
        title=sanitize_title(title, max_chars=limits.title_chars),
        body=sanitize_markdown(body, max_chars=limits.body_chars),
        suggestion=suggestion,
        anchor=anchored.kind,
        anchor_note="; ".join(notes),
        line_text=line_text,
        fingerprint=fingerprint(
            file.new_path,
            line_text,
            raw.category,
            raw.title,
            occurrence_of(whole_file, side, number) if number is not None else 0,
        ),
        chunk_index=raw.chunk_index,
        reported_line=raw.line,
        reported_side=raw.side,
        rule=raw.rule,
        masked=title_masked or body_masked or suggestion_masked,
    )


def _addressed(
    raw: RawFinding, file: FileDiff, anchored: _Anchored
) -> tuple[Side, int | None, int | None]:
    """The side, line and end line a finding is addressed by.

    An unchanged (context) line is one line with a number on each side; it is always addressed
    on the new side (see ``DiffLine.side``), so one line has one address whichever side the
    model named: duplicates are recognised and re-runs compare like with like. A range on the
    old side keeps the old side unless its end is an unchanged line too.
    """
    line = anchored.line
    if line is None:
        return raw.side, None, None
    if anchored.kind is not AnchorKind.EXACT:
        return line.side, line.number, None
    if line.kind is not LineKind.CONTEXT or raw.side is Side.NEW:
        return raw.side, raw.line, anchored.end_line
    if anchored.end_line is None:
        return Side.NEW, line.new_no, None
    end = file.line_at(Side.OLD, anchored.end_line)
    if end is None or end.kind is not LineKind.CONTEXT:
        return raw.side, raw.line, anchored.end_line
    return Side.NEW, line.new_no, end.new_no


# ---------------------------------------------------------------------------------------------
# Fingerprints and duplicates

WHITESPACE_RUN = re.compile(r"\s+")
NON_WORD_RUN = re.compile(r"[\W_]+")
FINGERPRINT_SEPARATOR = "\x1f"
OCCURRENCE_PREFIX = "#"


def normalize_title(title: str) -> str:
    """Lowercase, punctuation and whitespace collapsed to one space; numbers kept."""
    return NON_WORD_RUN.sub(" ", title.lower()).strip()


def fingerprint(
    path: str, line_text: str, category: Category | str, title: str, occurrence: int = 0
) -> str:
    """Stable id of a finding that ignores line numbers, so it survives lines shifting.

    ``occurrence`` tells identical lines of one file apart: 0 for the first line of the diff
    with this text (on its side), 1 for the second... The first keeps the plain fingerprint,
    so markers posted before occurrences were counted still match.
    """
    parts = [
        path,
        _normalized_text(line_text),
        str(category),
        normalize_title(title),
    ]
    if occurrence:
        parts.append(f"{OCCURRENCE_PREFIX}{occurrence}")
    digest = hashlib.sha256(FINGERPRINT_SEPARATOR.join(parts).encode("utf-8")).hexdigest()
    return digest[:FINGERPRINT_HEX_CHARS]


def _normalized_text(text: str) -> str:
    return WHITESPACE_RUN.sub(" ", text).strip()


def occurrence_of(file: FileDiff, side: Side, number: int) -> int:
    """How many lines of ``file``'s diff on ``side`` before line ``number`` have its text."""
    target = file.line_at(side, number)
    if target is None:
        return 0
    text = _normalized_text(target.text)
    count = 0
    for line in file.lines():
        line_number = line.number_on(side)
        if line_number is None or line_number >= number:
            continue
        if _normalized_text(line.text) == text:
            count += 1
    return count


def _preference(finding: Finding) -> tuple[int, int]:
    return finding.severity.rank, -len(finding.body)


def _order(finding: Finding) -> tuple[str, int]:
    return finding.path, finding.line or 0


def _same_spot(a: Finding, b: Finding) -> bool:
    return (a.path, a.side, a.line, a.category) == (b.path, b.side, b.line, b.category)


def _near_identical(a: str, b: str) -> bool:
    left, right = normalize_title(a), normalize_title(b)
    ratio = difflib.SequenceMatcher(None, left, right).ratio()
    return left == right or ratio >= NEAR_IDENTICAL_TITLE_RATIO


def dedupe(findings: Iterable[Finding]) -> tuple[list[Finding], list[Finding]]:
    """Split into (kept, duplicates), both ordered by path then line.

    Same fingerprint, or the same spot and category with a near-identical title, is one
    finding: the most severe is kept (then the one with the longest body).
    """
    ranked = sorted(enumerate(findings), key=lambda item: (_preference(item[1]), item[0]))
    kept: list[tuple[int, Finding]] = []
    duplicates: list[tuple[int, Finding]] = []
    for index, finding in ranked:
        is_duplicate = any(
            finding.fingerprint == other.fingerprint
            or (_same_spot(finding, other) and _near_identical(finding.title, other.title))
            for _, other in kept
        )
        (duplicates if is_duplicate else kept).append((index, finding))
    return _in_order(kept), _in_order(duplicates)


def _in_order(items: list[tuple[int, Finding]]) -> list[Finding]:
    return [finding for _, finding in sorted(items, key=lambda item: (_order(item[1]), item[0]))]


# ---------------------------------------------------------------------------------------------
# Selection


def select(
    findings: Sequence[Finding],
    *,
    min_severity: Severity = Severity.INFO,
    categories: Collection[Category] | None = None,
    max_inline: int = DEFAULT_MAX_INLINE,
) -> Selection:
    """Decide what is posted inline, what only in the summary, and what is filtered out."""
    filtered: list[Finding] = []
    candidates: list[Finding] = []
    for finding in findings:
        wanted = finding.severity.rank <= min_severity.rank and (
            categories is None or finding.category in categories
        )
        (candidates if wanted else filtered).append(finding)
    inline_ids = {
        id(finding)
        for finding in sorted(
            (f for f in candidates if not f.is_file_level), key=lambda f: f.severity.rank
        )[: max(max_inline, 0)]
    }
    inline = [finding for finding in candidates if id(finding) in inline_ids]
    summary_only = [finding for finding in candidates if id(finding) not in inline_ids]
    return Selection(inline, summary_only, filtered)


# ---------------------------------------------------------------------------------------------
# The whole step


def process(
    calls: Iterable[tuple[int, Mapping[str, Any]]],
    files: Mapping[int, Mapping[str, FileDiff]],
    options: FindingsOptions = DEFAULT_OPTIONS,
    whole_files: Mapping[str, FileDiff] | None = None,
) -> FindingsResult:
    """Validate, anchor, dedupe and select every ``(chunk_index, arguments)`` call.

    ``files`` maps a chunk index to the files of that chunk (keyed by path); ``whole_files``:
    see :func:`anchor`.
    """
    anchored: list[Finding] = []
    rejected: list[Rejected] = []
    for chunk_index, arguments in calls:
        result = _process_one(chunk_index, arguments, files, options, whole_files)
        (anchored if isinstance(result, Finding) else rejected).append(result)
    # a rule the review does not have is not kept (counted in unknown_rules)
    unknown = {id(f) for f in anchored if f.rule is not None and f.rule not in options.rules}
    known = [dataclasses.replace(f, rule=None) if id(f) in unknown else f for f in anchored]
    return _kept_and_selected(known, rejected, [], options, len(unknown))


def without(
    result: FindingsResult, dropped: Sequence[Finding], options: FindingsOptions = DEFAULT_OPTIONS
) -> FindingsResult:
    """``result`` without ``dropped`` (a team learning suppressed them), selected again: the
    room they took inline goes to the next findings, the counts leave them out."""
    if not dropped:
        return result
    gone = {id(finding) for finding in dropped}
    kept = [finding for finding in result.findings if id(finding) not in gone]
    return _kept_and_selected(
        kept, result.rejected, result.duplicates, options, result.unknown_rules
    )


def with_carried(
    result: FindingsResult,
    carried: Sequence[Finding],
    options: FindingsOptions = DEFAULT_OPTIONS,
) -> FindingsResult:
    """``result`` plus findings carried over from a review of an earlier version (their hunks
    are unchanged), deduped and selected together as one review's findings."""
    if not carried:
        return result
    return _kept_and_selected(
        [*result.findings, *carried],
        result.rejected,
        result.duplicates,
        options,
        result.unknown_rules,
    )


def reselected(
    result: FindingsResult, kept: Sequence[Finding], options: FindingsOptions = DEFAULT_OPTIONS
) -> FindingsResult:
    """``result`` with only ``kept`` of its findings (the verification pass dropped the
    others), selected again so the inline limit and the counts hold for what is posted."""
    return _kept_and_selected(
        kept, result.rejected, result.duplicates, options, result.unknown_rules
    )


def _kept_and_selected(
    findings: Sequence[Finding],
    rejected: list[Rejected],
    earlier_duplicates: list[Finding],
    options: FindingsOptions,
    unknown_rules: int = 0,
) -> FindingsResult:
    kept, duplicates = dedupe(findings)
    selection = select(
        kept,
        min_severity=options.min_severity,
        categories=options.categories,
        max_inline=options.max_inline,
    )
    counts = Counter(finding.severity for finding in kept)
    return FindingsResult(
        findings=kept,
        rejected=rejected,
        duplicates=[*earlier_duplicates, *duplicates],
        selection=selection,
        counts={severity: counts.get(severity, 0) for severity in Severity},
        unknown_rules=unknown_rules,
    )


def _process_one(
    chunk_index: int,
    arguments: Mapping[str, Any],
    files: Mapping[int, Mapping[str, FileDiff]],
    options: FindingsOptions,
    whole_files: Mapping[str, FileDiff] | None,
) -> Finding | Rejected:
    raw = validate_call(arguments, chunk_index)
    if isinstance(raw, Rejected):
        return raw
    files_in_chunk = files.get(chunk_index)
    if files_in_chunk is None:
        return Rejected(f"unknown chunk {chunk_index}", dict(arguments), chunk_index)
    return anchor(
        raw,
        files_in_chunk,
        context_lines=options.context_lines,
        limits=options.limits,
        whole_files=whole_files,
    )
