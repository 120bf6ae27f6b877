"""How the review commands show their results: rich tables and text for people, dicts for
``--json`` (plan, review, run, reviews, jobs, eval).

Owns: the layout of every table and summary line of those commands. Takes the library's
results as they are and returns nothing but what it prints (or the dict it builds). Every
string from the data is printed as `terminal.data` (rich Text, never markup), the commands' own
styles as Text with a style.

Must not: compute figures the library does not give, read the database or the network, or
exit (the commands decide exit codes).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reviewbot.chunking import ContextKind, Plan
from reviewbot.commands.terminal import cell, data, terminal_text

if TYPE_CHECKING:
    from reviewbot.review import ModelContext, RulesApplied

__all__ = [
    "add_row",
    "call_json",
    "print_coverage",
    "print_eval",
    "print_findings",
    "print_job",
    "print_jobs",
    "print_plan",
    "print_review_record",
    "print_reviews",
    "print_run",
    "review_json",
    "run_json",
]

DIGEST_FIELD = "diff_digest"  # the incremental review's fingerprint of the diff, summarised
BLANKS = re.compile(r"[ \t]+")  # runs of spaces and tabs, one space each in a list's cell
CALL_COLUMNS = (
    ("chunk", "chunk_index"),
    ("mode", "mode"),
    ("outcome", "outcome"),
    ("prompt", "prompt_tokens"),
    ("cached", "cached_tokens"),
    ("completion", "completion_tokens"),
    ("TTFT ms", "ttft_ms"),
    ("latency ms", "latency_ms"),
    ("slot wait ms", "slot_wait_ms"),
    ("retries", "retries"),
    ("calls", "tool_calls"),
    ("invalid", "invalid_tool_calls"),
    ("repaired", "repaired_tool_calls"),
    ("round", "tool_round"),
    ("repo calls", "repo_tool_calls"),
    ("tool tokens", "tool_answer_tokens"),
)


def add_row(table: Table, *cells: object) -> None:
    """One row of data: every cell as `terminal.cell`."""
    table.add_row(*(cell(value) for value in cells))


# --- plan ------------------------------------------------------------------------------------


def print_plan(
    result: Plan,
    console: Console,
    rules: RulesApplied | None = None,
    model_context: ModelContext | None = None,
) -> None:
    budget = result.budget
    if model_context is not None:
        console.print(
            data(f"Model context: {model_context.max_model_len} tokens, {model_context.source}")
        )
    console.print(
        data(
            f"Budget: {budget.available} tokens per chunk = context {budget.max_model_len} "
            f"- output {budget.output_reserve} - prompt {budget.overhead} - margin "
            f"{budget.margin} ({result.counter})"
        )
    )
    table = Table("chunk", "tokens", "context tokens", "changed lines", "files")
    for chunk in result.chunks:
        names = ", ".join(
            s.path
            + (f" [{s.view.part}/{s.view.parts}]" if s.view.parts > 1 else "")
            + (" (whole)" if s.context is ContextKind.WHOLE else "")
            for s in chunk.segments
        )
        add_row(
            table,
            chunk.index + 1,
            chunk.tokens,
            chunk.context_tokens,
            chunk.changed_lines,
            names,
        )
    console.print(table)
    totals = result.totals()
    console.print(
        data(
            f"Context: {totals['context_tokens']} of {totals['tokens']} tokens "
            f"({totals['whole_files']} whole files, {totals['scoped_hunks']} hunks with their "
            "enclosing scope)"
        )
    )
    if rules is not None:
        print_rules(rules, console)
    print_coverage(result, console)


def print_rules(rules: RulesApplied, console: Console) -> None:
    """The review rules: each with its source and the chunks it is given to; what did not fit
    and every problem met reading them."""
    if not rules.rule_set.rules and not rules.rule_set.problems:
        console.print(data("Review rules: none"))
        return
    given: dict[str, list[str]] = {}
    for index, names in sorted(rules.applied.items()):
        for name in names:
            given.setdefault(name, []).append(str(index + 1))
    console.print(
        data(f"Review rules: {len(rules.rule_set.rules)}, {rules.reserve} tokens kept per chunk")
    )
    table = Table("rule", "source", "paths", "chunks")
    for rule in rules.rule_set.rules:
        add_row(
            table,
            rule.name,
            f"{rule.source.value} ({rule.origin})",
            ", ".join(rule.paths) or "every file",
            ", ".join(given.get(rule.name, [])) or "none",
        )
    console.print(table)
    for note in rules.notes():
        console.print(data(f"not given: {note}"))
    for problem in rules.rule_set.problems:
        console.print(data(f"problem: {problem}"))


def print_coverage(result: Plan, console: Console) -> None:
    coverage = result.coverage
    console.print(
        data(
            f"Coverage: {coverage.changed_lines_covered}/{coverage.changed_lines_total} changed "
            f"lines in {coverage.files_reviewed}/{coverage.files_total} files, "
            f"{len(result.chunks)} chunks"
        )
    )
    for skipped in coverage.skipped:
        console.print(
            data(f"  skipped {skipped.path}: {skipped.reason} ({skipped.changed_lines} lines)")
        )


# --- review and run --------------------------------------------------------------------------


def review_json(result: Any) -> dict[str, Any]:
    """A `reviewbot.review.ReviewResult` for ``--json``."""
    return {
        "model": result.model,
        "prompt_version": result.prompt_version,
        "findings": [
            {
                "path": f.path,
                "side": f.side.value,
                "line": f.line,
                "end_line": f.end_line,
                "severity": f.severity.value,
                "category": f.category.value,
                "title": f.title,
                "body": f.body,
                "suggestion": f.suggestion,
                "anchor": f.anchor.value,
                "anchor_note": f.anchor_note,
                "fingerprint": f.fingerprint,
                "rule": f.rule,
            }
            for f in result.findings.findings
        ],
        "rules": {**result.rules.to_dict(), "unknown_cited": result.findings.unknown_rules},
        "filtered": len(result.findings.selection.filtered),
        "rejected": [r.reason for r in result.findings.rejected],
        "invalid_calls": result.invalid_calls,
        "chunk_errors": {str(k): v for k, v in result.chunk_errors.items()},
        "unreviewed": [part.describe() for part in result.unreviewed],
        "coverage": result.coverage.to_dict(),
        "calls": [call_json(c) for c in result.calls],
        "plan": result.plan.to_dict(),
        "seconds": round(result.seconds, 3),
    }


def call_json(call: Any) -> dict[str, Any]:
    data = dict(call.__dict__)
    data["started_at"] = call.started_at.isoformat()
    return data


def print_findings(result: Any, console: Console) -> None:
    shown = [f for f in result.findings.findings if f not in result.findings.selection.filtered]
    by_path: dict[str, list[Any]] = {}
    for finding in shown:
        by_path.setdefault(finding.path, []).append(finding)
    for path, items in by_path.items():
        console.print(data(path, "bold"))
        for f in items:
            where = f"{f.side.value} line {f.line}" if f.line is not None else "file"
            console.print(data(f"  {where}: [{f.severity.value}] {f.category.value}: {f.title}"))
            console.print(data(f"    {f.body}"))
            if f.anchor_note:
                console.print(data(f"    ({f.anchor_note})"))
    p50 = result.ttft_percentile(0.5)
    console.print(
        data(
            f"{len(shown)} findings ({len(result.findings.selection.filtered)} below threshold, "
            f"{len(result.findings.rejected)} rejected, {len(result.invalid_calls)} invalid "
            f"calls) | {len(result.plan.chunks)} chunks | {result.prompt_tokens} prompt + "
            f"{result.completion_tokens} completion tokens ({result.cached_tokens} cached) | "
            f"{result.seconds:.1f} s | first token p50 "
            + (f"{p50:.0f} ms" if p50 is not None else "n/a")
        )
    )


def run_json(report: Any) -> dict[str, Any]:
    """A `reviewbot.mr.RunReport` for ``--json``."""
    data = review_json(report.review)
    data.update(
        {
            "project": report.project_path,
            "mr_iid": report.iid,
            "head_sha": report.head_sha,
            "review_id": report.review_id,
            "dry_run": report.dry_run,
            "posted": [f.fingerprint for f in report.posted],
            "already_posted": [f.fingerprint for f in report.already_posted],
            "refused": [{"fingerprint": f.fingerprint, "reason": r} for f, r in report.refused],
            "summary_only": [f.fingerprint for f in report.summary_only],
            "resolved_threads": report.resolved_threads,
            "summary_note_id": report.summary_note_id,
            "withheld": [
                {"learning_id": item.learning_id, "findings": item.findings}
                for item in report.withheld
            ],
            "incremental": (
                None
                if report.review.carried is None
                else {
                    "since_head": report.review.carried.since_head,
                    "since_review_id": report.review.carried.review_id,
                    "files_unchanged": report.review.carried.files,
                    "changed_lines_unchanged": report.review.carried.lines,
                    "findings_kept": report.review.carried.findings,
                }
            ),
            "checks": {
                "verdicts": [verdict.to_dict() for verdict in report.checks.verdicts],
                "commit_status": (
                    None
                    if report.checks.final is None
                    else {
                        "name": report.checks.name,
                        "state": report.checks.final.state.value,
                        "description": report.checks.final.description,
                        "posted": report.checks.posts,
                    }
                ),
            },
        }
    )
    if report.dry_run:
        data["summary_markdown"] = report.summary_markdown
    return data


def print_run(report: Any, console: Console) -> None:
    if report.dry_run:
        console.print(Text.assemble(("Dry run: nothing was posted.", "bold"), " Would post:"))
        print_findings(report.review, console)
        console.rule("summary note")
        console.print(data(report.summary_markdown))
        return
    console.print(
        data(
            f"{report.project_path}!{report.iid} at {report.head_sha[:8]}: posted "
            f"{len(report.posted)} new comments, {len(report.already_posted)} already there, "
            f"{len(report.summary_only) + len(report.refused)} in the summary only, "
            f"{sum(item.findings for item in report.withheld)} withheld by team learnings, "
            f"{report.resolved_threads} stale threads resolved. {report.web_url}"
        )
    )
    if report.checks.final is not None:
        console.print(data(f"Checks: {report.checks.status_words()}"))


# --- reviews ---------------------------------------------------------------------------------


def print_reviews(rows: list[dict[str, Any]], console: Console) -> None:
    """`reviewbot reviews list`: one row per recorded review."""
    table = Table(
        "id",
        "project",
        "MR",
        "head",
        "trigger",
        "status",
        "model",
        "started",
        "seconds",
        "chunks",
        "tokens in/out",
    )
    for row in rows:
        add_row(
            table,
            row["id"],
            row["project"],
            f"!{row['mr_iid']}" if row["mr_iid"] else "-",
            (row["head_sha"] or "")[:8],
            row["trigger"],
            f"{row['status']} (dry run)" if row["dry_run"] else row["status"],
            row["model"],
            f"{row['started_at']:%Y-%m-%d %H:%M}",
            _seconds(row),
            row["chunks"],
            f"{row['prompt_tokens']}/{row['completion_tokens']}",
        )
    console.print(table)


def _seconds(row: dict[str, Any]) -> str:
    if row["finished_at"] is None:
        return "-"
    return f"{(row['finished_at'] - row['started_at']).total_seconds():.1f}"


def shown(value: object) -> str:
    """A stored value as a person reads it: milliseconds and seconds to one decimal, times to
    the second (UTC), nothing as "-", a list as its items; everything else as written."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, datetime):
        return _time(value)
    if isinstance(value, list):
        return ", ".join(map(_item, value)) or "-"
    return str(value)


