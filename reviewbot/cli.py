"""Command line: parse arguments, build settings and adapters, call one library function.

Exit codes: 0 success (findings or not), 1 the work failed (model or GitLab unreachable, a chunk
could not be reviewed), 2 bad input (not a diff, bad range, bad setting, budget too small).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reviewbot import __version__
from reviewbot.chunking import DEFAULT_SCOPE_CONTEXT_TOKENS, ContextKind, Plan
from reviewbot.config import Settings, load_settings
from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, disposition
from reviewbot.exclusions import ExclusionRules, skip_reason
from reviewbot.findings import Severity
from reviewbot.localgit import read_files_at, read_range
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.tokens import TokenCounter, local_counter

# Piped output (not a terminal) gets this width so tables are not cut at 80 columns.
PIPED_TABLE_WIDTH = 200
F = TypeVar("F", bound=Callable[..., Any])


class BadInputError(Exception):
    """The user's input cannot be used (exit 2)."""


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"reviewbot: error: {message}", err=True)
    sys.exit(code)


def one_line_errors(command: F) -> F:
    """Turn known errors into one line on stderr and their exit code (reviewbot.errors);
    an unknown error is a bug and keeps its traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as error:
            known = disposition(error)
            if known is None:
                raise
            fail(known.message(error), known.exit_code)

    return wrapper  # type: ignore[return-value]


# Commands in their own modules load only when used, so `reviewbot plan` starts fast.
LAZY_COMMANDS = {
    "ci": ("reviewbot.ci", "ci_command"),
    "serve": ("reviewbot.webhook", "serve_command"),
    "worker": ("reviewbot.worker", "worker_command"),
    "jobs": ("reviewbot.worker", "jobs_group"),
    "capacity": ("reviewbot.ops.capacity_cli", "capacity_command"),
    "doctor": ("reviewbot.ops.doctor_cli", "doctor_command"),
    "loadtest": ("reviewbot.ops.loadtest_cli", "loadtest_command"),
    "feedback": ("reviewbot.accuracy_cli", "feedback_group"),
    "report": ("reviewbot.accuracy_cli", "report_command"),
    "eval": ("reviewbot.accuracy_cli", "eval_command"),
}


class LazyGroup(click.Group):
    """The ``reviewbot`` group: commands load when used; a usage error is one line (exit 2)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as error:
            where = f" (see {error.ctx.command_path} --help)" if error.ctx else ""
            fail(f"{error.format_message()}{where}", EXIT_BAD_INPUT)
        except click.ClickException as error:
            fail(error.format_message(), error.exit_code)
        except click.Abort:
            fail("aborted", EXIT_FAILURE)
        sys.exit(result if isinstance(result, int) else EXIT_OK)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module, attribute = LAZY_COMMANDS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reviewbot")
def main() -> None:
    """reviewbot: reviews GitLab merge requests with a model on your own GPUs (vLLM)."""


# --- shared options --------------------------------------------------------------------------


DIFF_SOURCE_OPTIONS = (
    click.option("--diff", "diff_path", metavar="PATH", help="Unified diff file, or - for stdin."),
    click.option(
        "--git",
        "git_range",
        metavar="BASE..HEAD",
        help="Range in a local git repository (BASE...HEAD: from the merge base).",
    ),
    click.option("--repo", default=".", show_default=True, help="Repository for --git."),
    click.option(
        "--context-tokens",
        type=int,
        metavar="N",
        help="Model context length (default: the server's max_model_len; 65536 offline).",
    ),
    click.option(
        "--max-output-tokens", type=int, metavar="N", help="Tokens kept for the answer (4096)."
    ),
    click.option(
        "--context-lines", type=int, metavar="N", help="Head lines shown around each hunk (3)."
    ),
    click.option(
        "--scope-context-tokens",
        type=int,
        metavar="N",
        help="Tokens of enclosing function/class shown per hunk where chunks have room "
        f"({DEFAULT_SCOPE_CONTEXT_TOKENS}; 0: off).",
    ),
    click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files."),
    click.option("--config", "config_file", metavar="FILE", help="TOML settings file."),
    click.option("--json", "as_json", is_flag=True, help="Machine-readable output."),
)


def diff_source_options(command: F) -> F:
    for option in reversed(DIFF_SOURCE_OPTIONS):
        command = option(command)
    return command


@dataclass
class LoadedDiff:
    files: list[FileDiff]
    contents: dict[str, str]
    label: str


