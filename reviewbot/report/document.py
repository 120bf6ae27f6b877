"""The accuracy report: one window's figures as JSON, Markdown (for GitLab) and HTML.

:func:`build_report` asks the store for the window's figures (all computed in SQL, see
:mod:`reviewbot.store.report_queries`) and those of the window before it, and shapes them into
the JSON document; :func:`report_markdown` and :func:`reviewbot.report.html.report_html` render
that document (pure: data in, text out). :func:`post_report_issue` creates or edits the GitLab
issue ``reviewbot report <ISO week>``.

Imports go one way: this module loads :mod:`reviewbot.report.html` (and matplotlib with it) only
when HTML is written; report_html and this module share :mod:`reviewbot.report.text` and
report_html imports nothing from here.

Rates: acceptance = 👍 / (👍 + 👎), addressed = addressed / posted findings whose MR got a
later version or was merged (``addressable``); both are null when their denominator is 0.

Owns: the report document (its shape and rates), its Markdown, the files written, and the report
issue's title and marker. Must not: count or aggregate rows in Python (the SQL of
`reviewbot.store.report_queries` does), or load `reviewbot.report.html` before HTML is asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from reviewbot.markdown import link_cell, table_cell
from reviewbot.report.days import chart_buckets, daily_json
from reviewbot.report.learnings import EMPTY_LEARNINGS, learnings_markdown
from reviewbot.report.text import (
    COMPARISON_COSTS,
    COMPARISON_HEADERS,
    HEADLINE,
    PAIR_HEADERS,
    change_text,
    comparison_cells,
    issue_title,
    minute,
    printable,
    shown,
    value_at,
)
from reviewbot.store.books import reply_book
from reviewbot.store.effort_queries import effort_figures
from reviewbot.store.report_queries import FEEDBACK_COUNT_FIELDS, ReportScope
from reviewbot.store.second_look_queries import second_look_figures
from reviewbot.store.verify_queries import verification_figures
from reviewbot.weburl import web_url
from reviewbot.window import DAYS_PER_WEEK, Window

__all__ = [
    "DEFAULT_SLO_TTFT_MS",
    "FORMATS",
    "REPORT_MARKER_PREFIX",
    "IssueTracker",
    "ReportStore",
    "ReportWriteError",
    "build_report",
    "change_text",
    "eval_comparison",
    "issue_title",
    "minute",
    "post_report_issue",
    "report_markdown",
    "shown",
    "value_at",
    "write_report",
]

DEFAULT_SLO_TTFT_MS = 800.0
FORMATS = ("json", "md", "html")
SLOWEST_REVIEWS = 5
WORST_CATEGORIES = 5
EVAL_RUNS_SHOWN = 20
COMPARISON_SCORES = ("items", "tp", "fp", "fn", "precision", "recall", "f1", "mean_f1")
PAIR_FIELDS = ("a", "b", "items", "mean_f1_difference", "interval", "confidence", "improved")
PAIR_FIELDS += ("worsened", "unchanged", "better", "verdict", "reason")
REPORT_MARKER_PREFIX = "<!-- reviewbot:report"
MARKER_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]")  # keeps the marker one HTML comment
GROUP_FIELDS = (
    "findings",
    "findings_posted",
    "thumbs_up",
    "thumbs_down",
    "addressed",
    "resolved_by_human",
    "replied",
    "suggestion_applied",
    "deleted",
    "ignored",
    "addressable",
)


class ReportStore(Protocol):
    """The part of :class:`reviewbot.store.Store` the report reads."""

    def report_figures(
        self,
        scope: ReportScope,
        *,
        slowest: int,
        eval_limit: int,
        weeks_from: datetime | None = None,
    ) -> dict[str, Any]: ...

    def window_summary(self, scope: ReportScope) -> dict[str, Any]: ...

    @property
    def engine(self) -> Engine: ...  # the replies' figures (reviewbot.store.reply_queries)


class IssueTracker(Protocol):
    """The part of :class:`reviewbot.gitlab.GitLabClient` ``--post-issue`` uses."""

    def find_issue(self, project: int | str, title: str, marker: str) -> dict[str, Any] | None: ...

    def create_issue(
        self, project: int | str, title: str, description: str, marker: str
    ) -> dict[str, Any]: ...

    def update_issue(
        self, project: int | str, issue_iid: int, description: str
    ) -> dict[str, Any]: ...


# ---------------------------------------------------------------------------------------------
# The JSON document


def _ratio(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else numerator / denominator


def _feedback(outcomes: Mapping[str, int]) -> dict[str, int]:
    return {name: int(outcomes.get(name, 0)) for name in FEEDBACK_COUNT_FIELDS}


def _rates(outcomes: Mapping[str, int]) -> dict[str, float | None]:
    up, down = outcomes.get("thumbs_up", 0), outcomes.get("thumbs_down", 0)
    return {
        "acceptance": _ratio(up, up + down),
        "addressed": _ratio(outcomes.get("addressed", 0), outcomes.get("addressable", 0)),
    }


def _groups(dimension: str, figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One object per value of ``dimension``: counts, outcomes and rates, largest first."""
    found, outcomes = figures["findings"], figures["outcomes"]
    rows = []
    for label in sorted(set(found) | set(outcomes)):
        counts = {"findings": int(found.get(label, 0)), **outcomes.get(label, {})}
        row: dict[str, Any] = {dimension: label}
        row.update({name: int(counts.get(name, 0)) for name in GROUP_FIELDS})
        rates = _rates(row)
        row["acceptance"], row["addressed_rate"] = rates["acceptance"], rates["addressed"]
        rows.append(row)
    return sorted(rows, key=lambda row: (-row["findings"], str(row[dimension])))