def _item(value: object) -> str:
    """One item of a stored list: a skipped file as ``path (reason)``."""
    if isinstance(value, Mapping) and "path" in value:
        reason = value.get("reason")
        return f"{value['path']} ({reason})" if reason else str(value["path"])
    return str(value)


def digest_line(digest: Mapping[str, Any] | None) -> str:
    """What the incremental review compares, in a few words: ``2 files, 3 hunks``."""
    if not digest:
        return "-"
    files = digest.get("files", [])
    hunks = sum(len(entry.get("hunks", [])) for entry in files)
    return f"{len(files)} files, {hunks} hunks"


def print_review_record(
    review: dict[str, Any],
    calls: list[dict[str, Any]],
    tool_calls_by_chunk: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    console: Console,
) -> None:
    """`reviewbot reviews show`: the review's fields, its model calls, its findings."""
    for key, value in review.items():
        text = digest_line(value) if key == DIGEST_FIELD else shown(value)
        console.print(data(f"{key:>22}: {text}"))
    console.print(data(f"{'tool calls':>22}: {tool_call_line(tool_calls_by_chunk)}"))
    console.print(data(f"{'thinking':>22}: {thinking_line(calls)}"))
    call_table = Table(*(title for title, _ in CALL_COLUMNS))
    for call in calls:
        add_row(call_table, *(shown(call[key]) for _, key in CALL_COLUMNS))
    console.print(call_table)
    finding_table = Table("severity", "category", "where", "title", "state", "discussion")
    for f in findings:
        where = f"{f['path']}:{f['side']}:{f['line']}" if f["line"] else f["path"]
        add_row(
            finding_table,
            f["severity"],
            f["category"],
            where,
            f["title"],
            f["state"],
            f["discussion_id"] or "-",
        )
    console.print(finding_table)
    print_dropped(findings, console)


