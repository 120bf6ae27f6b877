"""The Markdown reviewbot posts on GitLab: finding comments, the summary note, hidden markers.

Pure: data in, Markdown out. Every comment ends with a hidden HTML-comment marker, the
idempotency key that lets a re-run recognise what it already posted:

* a finding: ``<!-- reviewbot:finding fp=<fingerprint> path=<url-quoted path>
  line=<side>:<n> text=<12 hex of sha1(whitespace-normalised line text)> -->``;
* the summary note: ``<!-- reviewbot:summary -->``.

Model text never contains ``<!--`` (``markdown.sanitize_markdown`` escapes it), so only our own
markers can match; :func:`parse_marker` still reads only the LAST marker of a body.

Owns: the text of every finding comment and of the summary note, and the hidden markers (written and
read back). Must not: post anything, or escape text by a rule of its own (every escaping rule is
`reviewbot.markdown`'s).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import quote, unquote

from reviewbot.chunking import Coverage
from reviewbot.diff import Side
from reviewbot.findings import AnchorKind, Finding, Severity
from reviewbot.markdown import code_span_text, markdown_cell, suggestion_block, table_cell
from reviewbot.marked_block import with_block
from reviewbot.suggestions import block_range
from reviewbot.walkthrough import Walkthrough

__all__ = [
    "IncrementalNote",
    "LatencyStats",
    "Marker",
    "MarkerKind",
    "SummaryData",
    "TokenUsage",
    "UnplacedFinding",
    "UnplacedReason",
    "Withheld",
    "finding_body",
    "finding_marker",
    "line_text_hash",
    "parse_marker",
    "summary_body",
    "summary_marker",
]

MARKER_PREFIX = "reviewbot:"
SHORT_SHA_CHARS = 8
TEXT_HASH_HEX_CHARS = 12
WHITESPACE_RUN = re.compile(r"\s+")
MARKER_PATTERN = re.compile(r"<!-- reviewbot:(finding|summary)((?: [a-z]+=\S*)*) -->")
MARKER_FIELD = re.compile(r"([a-z]+)=(\S*)")
FILE_LEVEL_LINE = 0  # the marker's line number for a finding without a line
# Lists longer than this go into a collapsible <details> block.
DETAILS_THRESHOLD = 5
MILLISECONDS_PER_SECOND = 1000
WITHHELD_TEXT_CHARS = 40  # a learning's text, as the summary names it

SEVERITY_BADGES: Mapping[Severity, str] = {
    Severity.BLOCKER: "🛑 **Blocker**",
    Severity.CRITICAL: "🔴 **Critical**",
    Severity.MAJOR: "🟠 **Major**",
    Severity.MINOR: "🟡 **Minor**",
    Severity.INFO: "🔵 **Info**",
}


class MarkerKind(StrEnum):
    FINDING = "finding"
    SUMMARY = "summary"


@dataclass(frozen=True, slots=True)
class Marker:
    """What a hidden marker says. Finding fields are empty for the summary marker."""

    kind: MarkerKind
    fingerprint: str = ""
    path: str = ""
    side: Side = Side.NEW
    line: int = FILE_LEVEL_LINE
    text_hash: str = ""


# ---------------------------------------------------------------------------------------------
# Markers


def line_text_hash(text: str) -> str:
    """12 hex chars of sha1 of the line text with whitespace runs collapsed and ends stripped."""
    normalised = WHITESPACE_RUN.sub(" ", text).strip()
    return hashlib.sha1(normalised.encode("utf-8")).hexdigest()[:TEXT_HASH_HEX_CHARS]


def finding_marker(finding: Finding) -> str:
    line = finding.line if finding.line is not None else FILE_LEVEL_LINE
    return (
        f"<!-- {MARKER_PREFIX}{MarkerKind.FINDING} fp={finding.fingerprint} "
        f"path={quote(finding.path, safe='/')} line={finding.side}:{line} "
        f"text={line_text_hash(finding.line_text)} -->"
    )


def summary_marker() -> str:
    return f"<!-- {MARKER_PREFIX}{MarkerKind.SUMMARY} -->"


def parse_marker(body: str) -> Marker | None:
    """The last reviewbot marker in ``body``, or None (also for a malformed finding marker)."""
    matches = MARKER_PATTERN.findall(body or "")
    if not matches:
        return None
    kind, raw_fields = matches[-1]
    if kind == MarkerKind.SUMMARY:
        return Marker(MarkerKind.SUMMARY)
    fields = dict(MARKER_FIELD.findall(raw_fields))
    side, _, number = fields.get("line", "").partition(":")
    if side not in {s.value for s in Side} or not number.isdigit() or not fields.get("fp"):
        return None
    return Marker(
        kind=MarkerKind.FINDING,
        fingerprint=fields["fp"],
        path=unquote(fields.get("path", "")),
        side=Side(side),
        line=int(number),
        text_hash=fields.get("text", ""),
    )


# ---------------------------------------------------------------------------------------------
# Finding comments


def finding_body(finding: Finding) -> str:
    """The inline comment: badge, category and title, body, anchor note, suggestion, marker."""
    parts = [
        f"{SEVERITY_BADGES[finding.severity]} · `{finding.category}` · **{finding.title}**",
        finding.body,
    ]
    if finding.anchor is AnchorKind.REANCHORED and finding.line is not None:
        parts.append(
            f"_Placed on the nearest changed line: the model pointed at "
            f"{finding.reported_side} line {finding.reported_line}, which is not in the diff._"
        )
    if finding.analyzers:
        parts.append(_sources_line(finding))
    if finding.votes is not None and finding.passes:
        parts.append(f"_Confidence: reported by {finding.votes} of {finding.passes} passes._")
    if finding.suggestion is not None and finding.line is not None:
        above, below = block_range(finding.line, finding.end_line)
        parts.append(suggestion_block(finding.suggestion, lines_above=above, lines_below=below))
    parts.append(finding_marker(finding))
    return "\n\n".join(part for part in parts if part)


def _sources_line(finding: Finding) -> str:
    """Who reported it: each analyzer's tool and rule, and the model where it agreed."""
    named = ", ".join(f"`{code_span_text(name)}`" for name in finding.analyzers)
    if finding.source == "both":
        return f"_Reported by the model and by {named}._"
    return f"_Reported by {named}._"