def _tool_calls(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per model and prompt version: tool calls and the share that could not be read."""
    return [
        {
            **row,
            "invalid_rate": _ratio(row["invalid_tool_calls"], row["tool_calls"]),
            "repaired_rate": _ratio(row["repaired_tool_calls"], row["invalid_tool_calls"]),
        }
        for row in rows
    ]


def _window_json(window: Window, project: str | None) -> dict[str, Any]:
    return {
        "since": window.since.isoformat(),
        "until": window.until.isoformat(),
        "until_exclusive": True,
        "iso_week": window.iso_week,
        "project": project,
    }


def _summary(figures: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "totals": figures["totals"],
        "latency": figures["latency"],
        "feedback": _feedback(figures["outcomes"]),
        "rates": _rates(figures["outcomes"]),
    }


def _trend(weeks: Sequence[Mapping[str, Any]], slo_ttft_ms: float) -> dict[str, Any]:
    """Per ISO week of the trend (store.report_queries.read_trend), from the first with
    reviews: the headline rates, findings per MR, first-token p95 against the SLO, the
    invalid-answer rate (unreadable tool calls / tool calls), and the prompt versions and
    models live that week."""
    rows: list[dict[str, Any]] = []
    for figures in weeks:
        week = Window(figures["since"], figures["until"])
        counts, calls = figures["totals"], figures["tool_call_totals"]
        if not rows and not counts["reviews"]:
            continue  # before the store's first week in the trend: not a week of zeros
        ttft_p95 = figures["ttft_p95_ms"]
        rows.append(
            {
                "week": week.iso_week,
                "since": week.since.isoformat(),
                "until": week.until.isoformat(),
                "partial": week.length.days < DAYS_PER_WEEK,
                "reviews": counts["reviews"],
                "mrs": counts["mrs"],
                "findings": counts["findings"],
                "findings_per_mr": _ratio(counts["findings"], counts["mrs"]),
                **_rates(figures["outcomes"]),
                "ttft_p95_ms": ttft_p95,
                "ttft_p95_met": None if ttft_p95 is None else ttft_p95 <= slo_ttft_ms,
                **calls,
                "invalid_rate": _ratio(calls["invalid_tool_calls"], calls["tool_calls"]),
                "prompt_versions": figures["prompt_versions"],
                "models": figures["models"],
            }
        )
    return {"weeks": rows, "ttft_p95_target_ms": slo_ttft_ms}


def mr_url(gitlab_url: str | None, project: str, iid: int | None) -> str | None:
    """The MR's web address built from its GitLab, path and iid: None for a local review, and
    when the result is not an http(s) address (a ``javascript:`` GitLab URL in the database
    makes no link; see :func:`reviewbot.weburl.web_url`)."""
    if not gitlab_url or iid is None:
        return None
    return web_url(f"{gitlab_url.rstrip('/')}/{project}/-/merge_requests/{iid}")


def build_report(
    store: ReportStore,
    window: Window,
    *,
    now: datetime,
    project: str | None = None,
    slo_ttft_ms: float = DEFAULT_SLO_TTFT_MS,
    learnings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report of ``window`` (and of the window before it, under ``previous``);
    ``learnings``: reviewbot.report.learnings.learnings_json of the window."""
    buckets = chart_buckets(window)  # a window too long to draw is refused before any query
    scope = ReportScope(window.since, window.until, project)
    figures = store.report_figures(
        scope, slowest=SLOWEST_REVIEWS, eval_limit=EVAL_RUNS_SHOWN, weeks_from=buckets.weeks_from
    )
    before = window.previous()
    previous = store.window_summary(ReportScope(before.since, before.until, project))
    ttft_p95 = figures["latency"]["ttft_ms"]["p95"]
    slowest = [
        {
            **review,
            "started_at": review["started_at"].isoformat(),
            "url": mr_url(review["gitlab_url"], review["project"], review["mr_iid"]),
        }
        for review in figures["slowest_reviews"]
    ]
    eval_runs = [
        {
            **run,
            "started_at": run["started_at"].isoformat(),
            "finished_at": run["finished_at"].isoformat(),
        }
        for run in figures["eval_runs"]
    ]
    return {
        "window": _window_json(window, project),
        "generated_at": now.isoformat(),
        "empty": figures["totals"]["reviews"] == 0,
        **_summary(figures),
        "by_category": _groups("category", figures["by"]["category"]),
        "by_prompt_version": _groups("prompt_version", figures["by"]["prompt_version"]),
        "by_model": _groups("model", figures["by"]["model"]),
        "by_severity": _groups("severity", figures["by"]["severity"]),
        # findings that cite a review rule, per rule (docs/rules.md): which rules earn their keep
        "by_rule": [row for row in _groups("rule", figures["by"]["rule"]) if row["rule"]],
        # model / analyzer / both: what each source is worth (docs/analyzers.md)
        "by_source": _groups("source", figures["by"]["source"]),
        # per day, or per ISO week for a window over MAX_DAY_TICKS days (reviewbot.report.days)
        "daily": {
            "days": window.days(),
            **daily_json(buckets, figures["daily_findings"], figures["daily_ttft"]),
        },
        "slo": {
            "ttft_p95_target_ms": slo_ttft_ms,
            "ttft_p95_ms": ttft_p95,
            "pass": None if ttft_p95 is None else ttft_p95 <= slo_ttft_ms,
        },
        "trend": _trend(figures["trend"], slo_ttft_ms),
        "slowest_reviews": slowest,
        "eval_runs": eval_runs,
        "eval_comparison": eval_comparison(figures.get("eval_comparison")),
        "tool_calls": _tool_calls(figures["tool_calls"]),
        # answers in the bot's threads, per command and status, and their 👍/👎 (issue 21)
        "replies": reply_book(store).reply_figures(window.since, window.until, project),
        # what the verification pass cost and dropped, and how the kept findings fared (issue 21)
        "verification": verification_figures(store, scope),
        # the second looks while idle, what they added and how it was received (issue 37)
        "second_look": second_look_figures(store, scope),
        # per review effort: its cost, and what the deep reviews' vote kept off (issue 37)
        "effort": effort_figures(store, scope),
        "previous": {"window": _window_json(before, project), **_summary(previous)},
        "learnings": dict(learnings or EMPTY_LEARNINGS),  # docs/learnings.md
    }


def _per_item(run: Mapping[str, Any]) -> dict[str, float | None]:
    items = run["items"] or 0
    return {
        name: None if run[name] is None or not items else run[name] / items
        for name in COMPARISON_COSTS
    }


def eval_comparison(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The latest `eval --compare` run as the report shows it: each configuration with its
    scores and cost per item (none for an incomplete one), each pair with its interval and
    verdict (the per-item differences stay in the store)."""
    if found is None:
        return None
    configurations = []
    for entry in found["configurations"]:
        run = found["runs"].get(entry["name"])
        scores = {name: run[name] for name in COMPARISON_SCORES} if run else {}
        configurations.append(
            {
                "name": entry["name"],
                "path": entry["path"],
                "overrides": entry["overrides"],
                "incomplete": entry.get("incomplete"),
                "run_id": run["id"] if run else None,
                **scores,
                "cost_per_item": _per_item(run) if run else None,
            }
        )
    return {
        "id": found["id"],
        "dataset": found["dataset"],
        "started_at": found["started_at"].isoformat(),
        "finished_at": found["finished_at"].isoformat(),
        "configurations": configurations,
        "pairs": [{name: pair.get(name) for name in PAIR_FIELDS} for pair in found["pairs"]],
    }


# ---------------------------------------------------------------------------------------------
# Markdown


def issue_marker(report: Mapping[str, Any]) -> str:
    """The hidden marker that identifies the report issue of an ISO week."""
    window = report["window"]
    project = MARKER_UNSAFE.sub("_", window["project"] or "all")
    return f"{REPORT_MARKER_PREFIX} week={window['iso_week']} project={project} -->"


def report_markdown(report: Mapping[str, Any]) -> str:
    """What a lead reads in GitLab: headline numbers with week-over-week arrows, the worst
    categories by 👎, the slowest reviews with links to their MRs, prompt versions, evals.

    Every string from the database goes through :func:`reviewbot.markdown.table_cell` (or
    :func:`~reviewbot.markdown.link_cell`): no quick action, mention, link, image or HTML
    comes from data, and no cell can split."""
    report = printable(report)
    window = report["window"]
    since, until = minute(window["since"]), minute(window["until"])
    scope = f" · project {table_cell(window['project'])}" if window["project"] else ""
    lines = [
        issue_marker(report),
        f"# {issue_title(report)}",
        "",
        f"Reviews started from {since} to {until} UTC (end excluded){scope}.",
        "",
    ]
    if report["empty"]:
        lines += ["**No reviews** in this window.", ""]
    lines += ["| | this window | previous | change |", "|---|---:|---:|---|"]
    for label, path, kind in HEADLINE:
        now, before = value_at(report, path), value_at(report["previous"], path)
        lines.append(
            f"| {label} | {shown(now, kind)} | {shown(before, kind)} | "
            f"{change_text(now, before, kind)} |"
        )
    slo = report["slo"]
    verdict = {True: "met ✅", False: "missed ❌", None: "no data"}[slo["pass"]]
    lines += [
        "",
        f"**SLO**: first-token p95 {shown(slo['ttft_p95_ms'], 'ms')} against "
        f"{slo['ttft_p95_target_ms']:.0f} ms: {verdict}.",
        "",
    ]
    lines += _trend_table(report["trend"])
    lines += _worst_categories(report["by_category"])
    lines += _slowest(report["slowest_reviews"])
    lines += _group_table("By prompt version", "prompt_version", report["by_prompt_version"])
    lines += _group_table("By model", "model", report["by_model"])
    lines += _group_table("By review rule", "rule", report["by_rule"])
    lines += _group_table("By source", "source", report["by_source"])
    lines += _evals(report["eval_runs"])
    lines += _comparison_tables(report.get("eval_comparison"))
    lines += _tool_call_table(report["tool_calls"])
    lines += learnings_markdown(report.get("learnings"))
    lines += _reply_table(report.get("replies") or [])
    lines += _verification_table(report.get("verification"))
    lines += _second_look_table(report.get("second_look"))
    lines += _effort_table(report.get("effort") or [])
    return "\n".join(lines).rstrip() + "\n"


def _trend_table(trend: Mapping[str, Any]) -> list[str]:
    """The last ISO weeks side by side (issue 25): a change of prompt or model shows where it
    happened."""
    if not trend["weeks"]:
        return []
    lines = [
        "## Last weeks",
        "",
        "| week | reviews | acceptance | addressed rate | findings per MR | first-token p95 | "
        "invalid answers | prompt versions | models |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for week in trend["weeks"]:
        per_mr = week["findings_per_mr"]
        mark = {True: " ✅", False: " ❌", None: ""}[week["ttft_p95_met"]]
        lines.append(
            f"| {week['week']}{' (part)' if week['partial'] else ''} | {week['reviews']} | "
            f"{shown(week['acceptance'], 'rate')} | {shown(week['addressed'], 'rate')} | "
            f"{'–' if per_mr is None else f'{per_mr:.1f}'} | "
            f"{shown(week['ttft_p95_ms'], 'ms')}{mark} | {shown(week['invalid_rate'], 'rate')} | "
            f"{table_cell(', '.join(week['prompt_versions']) or '–')} | "
            f"{table_cell(', '.join(week['models']) or '–')} |"
        )
    return [*lines, f"SLO: first-token p95 ≤ {trend['ttft_p95_target_ms']:.0f} ms.", ""]


def _worst_categories(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    voted = sorted(
        (row for row in rows if row["thumbs_down"] or row["thumbs_up"]),
        key=lambda row: (-row["thumbs_down"], row["acceptance"] or 0.0, row["category"]),
    )[:WORST_CATEGORIES]
    lines = ["## Worst categories by 👎", ""]
    if not voted:
        return [*lines, "No votes in this window.", ""]
    lines += [
        "| category | 👎 | 👍 | acceptance | posted | addressed rate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in voted:
        lines.append(
            f"| {table_cell(row['category'])} | {row['thumbs_down']} | {row['thumbs_up']} | "
            f"{shown(row['acceptance'], 'rate')} | {row['findings_posted']} | "
            f"{shown(row['addressed_rate'], 'rate')} |"
        )
    return [*lines, ""]


def _slowest(reviews: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Slowest reviews", ""]
    if not reviews:
        return [*lines, "No finished reviews in this window.", ""]
    lines += [
        "| merge request | seconds | chunks | findings | model | status |",
        "|---|---:|---:|---:|---|---|",
    ]
    for review in reviews:
        name = f"{review['project']}!{review['mr_iid']}" if review["mr_iid"] else review["project"]
        lines.append(
            f"| {link_cell(name, review['url'])} | {review['seconds']:.1f} | "
            f"{review['chunks']} | {review['findings']} | {table_cell(review['model'])} | "
            f"{table_cell(review['status'])} |"
        )
    return [*lines, ""]


def _group_table(title: str, dimension: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        f"## {title}",
        "",
        f"| {dimension.replace('_', ' ')} | findings | posted | 👍 | 👎 | acceptance | "
        "addressed | addressed rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {table_cell(str(row[dimension]) or '(none)')} | {row['findings']} | "
            f"{row['findings_posted']} | {row['thumbs_up']} | {row['thumbs_down']} | "
            f"{shown(row['acceptance'], 'rate')} | {row['addressed']} | "
            f"{shown(row['addressed_rate'], 'rate')} |"
        )
    return [*lines, ""]


def _evals(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    if not runs:
        return []
    lines = [
        "## Eval runs (labelled datasets)",
        "",
        "| prompt version | model | dataset | items | precision | recall | F1 | when |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for run in runs:
        lines.append(
            f"| {table_cell(run['prompt_version'])} | {table_cell(run['model'])} | "
            f"{table_cell(Path(run['dataset']).name)} | {run['items']} | "
            f"{run['precision']:.2f} | {run['recall']:.2f} | {run['f1']:.2f} | "
            f"{minute(run['started_at'])} |"
        )
    return [*lines, ""]


def _comparison_tables(comparison: Mapping[str, Any] | None) -> list[str]:
    if comparison is None:
        return []
    configurations, pairs = comparison_cells(comparison)
    lines = [
        "## Latest eval comparison",
        "",
        f"{table_cell(Path(comparison['dataset']).name)}, {minute(comparison['started_at'])}; "
        "F1 differences per item with a paired bootstrap 95% interval.",
        "",
        "| " + " | ".join(COMPARISON_HEADERS) + " |",
        "|---|" + "---:|" * (len(COMPARISON_HEADERS) - 1),
    ]
    lines += ["| " + " | ".join(table_cell(str(c)) for c in row) + " |" for row in configurations]
    lines += ["", "| " + " | ".join(PAIR_HEADERS) + " |", "|---|---:|---|---:|---:|---|"]
    lines += ["| " + " | ".join(table_cell(str(c)) for c in row) + " |" for row in pairs]
    return [*lines, ""]


def _tool_call_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Unreadable tool calls per model and prompt version (issue 17)."""
    if not rows:
        return []
    lines = [
        "## Unreadable tool calls",
        "",
        "| model | prompt version | tool calls | unreadable | invalid rate | resent readably |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {table_cell(row['model'])} | {table_cell(row['prompt_version'] or '(none)')} | "
            f"{row['tool_calls']} | {row['invalid_tool_calls']} | "
            f"{shown(row['invalid_rate'], 'rate')} | {row['repaired_tool_calls']} |"
        )
    return [*lines, ""]


def _reply_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Answers in the bot's threads per command and status, and their reception (issue 21)."""
    if not rows:
        return []
    lines = [
        "## Answers in the bot's threads",
        "",
        "| command | status | answers | 👍 | 👎 | model calls |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {table_cell(row['command'])} | {table_cell(row['status'])} | {row['replies']} | "
            f"{row['thumbs_up']} | {row['thumbs_down']} | {row['model_calls']} |"
        )
    return [*lines, ""]


def _verification_table(figures: Mapping[str, Any] | None) -> list[str]:
    """What the verification pass cost and dropped, per category and prompt version, and the
    kept findings' 👍/👎 and addressed counts: did it drop the right ones? (issue 21)"""
    if not figures or not figures["outcomes"]:
        return []
    cost = figures["cost"]
    lines = [
        "## Verification",
        "",
        f"{cost['calls']} verification call(s) on {cost['reviews']} review(s): "
        f"{cost['prompt_tokens']:,} prompt and {cost['completion_tokens']:,} completion tokens, "
        f"{cost['seconds']:.1f} s.",
        "",
        "| category | prompt | judged | dropped | kept, posted | 👍 | 👎 | addressed |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in figures["outcomes"]:
        lines.append(
            f"| {table_cell(row['category'])} | {table_cell(row['prompt_version'])} | "
            f"{row['judged']} | {row['dropped']} | {row['kept_posted']} | {row['thumbs_up']} | "
            f"{row['thumbs_down']} | {row['addressed']} |"
        )
    return [*lines, ""]


def _second_look_table(figures: Mapping[str, Any] | None) -> list[str]:
    """The second looks while idle: how many, their model time, the findings they added and
    how those were received (issue 37, docs/effort.md)."""
    if not figures or not figures["reviews"]:
        return []
    return [
        "## Second look",
        "",
        f"{figures['reviews']} second look(s) at {figures['mrs']} MR(s) while the pool was "
        f"idle, {figures['model_seconds']:.1f} s of model time.",
        "",
        "| findings added | 👍 | 👎 | addressed | resolved |",
        "|---:|---:|---:|---:|---:|",
        f"| {figures['findings_added']} | {figures['thumbs_up']} | {figures['thumbs_down']} | "
        f"{figures['addressed']} | {figures['resolved_by_human']} |",
        "",
    ]


def _effort_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per review effort: reviews, calls and tokens per review, what the vote kept and kept
    off (docs/effort.md)."""
    if not rows:
        return []
    lines = [
        "## Review effort",
        "",
        "| effort | reviews | calls / review | prompt / review | cached | kept by vote | "
        "mean confidence | voted out |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        reviews = row["reviews"] or 1
        confidence = row["mean_confidence"]
        lines.append(
            f"| {table_cell(row['effort'])} | {row['reviews']} | "
            f"{row['model_calls'] / reviews:.1f} | {row['prompt_tokens'] / reviews:,.0f} | "
            f"{row['cached_tokens']:,} | {row['kept_by_vote']} | "
            f"{'-' if confidence is None else f'{confidence:.2f}'} | {row['voted_out']} |"
        )
    return [*lines, ""]


# ---------------------------------------------------------------------------------------------
# Output


class ReportWriteError(Exception):
    """The report's folder cannot be made or a file in it written (one line, exit 1)."""


def write_report(report: Mapping[str, Any], output: Path, formats: Iterable[str]) -> list[Path]:
    """Write ``report.<format>`` for each of ``formats`` into ``output``; the paths written.
    ReportWriteError when the folder cannot be made or a file written (``/proc/x``)."""
    try:
        return _write_files(report, output, formats)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ReportWriteError(f"cannot write the report to {output}: {reason}") from None


def _write_files(report: Mapping[str, Any], output: Path, formats: Iterable[str]) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for name in formats:
        path = output / f"report.{name}"
        if name == "json":
            # the same text as the other formats (no lone surrogate, which UTF-8 cannot hold)
            text = json.dumps(printable(report), indent=2, ensure_ascii=False) + "\n"
        elif name == "md":
            text = report_markdown(report)
        elif name == "html":
            from reviewbot.report.html import report_html  # loads matplotlib: only when asked

            text = report_html(report)
        else:
            raise ValueError(f"unknown report format {name!r}: one of {', '.join(FORMATS)}")
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def post_report_issue(
    tracker: IssueTracker, project: str, report: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Create the week's report issue in ``project``, or edit it when it exists (found by its
    title and hidden marker); the issue and whether it was created."""
    title, body, marker = issue_title(report), report_markdown(report), issue_marker(report)
    existing = tracker.find_issue(project, title, marker)
    if existing is not None:
        return tracker.update_issue(project, int(existing["iid"]), body), False
    return tracker.create_issue(project, title, body, marker), True