def print_dropped(findings: list[dict[str, Any]], console: Console) -> None:
    """The findings the verification pass dropped (never posted), with its verdict and why, and
    those a deep review's vote kept off (reviewbot.votes), with their votes."""
    dropped = [f for f in findings if f["state"] == "dropped"]
    if dropped:
        console.print(data(f"dropped by verification ({len(dropped)}):"))
    for f in dropped:
        where = f"{f['path']}:{f['line']}" if f["line"] else f["path"]
        confidence = f["verdict_confidence"]
        sure = f" (confidence {confidence:.2f})" if confidence is not None else ""
        console.print(data(f"  {where}: {f['title']}: {f['verdict']}{sure}: {f['verdict_reason']}"))
    voted_out = [f for f in findings if f["state"] == "voted_out"]
    if voted_out:
        console.print(data(f"voted out by a deep review's passes ({len(voted_out)}):"))
    for f in voted_out:
        where = f"{f['path']}:{f['line']}" if f["line"] else f["path"]
        console.print(data(f"  {where}: {f['title']}: {f['votes']} of {f['passes']} passes"))


def tool_call_line(by_chunk: list[dict[str, Any]]) -> str:
    """``9, unreadable 2 (22%), resent readably 2``: the review's model tool calls."""
    calls = sum(row["tool_calls"] for row in by_chunk)
    invalid = sum(row["invalid_tool_calls"] for row in by_chunk)
    repaired = sum(row["repaired_tool_calls"] for row in by_chunk)
    rate = f" ({invalid / calls:.0%})" if calls else ""
    return f"{calls}, unreadable {invalid}{rate}, resent readably {repaired}"