def load_diff(
    diff_path: str | None, git_range: str | None, repo: str, with_contents: bool
) -> LoadedDiff:
    """The diff to plan or review; ``with_contents`` reads head files too (``--git`` only)."""
    if bool(diff_path) == bool(git_range):
        raise BadInputError("give exactly one of --diff PATH (or -) and --git BASE..HEAD")
    if diff_path:
        try:
            raw = sys.stdin.buffer.read() if diff_path == "-" else Path(diff_path).read_bytes()
        except OSError as error:
            raise BadInputError(f"cannot read {diff_path}: {error.strerror}") from None
        try:
            files = parse_git_diff(raw)
        except ValueError as error:
            raise BadInputError(f"{diff_path}: {error}") from None
        return LoadedDiff(files, {}, "stdin" if diff_path == "-" else diff_path)
    assert git_range is not None
    local = read_range(git_range, repo)
    files = parse_git_diff(local.diff)
    contents = {}
    if with_contents:
        wanted = [f.new_path for f in files if f.status.value != "deleted" and f.hunks]
        contents = read_files_at(repo, local.head_sha, wanted)
    return LoadedDiff(files, contents, git_range)


def wants_head_contents(settings: Settings) -> bool:
    """Head files are read only when some context is asked for."""
    return settings.context_lines > 0 or settings.scope_context_tokens > 0


def build_settings(config_file: str | None, **overrides: Any) -> Settings:
    return load_settings(config_file=config_file, overrides=overrides)


def local_context(title: str, files: list[FileDiff], rules: ExclusionRules) -> ReviewContext:
    skipped = {f.path: reason for f in files if (reason := skip_reason(f, rules))}
    return ReviewContext(title=title, files=file_summaries(files, skipped))


# --- plan ------------------------------------------------------------------------------------


@main.command()
@diff_source_options
@one_line_errors
def plan(
    diff_path: str | None,
    git_range: str | None,
    repo: str,
    context_tokens: int | None,
    max_output_tokens: int | None,
    context_lines: int | None,
    scope_context_tokens: int | None,
    exclude: tuple[str, ...],
    config_file: str | None,
    as_json: bool,
) -> None:
    """Show how a diff would be cut into prompts, with token counts and coverage (offline)."""
    from reviewbot.chunking import Budget
    from reviewbot.chunking import plan as make_plan
    from reviewbot.review import local_overhead, review_options

    settings = build_settings(
        config_file,
        max_model_len=context_tokens,
        max_output_tokens=max_output_tokens,
        context_lines=context_lines,
        scope_context_tokens=scope_context_tokens,
        exclude=exclude or None,
    )
    loaded = load_diff(diff_path, git_range, repo, wants_head_contents(settings))
    counter = local_counter(settings.llm_model)
    options = review_options(settings).plan_options
    context = local_context(loaded.label, loaded.files, options.exclusions)
    budget = Budget(
        max_model_len=settings.max_model_len or Budget().max_model_len,
        output_reserve=settings.max_output_tokens,
        overhead=local_overhead(counter, context),
        headroom=counter.headroom,
    )
    result = make_plan(loaded.files, budget, counter, contents=loaded.contents, options=options)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    print_plan(result, Console())


def print_plan(result: Plan, console: Console) -> None:
    budget = result.budget
    console.print(
        f"Budget: {budget.available} tokens per chunk = context {budget.max_model_len} "
        f"- output {budget.output_reserve} - prompt {budget.overhead} - margin {budget.margin} "
        f"({result.counter})"
    )
    table = Table("chunk", "tokens", "context tokens", "changed lines", "files")
    for chunk in result.chunks:
        names = ", ".join(
            s.path
            + (f" [{s.view.part}/{s.view.parts}]" if s.view.parts > 1 else "")
            + (" (whole)" if s.context is ContextKind.WHOLE else "")
            for s in chunk.segments
        )
        table.add_row(
            str(chunk.index + 1),
            str(chunk.tokens),
            str(chunk.context_tokens),
            str(chunk.changed_lines),
            names,
        )
    console.print(table)
    totals = result.totals()
    console.print(
        f"Context: {totals['context_tokens']} of {totals['tokens']} tokens "
        f"({totals['whole_files']} whole files, {totals['scoped_hunks']} hunks with their "
        "enclosing scope)"
    )
    print_coverage(result, console)


