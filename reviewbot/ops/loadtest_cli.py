"""``reviewbot loadtest``: parse the options, build the prompts, run the load, print (wiring)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reviewbot.chunking import Budget
from reviewbot.cli import PIPED_TABLE_WIDTH, BadInputError, load_diff, one_line_errors
from reviewbot.diff import parse_git_diff
from reviewbot.errors import EXIT_OK, EXIT_SLO_MISSED
from reviewbot.ops.loadtest import (
    DEFAULT_SLO_DECODE_TOKENS_PER_S,
    DEFAULT_SLO_ERROR_RATE,
    DEFAULT_SLO_TTFT_P95_MS,
    SLO,
    LoadReport,
    ReviewInput,
    planned_reviews,
    prompt_cycle,
    summarize,
    synthetic_input,
)
from reviewbot.ops.loadtest_driver import MAX_IN_FLIGHT, Schedule, run_load

DEFAULT_SYNTHETIC_TOKENS = 4096
# Closed loop without --requests/--duration: this many requests per slot, so the run sees the
# burst at the start (every queue position) and a steady state after it.
DEFAULT_ROUNDS = 4
DEFAULT_OPEN_LOOP_DURATION_S = 60.0
DIFF_SUFFIXES = (".diff", ".patch")


def _inputs(
    diffs_dir: str | None,
    git_range: str | None,
    repo: str,
    synthetic_tokens: int | None,
    context_lines: int,
    counter: Any,
    seed: int,
) -> list[ReviewInput]:
    given = [x for x in (diffs_dir, git_range, synthetic_tokens) if x is not None]
    if len(given) > 1:
        raise BadInputError("give at most one of --diffs DIR, --git BASE..HEAD, --synthetic N")
    if diffs_dir is not None:
        return _diff_files(Path(diffs_dir))
    if git_range is not None:
        loaded = load_diff(None, git_range, repo, context_lines)
        return [ReviewInput(loaded.label, loaded.files, loaded.contents)]
    tokens = DEFAULT_SYNTHETIC_TOKENS if synthetic_tokens is None else synthetic_tokens
    if tokens < 1:
        raise BadInputError(f"--synthetic must be at least 1 token, got {tokens}")
    return [synthetic_input(tokens, counter, seed)]


def _diff_files(directory: Path) -> list[ReviewInput]:
    if not directory.is_dir():
        raise BadInputError(f"--diffs {directory}: not a directory")
    paths = sorted(p for p in directory.iterdir() if p.suffix in DIFF_SUFFIXES and p.is_file())
    if not paths:
        raise BadInputError(f"--diffs {directory}: no *.diff or *.patch file in it")
    inputs = []
    for path in paths:
        try:
            files = parse_git_diff(path.read_bytes())
        except (OSError, ValueError) as error:
            raise BadInputError(f"{path}: {error}") from None
        inputs.append(ReviewInput(path.name, files))
    return inputs


def _schedule(
    settings: Any,
    concurrency: int | None,
    rate: float | None,
    requests: int | None,
    duration: float | None,
    seed: int,
) -> Schedule:
    if concurrency is not None and rate is not None:
        raise BadInputError("give --concurrency (closed loop) or --rate (open loop), not both")
    if rate is not None and rate <= 0:
        raise BadInputError(f"--rate must be above 0 requests per second, got {rate}")
    if requests is not None and requests < 1:
        raise BadInputError(f"--requests must be at least 1, got {requests}")
    if duration is not None and duration <= 0:
        raise BadInputError(f"--duration must be above 0 seconds, got {duration}")
    if rate is not None:
        if requests is None and duration is None:
            duration = DEFAULT_OPEN_LOOP_DURATION_S
        return Schedule(rate_per_s=rate, requests=requests, duration_s=duration, seed=seed)
    slots = concurrency
    if slots is None:
        slots = settings.llm_total_concurrency or settings.concurrency
    if not 1 <= slots <= MAX_IN_FLIGHT:
        raise BadInputError(f"--concurrency must be between 1 and {MAX_IN_FLIGHT}, got {slots}")
    if requests is None and duration is None:
        requests = DEFAULT_ROUNDS * slots
    return Schedule(concurrency=slots, requests=requests, duration_s=duration, seed=seed)


def _slo(ttft_p95_ms: float, decode_tps: float, error_rate: float) -> SLO:
    if ttft_p95_ms <= 0 or decode_tps < 0 or not 0 <= error_rate <= 1:
        raise BadInputError(
            "SLO targets: --slo-ttft-p95-ms above 0, --slo-decode-tps 0 or more, "
            "--slo-error-rate between 0 and 1"
        )
    return SLO(ttft_p95_ms, decode_tps, error_rate)


def _figure(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


def print_report(report: LoadReport, console: Console) -> None:
    load = report.load
    loop = (
        f"open loop, Poisson arrivals at {load.get('rate_per_s')}/s"
        if load.get("mode") == "open"
        else f"closed loop, {load.get('concurrency')} in flight"
    )
    table = Table(title=f"{load.get('input')}: {loop}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    ttft, e2e, decode = report.ttft_ms, report.e2e_ms, report.decode_tokens_per_s
    cache = report.prefix_cache_hit_rate
    rows = [
        (
            "requests",
            f"{report.requests} in {report.seconds:.1f} s ({report.errors} errors, "
            f"{report.truncated} cut at max tokens)",
        ),
        (
            "first token (TTFT)",
            f"p50 {_figure(ttft['p50'], ' ms')}, p95 "
            f"{_figure(ttft['p95'], ' ms')}, p99 {_figure(ttft['p99'], ' ms')}",
        ),
        (
            "end to end",
            f"p50 {_figure(e2e['p50'], ' ms')}, p95 {_figure(e2e['p95'], ' ms')}, "
            f"p99 {_figure(e2e['p99'], ' ms')}",
        ),
        (
            "decode per request",
            f"p50 {_figure(decode['p50'], ' tokens/s', 1)}, p95 "
            f"{_figure(decode['p95'], ' tokens/s', 1)}",
        ),
        (
            "aggregate",
            f"{report.aggregate_tokens_per_s:,.1f} output tokens/s, "
            f"{report.aggregate_prompt_tokens_per_s:,.0f} prompt tokens/s",
        ),
        ("prompt size", f"{_figure(report.prompt_tokens_mean)} tokens on average"),
        (
            "prefix cache",
            "not reported by the server (--enable-prompt-tokens-details)"
            if cache is None
            else f"{cache:.1%} of prompt tokens from the cache",
        ),
        (
            "reviews per day",
            f"{report.reviews_per_day:,.0f} ({report.chunks_per_review:g} "
            "chunks per review, around the clock at this load)",
        ),
    ]
    for what, value in rows:
        table.add_row(what, value)
    console.print(table)
    positions = Table("queue position", "requests", "TTFT p50 ms", "TTFT p95 ms")
    for row in report.ttft_by_queue_position:
        positions.add_row(
            str(row["position"]),
            str(row["requests"]),
            f"{row['p50_ms']:,.0f}",
            f"{row['p95_ms']:,.0f}",
        )
    console.print(positions)
    console.print(
        f"TTFT p95 meets the SLO up to queue position {report.queue_depth_within_ttft_slo}",
        highlight=False,
    )
    for error in report.first_errors:
        console.print(f"[red]error:[/red] {error}", highlight=False)
    for item in report.slo:
        verdict = "[green]met[/green]" if item["pass"] else "[bold red]missed[/bold red]"
        console.print(
            f"SLO {item['name']}: {_figure(item['value'], digits=3)} (target {item['target']:g}) "
            f"{verdict}",
            highlight=False,
        )


@click.command("loadtest")
@click.option("--diffs", "diffs_dir", metavar="DIR", help="Replay every *.diff/*.patch in DIR.")
@click.option("--git", "git_range", metavar="BASE..HEAD", help="Replay a range of a local repo.")
@click.option("--repo", default=".", show_default=True, help="Repository for --git.")
@click.option(
    "--synthetic",
    "synthetic_tokens",
    type=int,
    metavar="N",
    help=f"Synthetic diffs of N tokens each, up to the chunk budget (default: "
    f"{DEFAULT_SYNTHETIC_TOKENS} when no input is given).",
)
@click.option(
    "--concurrency",
    type=int,
    metavar="C",
    help="Closed loop: C requests in flight (default REVIEWBOT_LLM_TOTAL_CONCURRENCY or "
    "REVIEWBOT_CONCURRENCY).",
)
@click.option(
    "--rate",
    type=float,
    metavar="R",
    help="Open loop: R requests per second on average, Poisson arrivals.",
)
@click.option("--duration", type=float, metavar="S", help="Stop sending after S seconds.")
@click.option(
    "--requests",
    type=int,
    metavar="N",
    help=f"Stop after N requests (default {DEFAULT_ROUNDS} x concurrency; open loop: "
    f"{DEFAULT_OPEN_LOOP_DURATION_S:g} s).",
)
@click.option(
    "--slo-ttft-p95-ms",
    type=float,
    default=DEFAULT_SLO_TTFT_P95_MS,
    show_default=True,
    help="First-token p95 must be at most this.",
)
@click.option(
    "--slo-decode-tps",
    type=float,
    default=DEFAULT_SLO_DECODE_TOKENS_PER_S,
    show_default=True,
    help="Per-request decode tokens/s p50 must be at least this.",
)
@click.option(
    "--slo-error-rate",
    type=float,
    default=DEFAULT_SLO_ERROR_RATE,
    show_default=True,
    help="Share of failed requests must be at most this.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Arrivals and synthetic diffs."
)
@click.option("--base-url", metavar="URL", help="Model server (default $REVIEWBOT_LLM_BASE_URL).")
@click.option("--model", metavar="NAME", help="Served model name (default: the server's first).")
@click.option("--config", "config_file", metavar="FILE", help="TOML settings file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@one_line_errors
def loadtest_command(
    diffs_dir: str | None,
    git_range: str | None,
    repo: str,
    synthetic_tokens: int | None,
    concurrency: int | None,
    rate: float | None,
    duration: float | None,
    requests: int | None,
    slo_ttft_p95_ms: float,
    slo_decode_tps: float,
    slo_error_rate: float,
    seed: int,
    base_url: str | None,
    model: str | None,
    config_file: str | None,
    as_json: bool,
) -> None:
    """Replay real review prompts against the model server and judge the SLOs: TTFT p95,
    decode tokens/s, error rate. Exit 0 when all are met, 3 when one is missed."""
    from reviewbot.app import App
    from reviewbot.prompts import tool_schemas
    from reviewbot.review import budget_for, review_options
    from reviewbot.tokens import local_counter

    overrides = {"llm_base_url": base_url, "llm_model": model}
    slo = _slo(slo_ttft_p95_ms, slo_decode_tps, slo_error_rate)
    with App.from_config(config_file, overrides) as app:
        settings = app.settings
        schedule = _schedule(settings, concurrency, rate, requests, duration, seed)
        counter = local_counter(settings.llm_model)
        inputs = _inputs(
            diffs_dir, git_range, repo, synthetic_tokens, settings.context_lines, counter, seed
        )
        runner = app.model()
        info = runner.server_info()
        options = review_options(settings)
        max_model_len = options.max_model_len or info.max_model_len or Budget().max_model_len
        budgets = [
            budget_for(
                runner, counter, item.context(0, options.plan_options), options, max_model_len
            )
            for item in inputs
        ]
        if synthetic_tokens is not None and synthetic_tokens > budgets[0].available:
            raise BadInputError(
                f"--synthetic {synthetic_tokens} is more than the {budgets[0].available} tokens "
                f"a chunk's diff may use on this server (context {max_model_len})"
            )
        planned = planned_reviews(inputs, budgets, counter, options.plan_options)
        if not planned:
            raise BadInputError("nothing to review in the input (every file is skipped)")
        chunks_per_review = sum(len(p.chunks) for _, p in planned) / len(planned)
        label = inputs[0].label if len(inputs) == 1 else f"{len(inputs)} diffs"
        console = Console(stderr=True)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=as_json or not console.is_terminal,
        ) as progress:
            task = progress.add_task("requests", total=schedule.requests)
            run = run_load(
                runner.backend,
                prompt_cycle(planned, options.plan_options),
                tool_schemas(),
                schedule,
                max_tokens=settings.max_output_tokens,
                temperature=runner.settings.temperature,
                on_sample=lambda _: progress.advance(task),
            )
    load = {**schedule.describe(), "input": label, "model": info.model}
    report = summarize(run.samples, run.seconds, chunks_per_review, slo, load)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report, Console(width=None if sys.stdout.isatty() else PIPED_TABLE_WIDTH))
    sys.exit(EXIT_OK if report.slo_met else EXIT_SLO_MISSED)