def thinking_line(calls: list[dict[str, Any]]) -> str:
    """``812 tokens, 2 calls recovered, 1 request with thinking off``: what the model's thinking
    did in the review (docs/thinking.md); the tokens only as far as the server counted them."""
    counted = [call["reasoning_tokens"] for call in calls if call["reasoning_tokens"] is not None]
    tokens = f"{sum(counted)} tokens" if counted else "tokens not reported by the server"
    recovered = sum(call["recovered_tool_calls"] for call in calls)
    off = sum(bool(call["thinking_off"]) for call in calls)
    return (
        f"{tokens}, {recovered} call(s) recovered from the thinking or the text, "
        f"{off} request(s) with thinking off"
    )


# --- jobs ------------------------------------------------------------------------------------


def print_jobs(jobs: list[Any], counts: dict[str, int], console: Console) -> None:
    """`reviewbot jobs list`: newest first, then the counts by status."""
    table = Table(
        "id", "project", "MR", "head", "trigger", "status", "tries", "run after", "worker", "error"
    )
    for job in jobs:
        add_row(
            table,
            job.id,
            job.project,
            f"!{job.mr_iid}",
            (job.head_sha or "-")[:12],
            job.trigger,
            job.status,
            f"{job.attempts}/{job.max_attempts}",
            _time(job.run_after),
            job.lease_owner or "-",
            _first_line(job.error),
        )
    console.print(table)
    console.print(data(", ".join(f"{name} {count}" for name, count in counts.items())))