def print_coverage(result: Plan, console: Console) -> None:
    coverage = result.coverage
    console.print(
        f"Coverage: {coverage.changed_lines_covered}/{coverage.changed_lines_total} changed lines "
        f"in {coverage.files_reviewed}/{coverage.files_total} files, {len(result.chunks)} chunks"
    )
    for skipped in coverage.skipped:
        console.print(f"  skipped {skipped.path}: {skipped.reason} ({skipped.changed_lines} lines)")


# --- review ----------------------------------------------------------------------------------


@main.command()
@diff_source_options
@click.option(
    "--base-url",
    metavar="URL",
    help="vLLM OpenAI-compatible URL (default "
    "$REVIEWBOT_LLM_BASE_URL or http://127.0.0.1:8000/v1).",
)
@click.option("--model", metavar="NAME", help="Served model name (default: the server's first).")
@click.option("--concurrency", type=int, metavar="N", help="Chunks in flight (default 8).")
@click.option(
    "--min-severity",
    type=click.Choice([s.value for s in Severity]),
    help="Drop findings below this severity (default minor).",
)
@click.option(
    "--thinking/--no-thinking",
    default=None,
    help="Ask the model to think first (default: the server's choice).",
)
@one_line_errors
def review(
    diff_path: str | None,
    git_range: str | None,
    repo: str,
    context_tokens: int | None,
    max_output_tokens: int | None,
    context_lines: int | None,
    scope_context_tokens: int | None,
    exclude: tuple[str, ...],
    config_file: str | None,
    as_json: bool,
    base_url: str | None,
    model: str | None,
    concurrency: int | None,
    min_severity: str | None,
    thinking: bool | None,
) -> None:
    """Review a local diff with the model and print the findings (no GitLab, no database)."""
    settings = build_settings(
        config_file,
        max_model_len=context_tokens,
        max_output_tokens=max_output_tokens,
        context_lines=context_lines,
        scope_context_tokens=scope_context_tokens,
        exclude=exclude or None,
        llm_base_url=base_url,
        llm_model=model,
        concurrency=concurrency,
        min_severity=min_severity,
        enable_thinking=thinking,
    )
    loaded = load_diff(diff_path, git_range, repo, wants_head_contents(settings))
    counter = local_counter(settings.llm_model)
    console = Console(stderr=True)
    result = run_local_review(settings, loaded, counter, console, quiet=as_json)
    if as_json:
        click.echo(json.dumps(review_json(result), indent=2))
    else:
        print_findings(result, Console())
    if result.unreviewed:
        coverage = result.coverage
        fail(
            f"incomplete review: {coverage.changed_lines_covered} of "
            f"{coverage.changed_lines_total} changed lines reviewed; not reviewed: "
            f"{result.unreviewed[0].describe()}"
            + (f" (and {len(result.unreviewed) - 1} more)" if len(result.unreviewed) > 1 else ""),
            EXIT_FAILURE,
        )


def run_local_review(
    settings: Settings, loaded: LoadedDiff, counter: TokenCounter, console: Console, quiet: bool
) -> Any:
    from reviewbot.app import App
    from reviewbot.review import review_files, review_options

    options = review_options(settings)
    context = local_context(loaded.label, loaded.files, options.plan_options.exclusions)
    with (
        App(settings) as app,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=quiet or not console.is_terminal,
            transient=True,
        ) as progress,
    ):
        task = progress.add_task("reviewing chunks", total=None)
        return review_files(
            loaded.files,
            context=context,
            llm=app.model(),
            counter=counter,
            options=options,
            contents=loaded.contents,
            on_planned=lambda p: progress.update(task, total=len(p.chunks)),
            on_chunk_done=lambda _: progress.advance(task),
        )


def review_json(result: Any) -> dict[str, Any]:
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
            }
            for f in result.findings.findings
        ],
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
        console.print(f"[bold]{path}[/bold]", highlight=False)
        for f in items:
            where = f"{f.side.value} line {f.line}" if f.line is not None else "file"
            console.print(
                f"  {where}: [{f.severity.value}] {f.category.value}: {f.title}", markup=False
            )
            console.print(f"    {f.body}", markup=False, highlight=False)
            if f.anchor_note:
                console.print(f"    ({f.anchor_note})", markup=False, highlight=False)
    p50 = result.ttft_percentile(0.5)
    console.print(
        f"{len(shown)} findings ({len(result.findings.selection.filtered)} below threshold, "
        f"{len(result.findings.rejected)} rejected, {len(result.invalid_calls)} invalid calls) | "
        f"{len(result.plan.chunks)} chunks | {result.prompt_tokens} prompt + "
        f"{result.completion_tokens} completion tokens ({result.cached_tokens} cached) | "
        f"{result.seconds:.1f} s | first token p50 "
        + (f"{p50:.0f} ms" if p50 is not None else "n/a"),
        highlight=False,
    )