# ---------------------------------------------------------------------------------------------
# Summary note


class UnplacedReason(StrEnum):
    FILE_LEVEL = "file-level"
    REFUSED = "refused by GitLab"
    OVER_CAP = "over the inline cap"


@dataclass(frozen=True, slots=True)
class UnplacedFinding:
    """A finding listed only in the summary; ``link``, when given, points at its diff line."""

    finding: Finding
    reason: UnplacedReason
    link: str | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TokenUsage:
    prompt: int = 0
    completion: int = 0
    cached: int = 0


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """First-token latency percentiles in seconds (None when nothing was measured)."""

    p50_s: float | None = None
    p95_s: float | None = None


@dataclass(frozen=True, slots=True)
class IncrementalNote:
    """An incremental review: what was reviewed this time, and what was kept from before."""

    since_head: str
    compare_url: str | None  # the changes since that head, on GitLab
    files_reviewed_now: int
    files_unchanged: int
    findings_kept: int
    # changed files sent to the model whose answer could not be used (none of their lines
    # reviewed): a change was there, so never "no change to the patch"
    files_not_reviewed: int = 0


@dataclass(frozen=True, slots=True)
class Withheld:
    """The findings of this review a team learning withheld (never posted)."""

    learning_id: int
    text: str  # the learning's text (the team's words: shown cut, in a code span)
    findings: int