def print_job(job: Any, console: Console) -> None:
    """Every field of one job."""
    table = Table("field", "value", show_header=False)
    for name, value in dataclasses.asdict(job).items():
        add_row(table, name, "-" if value is None else value)
    console.print(table)


def _time(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _first_line(text: str | None) -> str:
    """The first line that says something, its runs of white space (a tab: 8 columns) one
    space each, so a list's narrow cell shows words, not indentation cut to '…'."""
    lines = [BLANKS.sub(" ", line).strip(" ") for line in terminal_text(text or "").split("\n")]
    return next((line for line in lines if line), "-")


# --- eval ------------------------------------------------------------------------------------


def ratio(value: float) -> str:
    """A precision, recall or F1 as every eval table shows it."""
    return f"{value:.3f}"


def score_cells(scores: Mapping[str, Any]) -> list[object]:
    """TP, FP, FN, precision, recall and F1 of one eval score, as table cells."""
    return [
        scores["tp"],
        scores["fp"],
        scores["fn"],
        ratio(scores["precision"]),
        ratio(scores["recall"]),
        ratio(scores["f1"]),
    ]


def print_eval(document: dict[str, Any], console: Console) -> None:
    """`reviewbot eval`: scores per item, in total, per category."""
    table = Table("item", "TP", "FP", "FN", "precision", "recall", "F1")
    for item in document["items"]:
        add_row(table, item["item"], *score_cells(item))
    total, mean = document["total"], document["mean"]
    add_row(
        table,
        "total (micro)",
        total["tp"],
        total["fp"],
        total["fn"],
        ratio(total["precision"]),
        ratio(total["recall"]),
        ratio(total["f1"]),
    )
    add_row(
        table,
        "mean per item",
        "",
        "",
        "",
        ratio(mean["precision"]),
        ratio(mean["recall"]),
        ratio(mean["f1"]),
    )
    console.print(table)
    categories = Table("category", "TP", "FP", "precision")
    for row in document["categories"]:
        add_row(categories, row["category"], row["tp"], row["fp"], ratio(row["precision"]))
    console.print(categories)
    analyzers = document.get("analyzers") or {}
    if analyzers.get("findings"):
        sources = Table("source", "TP", "FP", "precision", "recall")
        for row in document["sources"]:
            add_row(
                sources,
                row["source"],
                row["tp"],
                row["fp"],
                ratio(row["precision"]),
                ratio(row["recall"]),
            )
        console.print(sources)
        console.print(
            data(
                f"analyzers: {analyzers['findings']} finding(s) on the changed lines, "
                f"{analyzers['merged']} merged with the model's, "
                f"{analyzers['digest_tokens']} digest tokens in the prompts"
            )
        )
    suggestions = document.get("suggestions") or {}
    if suggestions.get("offered"):
        dropped = ", ".join(f"{k}: {v}" for k, v in suggestions["dropped"].items()) or "none"
        console.print(
            data(
                f"suggestions: {suggestions['offered']} offered, {suggestions['kept']} posted, "
                f"dropped {dropped}"
            )
        )
    voted_out = document.get("voted_out") or {}
    if voted_out.get("findings"):
        console.print(
            data(
                f"voted out: {voted_out['findings']} finding(s), "
                f"{voted_out['would_be_true_positives']} of them would have been true positives"
            )
        )
    console.print(
        data(
            f"model {document['model']}, prompt {document['prompt_version']}, "
            f"±{document['tolerance']} lines; stored as eval run {document['run_id']}"
        )
    )