# --- run -------------------------------------------------------------------------------------


@main.command()
@click.argument("mr_iid", type=int)
@click.option("--project", required=True, metavar="ID_OR_PATH", help="Project id or group/name.")
@click.option(
    "--dry-run", is_flag=True, help="Review and print what would be posted; post nothing."
)
@click.option(
    "--full",
    "--force",
    "full",
    is_flag=True,
    help="Review every change (default: only hunks new or changed since the last review of "
    "this MR by the same model and prompt version; the same head again makes no model call).",
)
@click.option("--gitlab-url", metavar="URL", help="GitLab URL (default $REVIEWBOT_GITLAB_URL).")
@click.option("--base-url", metavar="URL", help="vLLM URL (default $REVIEWBOT_LLM_BASE_URL).")
@click.option("--model", metavar="NAME", help="Served model name (default: the server's first).")
@click.option(
    "--database-url",
    metavar="URL",
    help="Database (default $REVIEWBOT_DATABASE_URL or a SQLite file in the user data directory).",
)
@click.option("--config", "config_file", metavar="FILE", help="TOML settings file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result.")
@one_line_errors
def run(
    mr_iid: int,
    project: str,
    dry_run: bool,
    full: bool,
    gitlab_url: str | None,
    base_url: str | None,
    model: str | None,
    database_url: str | None,
    config_file: str | None,
    as_json: bool,
) -> None:
    """Review merge request MR_IID and post inline comments and a summary note."""
    from reviewbot.app import App
    from reviewbot.mr import RunOptions, run_merge_request

    overrides = {
        "gitlab_url": gitlab_url,
        "llm_base_url": base_url,
        "llm_model": model,
        "database_url": database_url,
    }
    console = Console(stderr=True)
    with (
        App.from_config(config_file, overrides) as app,
        console.status("starting", spinner="dots") as status,
    ):

        def progress(message: str) -> None:
            if not as_json:
                status.update(message)

        report = run_merge_request(
            app,
            project,
            mr_iid,
            RunOptions(trigger="cli", dry_run=dry_run, full=full),
            progress=progress,
        )
    if as_json:
        click.echo(json.dumps(run_json(report), indent=2))
    else:
        print_run(report, Console())
    if report.review.unreviewed:
        coverage = report.review.coverage
        fail(
            f"incomplete review: {coverage.changed_lines_covered} of "
            f"{coverage.changed_lines_total} changed lines reviewed; not reviewed: "
            f"{report.review.unreviewed[0].describe()}",
            EXIT_FAILURE,
        )


def run_json(report: Any) -> dict[str, Any]:
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
        }
    )
    if report.dry_run:
        data["summary_markdown"] = report.summary_markdown
    return data


def print_run(report: Any, console: Console) -> None:
    if report.dry_run:
        console.print("[bold]Dry run: nothing was posted.[/bold] Would post:")
        print_findings(report.review, console)
        console.rule("summary note")
        console.print(report.summary_markdown, markup=False, highlight=False)
        return
    console.print(
        f"{report.project_path}!{report.iid} at {report.head_sha[:8]}: posted "
        f"{len(report.posted)} new comments, {len(report.already_posted)} already there, "
        f"{len(report.summary_only) + len(report.refused)} in the summary only, "
        f"{report.resolved_threads} stale threads resolved. {report.web_url}",
        highlight=False,
    )


# --- db --------------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """Database schema commands."""


@db.command("upgrade")
@click.option("--database-url", metavar="URL", help="Database (default from settings).")
@one_line_errors
def db_upgrade(database_url: str | None) -> None:
    """Apply all migrations (safe to run repeatedly, and by several processes at once)."""
    from reviewbot.app import App
    from reviewbot.store import redact_url
    from reviewbot.store.migrate import engine_revision

    with App.from_config(None, {"database_url": database_url}) as app:
        store = app.store  # migrated on first use
        click.echo(
            f"{redact_url(app.settings.database_url)} is at revision "
            f"{engine_revision(store.engine)}"
        )


# --- reviews ---------------------------------------------------------------------------------


