"""`reviewbot plan`, `reviewbot review` (a local diff) and `reviewbot run` (a merge request).

Owns: their options and output. `plan` is offline and loads neither the model client nor any
adapter; `review` runs `reviewbot.review.review_files` on a local diff; `run` runs
`reviewbot.mr.run_merge_request`.

Must not: plan, review or publish itself; import the App, the model client or the MR runner at
load time (they load inside the command that needs them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from reviewbot.commands.common import (
    INT32_MAX,
    InputDir,
    InputFile,
    Integer,
    PathName,
    Text,
    base_url_option,
    config_option,
    database_url_option,
    effort_choice,
    effort_option,
    emit_json,
    fail,
    git_range_option,
    gitlab_url_option,
    json_option,
    model_option,
    one_line_errors,
    options,
    project_option,
    repo_option,
    setting_integer,
)
from reviewbot.commands.progress import progress_bar, progress_steps
from reviewbot.commands.render import (
    print_findings,
    print_plan,
    print_run,
    review_json,
    run_json,
)
from reviewbot.commands.terminal import console
from reviewbot.config import DEFAULT_SCOPE_CONTEXT_TOKENS, Settings, load_settings
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE
from reviewbot.findings import Severity
from reviewbot.redaction import hide_url_password
from reviewbot.repo.localdiff import (
    MAX_DIFF_BYTES,
    LoadedDiff,
    load_diff,
    local_context,
    local_rules,
    wants_head_contents,
)
from reviewbot.tokens import TokenCounter, local_counter

if TYPE_CHECKING:
    from reviewbot.model import LLMClient
    from reviewbot.review import ModelContext
    from reviewbot.rules.ruleset import GroupRuleTexts, RuleSet

__all__ = ["plan_command", "review_command", "run_command"]

PATH_KEY = "path_with_namespace"

DIFF_SOURCE_OPTIONS = options(
    click.option(
        "--diff",
        "diff_path",
        type=InputFile(MAX_DIFF_BYTES, allow_stdin=True),
        metavar="PATH",
        help="Unified diff file, or - for stdin.",
    ),
    git_range_option(),
    repo_option,
    click.option(
        "--head-dir",
        type=InputDir(),
        metavar="DIR",
        help="The head tree of a --diff (the new versions of its files), for context lines and "
        "enclosing scopes; --git reads them from git.",
    ),
    click.option(
        "--context-tokens",
        type=setting_integer("max_model_len"),
        metavar="N",
        help="Model context length (default: the server's max_model_len; 65536 offline).",
    ),
    click.option(
        "--max-output-tokens",
        type=setting_integer("max_output_tokens"),
        metavar="N",
        help="Tokens kept for the answer (4096).",
    ),
    click.option(
        "--context-lines",
        type=setting_integer("context_lines"),
        metavar="N",
        help="Head lines shown around each hunk (3).",
    ),
    click.option(
        "--scope-context-tokens",
        type=setting_integer("scope_context_tokens"),
        metavar="N",
        help="Tokens of enclosing function/class shown per hunk where chunks have room "
        f"({DEFAULT_SCOPE_CONTEXT_TOKENS}; 0: off).",
    ),
    click.option(
        "--exclude", type=Text(), multiple=True, metavar="GLOB", help="Skip matching files."
    ),
    config_option,
    json_option(),
)


def _settings(config_file: str | None, **overrides: Any) -> Settings:
    return load_settings(config_file=config_file, overrides=overrides)


def _budget_overrides(
    context_tokens: int | None,
    max_output_tokens: int | None,
    context_lines: int | None,
    scope_context_tokens: int | None,
    exclude: tuple[str, ...],
) -> dict[str, Any]:
    return {
        "max_model_len": context_tokens,
        "max_output_tokens": max_output_tokens,
        "context_lines": context_lines,
        "scope_context_tokens": scope_context_tokens,
        "exclude": exclude or None,
    }


def _incomplete(result: Any, first_only: bool = False) -> str:
    """``incomplete review: 3 of 5 changed lines reviewed; not reviewed: chunk 2 (...)``."""
    coverage, missed = result.coverage, result.unreviewed
    more = f" (and {len(missed) - 1} more)" if len(missed) > 1 and not first_only else ""
    return (
        f"incomplete review: {coverage.changed_lines_covered} of "
        f"{coverage.changed_lines_total} changed lines reviewed; not reviewed: "
        f"{missed[0].describe()}{more}"
    )


# --- plan ------------------------------------------------------------------------------------


@click.command("plan")
@DIFF_SOURCE_OPTIONS
@click.option(
    "--offline",
    is_flag=True,
    help="Ask the model server nothing: plan for --context-tokens (or max_model_len, or "
    "65536) with the prompt counted locally.",
)
@project_option(
    "Apply the rules and policy of this GitLab project's groups (read from GitLab: "
    "group_settings_project, gitlab_url and gitlab_token must be set)."
)
@click.option(
    "--analyzer-report",
    "analyzer_reports",
    type=PathName(),
    multiple=True,
    metavar="PATH",
    help="An analyzer report of the change (SARIF 2.1.0, GitLab SAST / secret detection, Code "
    "Quality JSON): the chunks keep room for the digest of its findings on their files, as "
    "`run` and `ci` do (docs/analyzers.md); repeatable.",
)
@one_line_errors
def plan_command(
    diff_path: str | None,
    git_range: str | None,
    repo: Path,
    head_dir: Path | None,
    config_file: str | None,
    as_json: bool,
    offline: bool,
    project: int | str | None,
    analyzer_reports: tuple[str, ...],
    **budget: Any,
) -> None:
    """Show the chunks `run` would send for a diff, with token counts and coverage."""
    from reviewbot.review import plan_with_rules, review_options

    settings = _settings(config_file, **_budget_overrides(**budget))
    settings, group_rules, group_warnings = _group_layers(settings, project)
    with_contents = wants_head_contents(settings)
    loaded = load_diff(diff_path, git_range, repo, with_contents, head_dir=head_dir)
    options = review_options(settings)
    context = local_context(loaded.label, loaded.files, options.plan_options.exclusions)
    with _model_server(settings, offline) as (llm, model_context):
        result, rules, digests = plan_with_rules(
            loaded.files,
            context=context,
            counter=local_counter(settings.llm_model),
            options=options,
            contents=loaded.contents,
            rules=_with_problems(local_rules(settings, loaded, group_rules), group_warnings),
            with_tools=True,
            llm=llm,
            max_model_len=model_context.max_model_len,
            analyzer_findings=_report_findings(analyzer_reports, loaded.files),
        )
    if as_json:
        emit_json(
            {
                **result.to_dict(),
                "model_context": model_context.to_dict(),
                "rules": rules.to_dict(),
                "analyzer_digest": digests.to_dict(),
            }
        )
        return
    print_plan(result, console(), rules, model_context)
    if digests.findings:
        console().print(
            f"Analyzers' digest: {len(digests.findings)} finding(s) on the diff's files, "
            f"{digests.reserve} tokens kept in every chunk, {digests.total_tokens} in all"
        )


def _report_findings(paths: tuple[str, ...], files: Any) -> tuple[Any, ...]:
    """The findings of the analyzer reports at ``paths`` on the changed lines of ``files``;
    a report that cannot be used is a bad input (one line, exit 2)."""
    if not paths:
        return ()
    from reviewbot.analyzers.changes import changed_lines
    from reviewbot.analyzers.collect import read_report_file, within_changes
    from reviewbot.analyzers.report_json import ReportContext

    found: list[Any] = []
    for path in paths:
        run = read_report_file(Path(path), ReportContext())
        if run.problems:
            raise click.BadParameter(run.problems[0].sentence(), param_hint="--analyzer-report")
        found += within_changes(run, changed_lines(files)).findings
    return tuple(found)


def _with_problems(rules: RuleSet, problems: list[str]) -> RuleSet:
    return replace(rules, problems=(*problems, *rules.problems))


def _group_layers(
    settings: Settings, project: int | str | None
) -> tuple[Settings, list[GroupRuleTexts], list[str]]:
    """``settings`` with ``project``'s groups' policy applied, their rules, and what could
    not be read (nothing without ``--project``; a project id is looked up for its path)."""
    if project is None:
        return settings, [], []
    if not settings.group_settings_project:
        fail("--project needs the setting group_settings_project", EXIT_BAD_INPUT)
    from reviewbot.app import App
    from reviewbot.guidance import apply_group_layers

    warnings: list[str] = []
    with App(settings) as app:
        gitlab = app.gitlab()
        path = project if isinstance(project, str) else gitlab.project(project)[PATH_KEY]
        groups = app.group_settings(gitlab, path)
    warnings.extend(groups.problems)
    settings, rules = apply_group_layers(settings, groups, warnings)
    return settings, rules, warnings


@contextmanager
def _model_server(
    settings: Settings, offline: bool
) -> Iterator[tuple[LLMClient | None, ModelContext]]:
    """The model server `run` would use, and the context it gives (``reviewbot.review.
    model_context``): (None, the assumed context) when ``offline`` or when it gives none."""
    from reviewbot.review import model_context, review_options

    options = review_options(settings)
    shown = hide_url_password(settings.llm_base_url)
    if offline:
        yield None, model_context(options, None, shown, "--offline")
        return
    from reviewbot.llm.factory import model_from_settings
    from reviewbot.model import LLMError, LLMUnavailableError

    with model_from_settings(settings) as llm:
        try:
            info = llm.server_info()
        except LLMUnavailableError as error:
            why = f"the model server at {shown} did not answer ({error})"
            yield None, model_context(options, None, shown, why)
            return
        except LLMError as error:
            why = f"the model server at {shown} gave no context ({error})"
            yield None, model_context(options, None, shown, why)
            return
        yield llm, model_context(options, info, shown)


# --- review ----------------------------------------------------------------------------------


@click.command("review")
@DIFF_SOURCE_OPTIONS
@base_url_option(
    "vLLM OpenAI-compatible URL (default $REVIEWBOT_LLM_BASE_URL or http://127.0.0.1:8000/v1)."
)
@model_option
@click.option(
    "--concurrency",
    type=setting_integer("concurrency"),
    metavar="N",
    help="Chunks in flight (default 8).",
)
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
def review_command(
    diff_path: str | None,
    git_range: str | None,
    repo: Path,
    head_dir: Path | None,
    config_file: str | None,
    as_json: bool,
    base_url: str | None,
    model: str | None,
    concurrency: int | None,
    min_severity: str | None,
    thinking: bool | None,
    **budget: Any,
) -> None:
    """Review a local diff with the model and print the findings (no GitLab, no database)."""
    settings = _settings(
        config_file,
        **_budget_overrides(**budget),
        llm_base_url=base_url,
        llm_model=model,
        concurrency=concurrency,
        min_severity=min_severity,
        enable_thinking=thinking,
    )
    with_contents = wants_head_contents(settings)
    loaded = load_diff(diff_path, git_range, repo, with_contents, head_dir=head_dir)
    counter = local_counter(settings.llm_model)
    result = _review_local(settings, loaded, counter, console(stderr=True), quiet=as_json)
    if as_json:
        emit_json(review_json(result))
    else:
        print_findings(result, console())
    if result.unreviewed:
        fail(_incomplete(result), EXIT_FAILURE)


def _review_local(
    settings: Settings, loaded: LoadedDiff, counter: TokenCounter, console: Console, quiet: bool
) -> Any:
    from reviewbot.app import App
    from reviewbot.model import request_priority
    from reviewbot.review import review_files, review_options
    from reviewbot.states import Workload

    options = review_options(settings)
    context = local_context(loaded.label, loaded.files, options.plan_options.exclusions)
    with (
        App(settings) as app,
        progress_bar(console, quiet=quiet) as progress,
    ):
        task = progress.add_task("reviewing chunks", total=None)
        return review_files(
            loaded.files,
            context=context,
            llm=app.model(),
            counter=counter,
            options=options,
            contents=loaded.contents,
            rules=local_rules(settings, loaded),
            on_planned=lambda p: progress.update(task, total=len(p.chunks)),
            on_chunk_done=lambda _: progress.advance(task),
            priority=request_priority(Workload.FIRST_REVIEW),  # someone waits at the terminal
        )


# --- run -------------------------------------------------------------------------------------


@click.command("run")
@click.argument("mr_iid", type=Integer(1, INT32_MAX))
@project_option("Project id or group/name.", required=True)
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
@effort_option
@gitlab_url_option
@base_url_option("vLLM URL (default $REVIEWBOT_LLM_BASE_URL).")
@model_option
@database_url_option
@config_option
@json_option("Machine-readable result.")
@one_line_errors
def run_command(
    mr_iid: int,
    project: str,
    dry_run: bool,
    full: bool,
    effort: str | None,
    gitlab_url: str | None,
    base_url: str | None,
    model: str | None,
    database_url: str | None,
    config_file: str | None,
    as_json: bool,
) -> None:
    """Review merge request MR_IID and post inline comments and a summary note."""
    from reviewbot.analyzers.host import host_analyzers
    from reviewbot.app import App
    from reviewbot.mr import RunOptions, run_merge_request

    overrides = {
        "gitlab_url": gitlab_url,
        "llm_base_url": base_url,
        "llm_model": model,
        "database_url": database_url,
    }
    with (
        App.from_config(config_file, overrides) as app,
        progress_steps(console(stderr=True), "starting", quiet=as_json) as say,
    ):
        report = run_merge_request(
            app,
            project,
            mr_iid,
            RunOptions(
                trigger="cli",
                dry_run=dry_run,
                full=full,
                analyzers=host_analyzers(app.settings, None),  # the built-ins on the host's cache
                effort=effort_choice(effort),
            ),
            progress=say,
        )
    if as_json:
        emit_json(run_json(report))
    else:
        print_run(report, console())
    if report.review.unreviewed:
        fail(_incomplete(report.review, first_only=True), EXIT_FAILURE)