@dataclass(frozen=True)
class SummaryData:
    head_sha: str
    model: str
    prompt_version: str
    mr_web_url: str
    counts: Mapping[Severity, int]
    inline_count: int
    coverage: Coverage
    chunks: int
    tokens: TokenUsage = field(default_factory=TokenUsage)
    total_time_s: float = 0.0
    first_token: LatencyStats = field(default_factory=LatencyStats)
    invalid_model_calls: int = 0
    model_tool_calls: int = 0  # calls the model's answers held, readable or not
    repaired_model_calls: int = 0  # unreadable calls the model resent readably when told why
    unplaced: Sequence[UnplacedFinding] = ()
    deleted_by_reviewers: int = 0  # found again, but its comment had been deleted
    history_lost: bool = False  # the MR held none of the comments recorded: posted again
    incremental: IncrementalNote | None = None
    # one line per chunk the model never answered readably: where, and why
    unreviewed: Sequence[str] = ()
    errors: Sequence[str] = ()  # warnings (a checkout not used, a repository config ignored)
    ci_job_url: str | None = None
    tools: str = ""  # the model's repository tools in words ("" : not shown)
    effort: str = ""  # the review effort, its passes, why, and the vote ("": not shown)
    verification: str = ""  # the verification pass's counts ("": off, not shown)
    withheld: Sequence[Withheld] = ()  # per learning, the findings it kept off the MR
    masked: int = 0  # findings whose text held what looked like a secret, masked before posting
    unknown_rules: int = 0  # findings that named a rule the review does not have (name dropped)
    missing_context: Sequence[str] = ()  # context the review meant to show and could not read
    # the named checks: (name, outcome, reason) each, and the commit status they made
    checks: Sequence[tuple[str, str, str]] = ()
    check_status: str = ""
    suggestions_checked: int = 0  # suggestions applied to the head file before posting
    suggestions_dropped: Mapping[str, int] = field(default_factory=dict)  # by reason
    analyzers: Sequence[str] = ()  # problems and per-tool counts (reviewbot.analyzer_summary)
    walkthrough: Walkthrough | None = None  # the MR's walkthrough (None: not asked for)
    requirements: Sequence[str] = ()  # the requirements check, a line per linked issue


def summary_body(summary: SummaryData) -> str:
    """The one summary note of a review, ending with the summary marker."""
    sections = [
        _summary_heading(summary),
        _walkthrough_section(summary.walkthrough),
        _requirements_section(summary.requirements),
        _counts_table(summary),
        _checks_section(summary.checks, summary.check_status),
        _coverage_section(summary.coverage),
        _unplaced_section(summary),
        _unreviewed_section(summary.unreviewed),
        _errors_section(summary.errors),
        _analyzers_section(summary.analyzers),
        _run_table(summary),
        summary_marker(),
    ]
    return "\n\n".join(section for section in sections if section)


def _walkthrough_section(walkthrough: Walkthrough | None) -> str:
    """The walkthrough (already sanitised, reviewbot.walkthrough), or why there is none."""
    if walkthrough is None:
        return ""
    if walkthrough.text and not walkthrough.elsewhere:
        # between hidden markers: the next incremental review reads it back (docs/walkthrough.md)
        return f"**Walkthrough**\n\n{with_block('', walkthrough.text)}"
    return f"_{walkthrough.summary_line()}_"


def _requirements_section(lines: Sequence[str]) -> str:
    """The requirements check's lines (already safe, reviewbot.requirements)."""
    if not lines:
        return ""
    listed = "\n".join(f"- {line}" for line in lines)
    return f"**Linked issues' requirements** (the model's judgement)\n\n{listed}"


def _summary_heading(summary: SummaryData) -> str:
    total = sum(summary.counts.values())
    deleted = (
        f" {summary.deleted_by_reviewers} not posted again: its comment had been deleted."
        if summary.deleted_by_reviewers
        else ""
    )
    if summary.history_lost:
        deleted += (
            " This merge request held none of reviewbot's earlier comments (restored from a"
            " backup?): they are posted again."
        )
    heading = (
        f"### reviewbot review of `{summary.head_sha[:12]}`\n\n"
        f"{total} finding(s), {summary.inline_count} posted inline.{deleted}"
        f"{_withheld_text(summary.withheld)}{_masked_text(summary.masked)}"
    )
    if summary.incremental is not None:
        heading += "\n\n" + _incremental_line(summary.incremental)
    if not summary.unreviewed:
        return heading
    coverage = summary.coverage
    missing = coverage.changed_lines_total - coverage.changed_lines_covered
    return (
        f"{heading}\n\n⚠️ **Incomplete review:** {len(summary.unreviewed)} part(s) of this merge "
        f"request ({missing} changed lines) could not be reviewed; the findings cover "
        f"{coverage.changed_lines_covered} of {coverage.changed_lines_total} changed lines."
    )