@main.group()
def reviews() -> None:
    """What was recorded: reviews, their model calls and their findings."""


def _open_app(database_url: str | None) -> Any:
    from reviewbot.app import App

    return App.from_config(None, {"database_url": database_url})


@reviews.command("list")
@click.option("--project", metavar="PATH", help="Only this project.")
@click.option("--mr", "mr_iid", type=int, metavar="IID", help="Only this merge request.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many, newest first.",
)
@click.option("--database-url", metavar="URL", help="Database (default from settings).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@one_line_errors
def reviews_list(
    project: str | None, mr_iid: int | None, limit: int, database_url: str | None, as_json: bool
) -> None:
    """List recorded reviews, newest first."""
    with _open_app(database_url) as app:
        rows = app.store.reviews(project=project, mr_iid=mr_iid, limit=limit)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
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
        table.add_row(
            str(row["id"]),
            row["project"],
            f"!{row['mr_iid']}" if row["mr_iid"] else "-",
            (row["head_sha"] or "")[:8],
            row["trigger"],
            row["status"],
            row["model"],
            f"{row['started_at']:%Y-%m-%d %H:%M}",
            _seconds(row),
            str(row["chunks"]),
            f"{row['prompt_tokens']}/{row['completion_tokens']}",
        )
    Console(width=_table_width()).print(table)


def _seconds(row: dict[str, Any]) -> str:
    if row["finished_at"] is None:
        return "-"
    return f"{(row['finished_at'] - row['started_at']).total_seconds():.1f}"


def _table_width() -> int | None:
    return None if sys.stdout.isatty() else PIPED_TABLE_WIDTH


@reviews.command("show")
@click.argument("review_id", type=int)
@click.option("--database-url", metavar="URL", help="Database (default from settings).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@one_line_errors
def reviews_show(review_id: int, database_url: str | None, as_json: bool) -> None:
    """One review: times, coverage, tokens, every model call and every finding."""
    from reviewbot.store import RecordNotFound

    with _open_app(database_url) as app:
        store = app.store
        try:
            review_row = store.review(review_id)
        except RecordNotFound:
            raise BadInputError(f"no review {review_id} in the database") from None
        calls, findings = store.llm_calls(review_id), store.findings(review_id)
        by_chunk = store.tool_calls_by_chunk(review_id)
    if as_json:
        data = {
            "review": review_row,
            "llm_calls": calls,
            "tool_calls_by_chunk": by_chunk,
            "findings": findings,
        }
        click.echo(json.dumps(data, indent=2, default=str))
        return
    console = Console(width=_table_width())
    for key, value in review_row.items():
        console.print(f"{key:>22}: {value}", markup=False, highlight=False)
    console.print(f"{'tool calls':>22}: {_tool_call_line(by_chunk)}", markup=False)
    call_table = Table(
        "chunk",
        "mode",
        "outcome",
        "prompt",
        "cached",
        "completion",
        "TTFT ms",
        "latency ms",
        "slot wait ms",
        "retries",
        "calls",
        "invalid",
        "repaired",
    )
    for c in calls:
        call_table.add_row(
            *(
                str(c[k])
                for k in (
                    "chunk_index",
                    "mode",
                    "outcome",
                    "prompt_tokens",
                    "cached_tokens",
                    "completion_tokens",
                    "ttft_ms",
                    "latency_ms",
                    "slot_wait_ms",
                    "retries",
                    "tool_calls",
                    "invalid_tool_calls",
                    "repaired_tool_calls",
                )
            )
        )
    console.print(call_table)
    finding_table = Table("severity", "category", "where", "title", "state", "discussion")
    for f in findings:
        where = f"{f['path']}:{f['side']}:{f['line']}" if f["line"] else f["path"]
        finding_table.add_row(
            f["severity"], f["category"], where, f["title"], f["state"], f["discussion_id"] or "-"
        )
    console.print(finding_table)


def _tool_call_line(by_chunk: list[dict[str, Any]]) -> str:
    """``9, unreadable 2 (22%), resent readably 2``: the review's model tool calls (issue 17)."""
    calls = sum(row["tool_calls"] for row in by_chunk)
    invalid = sum(row["invalid_tool_calls"] for row in by_chunk)
    repaired = sum(row["repaired_tool_calls"] for row in by_chunk)
    rate = f" ({invalid / calls:.0%})" if calls else ""
    return f"{calls}, unreadable {invalid}{rate}, resent readably {repaired}"


if __name__ == "__main__":
    main()
