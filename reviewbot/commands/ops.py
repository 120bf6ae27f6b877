"""The model server's side: `reviewbot capacity`, `reviewbot doctor`, `reviewbot loadtest`.

Owns: their options, the checks of option combinations (`_schedule`, `_slo`), their output
(`reviewbot.commands.render_ops`) and exit codes. The work is `reviewbot.ops`: the capacity
planner, the doctor's probes, the load test's plan (`loadtest_plan`), driver and figures.

Must not: plan memory, probe a server or send load itself; `capacity` stays offline (no HTTP
client, python-gitlab or SQLAlchemy is loaded).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import click

from reviewbot.commands.common import (
    INT64_MAX,
    MAX_CONTEXT_TOKENS,
    MAX_WAIT_S,
    Checked,
    InputDir,
    InputFile,
    Integer,
    Number,
    OutputPath,
    PathName,
    base_url_option,
    config_option,
    emit_json,
    fail,
    git_range_option,
    json_option,
    model_option,
    one_line_errors,
    options,
    project_option,
    repo_option,
)
from reviewbot.commands.progress import progress_bar, progress_steps
from reviewbot.commands.render_ops import (
    print_capacity,
    print_checks,
    print_load_report,
    print_router_plan,
)
from reviewbot.commands.terminal import console
from reviewbot.commands.workload import (
    DEFAULT_WINDOW_DAYS,
    MAX_REVIEWS_PER_DAY,
    MAX_WINDOW_DAYS,
    STORE,
    WorkloadSource,
    workload_capacity,
)
from reviewbot.errors import (
    EXIT_BAD_INPUT,
    EXIT_DOES_NOT_FIT,
    EXIT_OK,
    EXIT_SLO_MISSED,
    BadInputError,
)
from reviewbot.ops.alternatives import what_would_fit
from reviewbot.ops.capacity import (
    DEFAULT_MAX_MODEL_LEN,
    KV_CACHE_DTYPES,
    MAX_GPUS,
    MAX_NUM_SEQS,
    MAX_TTFT_TARGET_S,
    QUANTIZATIONS,
    LaunchSettings,
    normalize_quantization,
    plan_capacity,
)
from reviewbot.ops.gpus import GPUS, find_gpu
from reviewbot.ops.loadtest import (
    DEFAULT_SLO_DECODE_TOKENS_PER_S,
    DEFAULT_SLO_ERROR_RATE,
    DEFAULT_SLO_TTFT_P95_MS,
    SLO,
    prompt_cycle,
    summarize,
)
from reviewbot.ops.loadtest_driver import MAX_IN_FLIGHT, Schedule, run_load
from reviewbot.ops.loadtest_plan import DEFAULT_SYNTHETIC_TOKENS, LoadInputs, PlannedLoad, plan_load
from reviewbot.ops.model_shape import MAX_CONFIG_FILE_BYTES as MODEL_CONFIG_MAX_BYTES
from reviewbot.ops.model_shape import (
    load_config_file,
    shipped_model,
    shipped_model_names,
)
from reviewbot.ops.pool_simulation import BOX_PROFILES, MAX_BOXES
from reviewbot.ops.router import MAX_REPLICAS, router_plan

__all__ = ["capacity_command", "doctor_command", "loadtest_command"]

SETTINGS_FIX = "correct the setting named above (docs/configuration.md)"
MODEL_CONFIG = InputFile(MODEL_CONFIG_MAX_BYTES)  # model_shape's own cap: one rule
# Open loop: one request in 1,000 s at the least (slower is not load), 10,000/s at the most
# (more than one client process can send, and far past any model server's limit).
MIN_RATE_PER_S = 0.001
MAX_RATE_PER_S = 10_000.0
MAX_REQUESTS = 1_000_000
MAX_SLO_MS = 3_600_000.0  # an hour
MAX_DECODE_TOKENS_PER_S = 1_000_000.0
# Closed loop without --requests/--duration: this many requests per slot, so the run sees the
# burst at the start (every queue position) and a steady state after it.
DEFAULT_ROUNDS = 4
DEFAULT_OPEN_LOOP_DURATION_S = 60.0


# --- capacity --------------------------------------------------------------------------------

CAPACITY_OPTIONS = options(
    click.option(
        "--model",
        "model_name",
        type=Checked(shipped_model),
        metavar="NAME",
        help="A shipped Qwen3.5 model, e.g. Qwen/Qwen3.5-35B-A3B (a -GPTQ-Int4 or -FP8 "
        "suffix sets --quantization).",
    ),
    click.option(
        "--model-config",
        "config_path",
        type=PathName(),  # read once --model is known not to be given too (MODEL_CONFIG)
        metavar="PATH",
        help="Any Hugging Face config.json instead of --model.",
    ),
    click.option(
        "--gpu",
        "gpu_name",
        type=Checked(find_gpu),
        metavar="NAME",
        help=f"One of: {', '.join(g.name for g in GPUS.values())} (required but with --workload).",
    ),
    click.option(
        "--gpus", type=Integer(1, MAX_GPUS), default=1, show_default=True, help="GPUs in the box."
    ),
    click.option(
        "--tensor-parallel-size",
        type=Integer(high=MAX_GPUS),
        metavar="N",
        help="vLLM --tensor-parallel-size (default: --gpus).",
    ),
    click.option(
        "--quantization",
        type=Checked(normalize_quantization),
        metavar="Q",
        help=f"One of {', '.join(QUANTIZATIONS)} (default: the model's own).",
    ),
    click.option(
        "--max-model-len",
        type=Integer(1, MAX_CONTEXT_TOKENS),
        default=DEFAULT_MAX_MODEL_LEN,
        show_default=True,
        help="Context length every sequence must be able to reach.",
    ),
    click.option(
        "--kv-cache-dtype",
        type=click.Choice(KV_CACHE_DTYPES),
        default="auto",
        show_default=True,
        help=f"One of {', '.join(KV_CACHE_DTYPES)}.",
    ),
    click.option(
        "--gpu-memory-utilization",
        type=Number(0, 1, low_open=True),
        metavar="U",
        help="Share of each GPU vLLM may use (default 0.92).",
    ),
    click.option(
        "--max-num-batched-tokens",
        type=Integer(high=MAX_CONTEXT_TOKENS),
        metavar="N",
        help="Prefill chunk size; sizes the activation reserve (default 8192).",
    ),
    click.option(
        "--max-num-seqs",
        type=Integer(high=MAX_NUM_SEQS),
        metavar="N",
        help="If already chosen; sizes the sampler's reserve (default vLLM's 256).",
    ),
    click.option(
        "--ttft-target-s",
        type=Number(
            0,
            MAX_TTFT_TARGET_S,
            low_open=True,
            condition=f"a positive number of seconds, at most {MAX_TTFT_TARGET_S:g}",
        ),
        metavar="S",
        help="Recommend no more sequences than start within S seconds when they arrive "
        "together (default: as many as memory holds).",
    ),
    click.option(
        "--prompt-tokens",
        type=Integer(high=MAX_CONTEXT_TOKENS),
        metavar="N",
        help="Prompt length for the first-token estimate (default: --max-model-len).",
    ),
    click.option(
        "--replicas",
        type=Integer(1, MAX_REPLICAS),
        metavar="N",
        help="Boxes of this profile behind vllm-router: also print the router's flags and "
        "reviewbot's settings for the pool (docs/several-boxes.md).",
    ),
    json_option("Machine-readable plan."),
)
WORKLOAD_OPTIONS = options(
    click.option(
        "--workload",
        type=WorkloadSource(),
        metavar="SOURCE",
        help="Plan boxes and workers for a review workload instead of memory: SOURCE is "
        "`store` (its reviews over --window), `default` (the named default mix) or a JSON "
        "export's path (docs/capacity.md).",
    ),
    click.option(
        "--box",
        type=click.Choice(sorted(BOX_PROFILES)),
        default="h200",
        show_default=True,
        help="The box profile the workload is played on.",
    ),
    click.option(
        "--window",
        "window_days",
        type=Integer(1, MAX_WINDOW_DAYS),
        default=DEFAULT_WINDOW_DAYS,
        show_default=True,
        metavar="DAYS",
        help="Days of history --workload store reads.",
    ),
    click.option(
        "--boxes",
        "max_boxes",
        type=Integer(1, MAX_BOXES),
        default=4,
        show_default=True,
        help="Show 1..N boxes.",
    ),
    click.option(
        "--workers-per-box",
        type=Integer(1, MAX_NUM_SEQS),
        metavar="N",
        help="Workers per box in the table (default: the box's sequences).",
    ),
    click.option(
        "--p95-first-comment",
        "target",
        metavar="DURATION",
        help="Also find the fewest boxes, then workers, that keep the p95 time to first comment "
        "within it (300, 5m, 1.5h).",
    ),
    click.option(
        "--reviews-per-day",
        type=Integer(1, MAX_REVIEWS_PER_DAY),
        metavar="N",
        help="Play the workload's mix at N reviews a day, its busiest hour scaled alike.",
    ),
    click.option(
        "--export-workload",
        type=OutputPath(),
        metavar="PATH",
        help="Write --workload's reviews as a JSON export and exit.",
    ),
    config_option,
)


@click.command("capacity")
@CAPACITY_OPTIONS
@WORKLOAD_OPTIONS
@one_line_errors
def capacity_command(
    model_name: str | None,
    config_path: Path | None,
    gpu_name: str | None,
    replicas: int | None,
    as_json: bool,
    workload: str | None,
    config_file: str | None,
    export_workload: Path | None,
    **launch: Any,
) -> None:
    """Plan GPU memory for serving a model with vLLM: weights, KV cache, sequences that fit,
    the vllm serve command; with --replicas, the vllm-router flags and reviewbot settings for N
    such boxes. With --workload, the boxes and workers a review workload needs instead. Exit 3
    when the configuration does not fit, with what would (or the workload is too small)."""
    names = ("box", "window_days", "max_boxes", "workers_per_box", "reviews_per_day")
    mode = {k: launch.pop(k) for k in names}
    target = launch.pop("target")
    if workload is None:
        _refuse_workload_options((*names, "target", "export_workload"))
    else:
        from reviewbot.config import Settings, load_settings

        settings = load_settings(config_file=config_file) if workload == STORE else Settings()
        export = export_workload
        workload_capacity(workload, settings, **mode, target=target, export=export, as_json=as_json)
    if gpu_name is None:
        fail("Missing option '--gpu' (or give --workload)", EXIT_BAD_INPUT)
    if (model_name is None) == (config_path is None):
        fail(
            "give exactly one of --model NAME or --model-config config.json "
            f"(shipped models: {', '.join(shipped_model_names())})",
            EXIT_BAD_INPUT,
        )
    if model_name:
        shape = shipped_model(model_name)
    else:
        shape = load_config_file(Path(MODEL_CONFIG.check(str(config_path), "--model-config")))
    gpu, settings = find_gpu(gpu_name), LaunchSettings(**launch)
    plan = plan_capacity(shape, gpu, settings)
    alternatives = [] if plan.runnable else what_would_fit(shape, gpu, settings)
    per_box = launch.get("max_num_seqs") or plan.recommended.max_num_seqs  # what boxes run
    pool = router_plan(replicas, per_box) if replicas and plan.runnable else None
    if as_json:
        emit_json(
            {
                **plan.to_dict(),
                "would_fit": [dataclasses.asdict(a) for a in alternatives],
                **({"router": dataclasses.asdict(pool)} if pool else {}),
            }
        )
    else:
        print_capacity(plan, model_name or shape.name, shape.multimodal, alternatives, console())
        if pool is not None:
            print_router_plan(pool, console())
    sys.exit(EXIT_OK if plan.runnable else EXIT_DOES_NOT_FIT)


def _refuse_workload_options(names: tuple[str, ...]) -> None:
    """An option of --workload given without it: refused (exit 2), never silently ignored."""
    context = click.get_current_context()
    for name in names:
        source = context.get_parameter_source(name)
        if source not in (None, click.core.ParameterSource.DEFAULT):
            flag = "--" + {"window_days": "window", "max_boxes": "boxes", "target":
                           "p95-first-comment"}.get(name, name).replace("_", "-")  # fmt: skip
            fail(f"{flag} needs --workload", EXIT_BAD_INPUT)


# --- doctor ----------------------------------------------------------------------------------


def _source(config_file: str | None) -> str:
    chosen = config_file or os.environ.get("REVIEWBOT_CONFIG")
    variables = "REVIEWBOT_* variables"
    return f"{chosen} and {variables}" if chosen else f"defaults, the user config and {variables}"


@click.command("doctor")
@project_option("Also check that the token's user is at least Developer on this project.")
@click.option(
    "--model-only",
    is_flag=True,
    help="Check only the model server (no GitLab, no database): the health timer's probe.",
)
@click.option(
    "--verify-weights",
    is_flag=True,
    help="Also verify the model's weights again now (the directory and manifest of the last "
    "recorded run, REVIEWBOT_WEIGHTS_STATE_FILE) and record the result.",
)
@config_option
@json_option('Print {"checks": [...]} as JSON.')
def doctor_command(
    project: str | None,
    model_only: bool,
    verify_weights: bool,
    config_file: str | None,
    as_json: bool,
) -> None:
    """Check every dependency (settings, GitLab, the model server, the database) and say how
    to fix what fails. Exit 0 when nothing failed (warnings are fine), 1 otherwise."""
    from reviewbot.config import ConfigError, load_settings
    from reviewbot.ops.doctor import Check, Status, exit_code
    from reviewbot.ops.doctor_probes import DoctorOptions, run_doctor

    if project and model_only:
        fail("--project needs the GitLab checks: drop --model-only", EXIT_BAD_INPUT)
    try:
        settings = load_settings(config_file=config_file)
    except ConfigError as error:
        checks = [Check("settings", Status.FAIL, str(error), SETTINGS_FIX)]
    else:
        options = DoctorOptions(
            project=project,
            model_only=model_only,
            settings_source=_source(config_file),
            verify_weights=verify_weights,
        )
        what = "the model server" if model_only else "every dependency"
        with progress_steps(console(stderr=True), f"checking {what}", quiet=as_json) as say:
            checks = run_doctor(settings, options, say=say)
    if as_json:
        emit_json({"checks": [check.to_dict() for check in checks]})
    else:
        print_checks(checks, console(tables=True))
    sys.exit(exit_code(checks))


# --- loadtest --------------------------------------------------------------------------------


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
    if rate is not None:
        if requests is None and duration is None:
            duration = DEFAULT_OPEN_LOOP_DURATION_S
        if duration is not None and 1 / rate > duration:
            raise BadInputError(
                f"--rate {rate:g}: one request every {1 / rate:g} s on average does not fit "
                f"in --duration {duration:g} s"
            )
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


LOADTEST_OPTIONS = options(
    click.option(
        "--diffs",
        "diffs_dir",
        type=InputDir(),
        metavar="DIR",
        help="Replay every *.diff/*.patch in DIR.",
    ),
    git_range_option("Replay a range of a local repo."),
    repo_option,
    click.option(
        "--synthetic",
        "synthetic_tokens",
        type=Integer(1, MAX_CONTEXT_TOKENS),
        metavar="N",
        help=f"Synthetic diffs of N tokens each, up to the chunk budget (default: "
        f"{DEFAULT_SYNTHETIC_TOKENS} when no input is given).",
    ),
    click.option(
        "--concurrency",
        type=Integer(1, MAX_IN_FLIGHT),
        metavar="C",
        help="Closed loop: C requests in flight (default REVIEWBOT_LLM_TOTAL_CONCURRENCY or "
        "REVIEWBOT_CONCURRENCY).",
    ),
    click.option(
        "--rate",
        type=Number(MIN_RATE_PER_S, MAX_RATE_PER_S),
        metavar="R",
        help="Open loop: R requests per second on average, Poisson arrivals.",
    ),
    click.option(
        "--duration",
        type=Number(0, MAX_WAIT_S, low_open=True),
        metavar="S",
        help="Stop sending after S seconds.",
    ),
    click.option(
        "--requests",
        type=Integer(1, MAX_REQUESTS),
        metavar="N",
        help=f"Stop after N requests (default {DEFAULT_ROUNDS} x concurrency; open loop: "
        f"{DEFAULT_OPEN_LOOP_DURATION_S:g} s).",
    ),
    click.option(
        "--slo-ttft-p95-ms",
        type=Number(0, MAX_SLO_MS, low_open=True),
        default=DEFAULT_SLO_TTFT_P95_MS,
        show_default=True,
        help="First-token p95 must be at most this.",
    ),
    click.option(
        "--slo-decode-tps",
        type=Number(0, MAX_DECODE_TOKENS_PER_S),
        default=DEFAULT_SLO_DECODE_TOKENS_PER_S,
        show_default=True,
        help="Per-request decode tokens/s p50 must be at least this.",
    ),
    click.option(
        "--slo-error-rate",
        type=Number(),  # finite; its range is judged with the other targets (_slo)
        default=DEFAULT_SLO_ERROR_RATE,
        show_default=True,
        help="Share of failed requests must be at most this.",
    ),
    click.option(
        "--seed",
        type=Integer(0, INT64_MAX),
        default=0,
        show_default=True,
        help="Arrivals and synthetic diffs.",
    ),
    base_url_option("Model server (default $REVIEWBOT_LLM_BASE_URL)."),
    model_option,
    config_option,
    json_option("Machine-readable report."),
)


@click.command("loadtest")
@LOADTEST_OPTIONS
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
    from reviewbot.chunking import Budget
    from reviewbot.ops.router_probes import VERSION_SUFFIX, pool_load, pool_reading
    from reviewbot.review import review_options
    from reviewbot.tokens import local_counter

    slo = _slo(slo_ttft_p95_ms, slo_decode_tps, slo_error_rate)
    dirs = Path(diffs_dir) if diffs_dir is not None else None
    inputs = LoadInputs(dirs, git_range, repo, synthetic_tokens, seed)
    with App.from_config(config_file, {"llm_base_url": base_url, "llm_model": model}) as app:
        schedule = _schedule(app.settings, concurrency, rate, requests, duration, seed)
        runner, counter = app.model(), local_counter(app.settings.llm_model)
        info = runner.server_info()
        review = review_options(app.settings)
        max_model_len = review.max_model_len or info.max_model_len or Budget().max_model_len
        load = plan_load(inputs, runner, counter, review, max_model_len)
        root_url = app.settings.llm_base_url.rstrip("/").removesuffix(VERSION_SUFFIX)
        before = pool_reading(app.settings, root_url)  # None: no router in front
        run = _run_load(app, runner, load, review, schedule, quiet=as_json)
        answered = sum(sample.error is None for sample in run.samples)
        pool = None if before is None else pool_load(app.settings, before, answered)
    described = {**schedule.describe(), "input": load.label, "model": info.model}
    report = summarize(run.samples, run.seconds, load.chunks_per_review, slo, described, pool)
    if as_json:
        emit_json(report.to_dict())
    else:
        print_load_report(report, console(tables=True))
    sys.exit(EXIT_OK if report.slo_met else EXIT_SLO_MISSED)


def _run_load(
    app: Any, runner: Any, load: PlannedLoad, review: Any, schedule: Schedule, quiet: bool
) -> Any:
    """Send the load with a progress bar on a terminal (stderr)."""
    from reviewbot.prompts import tool_schemas

    with progress_bar(console(stderr=True), quiet=quiet) as progress:
        task = progress.add_task("requests", total=schedule.requests)
        return run_load(
            runner.backend,
            prompt_cycle(load.planned, review.plan_options),
            tool_schemas(),
            schedule,
            max_tokens=app.settings.max_output_tokens,
            temperature=runner.settings.temperature,
            on_sample=lambda _: progress.advance(task),
        )