def _masked_text(masked: int) -> str:
    """`` 1 finding quoted what looked like a secret …``: its text on the MR is not the model's."""
    if not masked:
        return ""
    return (
        f" {masked} finding(s) quoted what looked like a secret (a token or a key): masked as"
        " `***` before posting (a suggestion holding one is left out); check the code it names."
    )


def _withheld_text(withheld: Sequence[Withheld]) -> str:
    """`` 2 more withheld by team learnings …``: so a review whose findings a learning kept
    off the MR never reads as clean."""
    if not withheld:
        return ""
    each = ", ".join(
        f"learning {item.learning_id} (`{code_span_text(_cut(item.text))}`): {item.findings}"
        for item in withheld
    )
    total = sum(item.findings for item in withheld)
    return (
        f" **{total} more withheld by team learnings** (not posted): {each}. "
        "`reviewbot learnings list` shows them; `reviewbot learnings remove ID` lifts one."
    )


def _cut(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= WITHHELD_TEXT_CHARS:
        return one_line
    return one_line[: WITHHELD_TEXT_CHARS - 1] + "…"


def _counts_table(summary: SummaryData) -> str:
    header = "| " + " | ".join(SEVERITY_BADGES[s] for s in Severity) + " |"
    rule = "|" + "---|" * len(Severity)
    row = "| " + " | ".join(str(summary.counts.get(s, 0)) for s in Severity) + " |"
    return "\n".join((header, rule, row))


def _coverage_section(coverage: Coverage) -> str:
    lines = [
        f"**Coverage:** {coverage.files_reviewed}/{coverage.files_total} files, "
        f"{coverage.changed_lines_covered}/{coverage.changed_lines_total} changed lines."
    ]
    if coverage.skipped:
        rows = [
            f"| `{code_span_text(s.path)}` | {table_cell(s.reason)} | {s.changed_lines} |"
            for s in coverage.skipped
        ]
        table = "\n".join(["| File | Skipped because | Changed lines |", "|---|---|---|", *rows])
        lines.append(_collapsible(f"Skipped files ({len(rows)})", table, len(rows)))
    return "\n\n".join(lines)


def _unplaced_section(summary: SummaryData) -> str:
    if not summary.unplaced:
        return ""
    rows = [_unplaced_row(item) for item in summary.unplaced]
    table = "\n".join(["| Severity | Where | Finding | Not inline because |", "|---|---|---|---|"])
    table += "\n" + "\n".join(rows)
    title = f"Findings not placed inline ({len(rows)})"
    return _collapsible(title, table, len(rows))


def _unplaced_row(item: UnplacedFinding) -> str:
    finding = item.finding
    where = f"`{code_span_text(finding.path)}`"
    if finding.line is not None:
        where = f"{where}:{finding.line}"
        if item.link:
            where = f"[{where}]({item.link})"
    reason = item.reason.value + (f": {table_cell(item.detail)}" if item.detail else "")
    return (
        f"| {SEVERITY_BADGES[finding.severity]} | {where} | "
        f"**{markdown_cell(finding.title)}** (`{finding.category}`) | {reason} |"
    )


def _incremental_line(note: IncrementalNote) -> str:
    since = f"`{code_span_text(note.since_head[:SHORT_SHA_CHARS])}`"
    if note.compare_url:
        since = f"{since} ([changes since]({note.compare_url}))"
    kept = f"{note.findings_kept} finding(s) kept"
    if note.files_reviewed_now == 0 and note.files_not_reviewed == 0:
        return (
            f"No change to the patch since {since} was reviewed: no model call, {kept}. "
            "Comment `/reviewbot review --full` to review it all again."
        )
    if note.files_not_reviewed:
        changed = note.files_reviewed_now + note.files_not_reviewed
        return (
            f"Incremental review: {changed} file(s) changed since {since}: "
            f"{note.files_reviewed_now} reviewed, {note.files_not_reviewed} not reviewed (see "
            f"below); {note.files_unchanged} unchanged: {kept}. Comment "
            "`/reviewbot review --full` for a full review."
        )
    return (
        f"Incremental review: {note.files_reviewed_now} file(s) changed since {since}: "
        f"reviewed; {note.files_unchanged} unchanged: {kept}. Comment "
        "`/reviewbot review --full` for a full review."
    )


def _checks_section(checks: Sequence[tuple[str, str, str]], status: str) -> str:
    """The named checks as a table: name, outcome, reason (none: no section)."""
    if not checks:
        return ""
    shown = {"pass": "✅ pass", "fail": "❌ fail", "cannot_tell": "❔ cannot tell"}
    rows = "\n".join(
        f"| {table_cell(name)} | {shown.get(outcome, table_cell(outcome))} | {table_cell(reason)} |"
        for name, outcome, reason in checks
    )
    verdict = f"\n\nCommit status: {table_cell(status)}" if status else ""
    return f"**Checks**\n\n| check | outcome | why |\n|---|---|---|\n{rows}{verdict}"


def _unreviewed_section(unreviewed: Sequence[str]) -> str:
    if not unreviewed:
        return ""
    items = "\n".join(f"- {table_cell(part)}" for part in unreviewed)
    return _collapsible(f"⚠️ Not reviewed ({len(unreviewed)})", items, len(unreviewed))


def _analyzers_section(lines: Sequence[str]) -> str:
    if not lines:
        return ""
    return "**Analyzers**\n\n" + "\n".join(f"- {table_cell(line)}" for line in lines)


def _errors_section(errors: Sequence[str]) -> str:
    if not errors:
        return ""
    items = "\n".join(f"- {table_cell(error)}" for error in errors)
    return _collapsible(f"⚠️ Warnings ({len(errors)})", items, len(errors))


def _run_table(summary: SummaryData) -> str:
    tokens = summary.tokens
    rows = [
        ("Model", f"`{code_span_text(summary.model)}`"),
        ("Prompt version", f"`{code_span_text(summary.prompt_version)}`"),
        ("Chunks", str(summary.chunks)),
        (
            "Tokens (prompt / completion / cached)",
            f"{tokens.prompt} / {tokens.completion} / {tokens.cached}",
        ),
        ("Total time", f"{summary.total_time_s:.1f} s"),
        (
            "First token p50 / p95",
            f"{_ms(summary.first_token.p50_s)} / {_ms(summary.first_token.p95_s)}",
        ),
        ("Invalid model calls", _invalid_calls(summary)),
    ]
    if summary.effort:
        rows.append(("Effort", summary.effort))
    if summary.tools:
        rows.append(("Repository tools", summary.tools))
    if summary.verification:
        rows.append(("Verification", summary.verification))
    if summary.unknown_rules:
        rows.append(
            (
                "Unknown rule names",
                f"{summary.unknown_rules} finding(s) named a rule this review does not have: "
                "kept, without the name",
            )
        )
    if summary.missing_context:
        rows.append(
            ("Context not read", table_cell("; ".join(summary.missing_context)) + " (see warnings)")
        )
    if summary.suggestions_checked:
        rows.append(("Suggestions", _suggestions_cell(summary)))
    if summary.ci_job_url:
        rows.append(("CI job", f"[log]({summary.ci_job_url})"))
    table = "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])
    return _collapsible("Run details", table, DETAILS_THRESHOLD + 1)


def _suggestions_cell(summary: SummaryData) -> str:
    """``3 checked, 2 kept, 1 dropped (does not parse: 1)``: the suggestions applied to the
    head file before posting (docs/suggestions.md); a dropped one's finding is still posted."""
    dropped = summary.suggestions_dropped
    total = sum(dropped.values())
    cell = f"{summary.suggestions_checked} checked, {summary.suggestions_checked - total} kept"
    if total:
        reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(dropped.items()))
        cell += f", {total} dropped ({reasons}; their findings are kept)"
    return table_cell(cell)


def _invalid_calls(summary: SummaryData) -> str:
    """``2 of 9 (1 resent readably)``: the model's unreadable tool calls."""
    if not summary.model_tool_calls:
        return str(summary.invalid_model_calls)
    text = f"{summary.invalid_model_calls} of {summary.model_tool_calls}"
    if summary.repaired_model_calls:
        text += f" ({summary.repaired_model_calls} resent readably)"
    return text


def _collapsible(title: str, content: str, size: int) -> str:
    if size <= DETAILS_THRESHOLD:
        return f"**{title}**\n\n{content}"
    return f"<details><summary>{title}</summary>\n\n{content}\n\n</details>"


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * MILLISECONDS_PER_SECOND:.0f} ms"
