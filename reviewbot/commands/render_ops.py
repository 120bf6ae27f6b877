"""How the model-server commands show their results to people: `reviewbot capacity`,
`reviewbot doctor` and `reviewbot loadtest` tables (their ``--json`` is the library's dict).

Owns: the layout of those tables and lines; every string from the data (a model name, a check's
finding, a server's error) as `terminal.data`, the own styles as Text with a style. Must not:
compute a figure the library does not give, touch the network, or exit.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reviewbot.commands.render import add_row
from reviewbot.commands.terminal import cell, data
from reviewbot.ops.alternatives import MAX_SUGGESTED_GPUS, Alternative
from reviewbot.ops.capacity import CapacityPlan
from reviewbot.ops.doctor import Check, Status, tally
from reviewbot.ops.loadtest import LoadReport
from reviewbot.ops.router import RouterPlan
from reviewbot.ops.vllm_command import vllm_serve_lines

__all__ = ["print_capacity", "print_checks", "print_load_report"]

# TTFT queue positions shown in the table (all of them are in --json).
SHOWN_QUEUE_POSITIONS = (1, 2, 4, 8, 16, 32, 64)
STATUS_STYLES = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


# --- capacity --------------------------------------------------------------------------------


def _capacity_rows(plan: CapacityPlan) -> list[tuple[str, str | Text]]:
    recommended = plan.recommended
    rows = [
        ("quantization", plan.quantization),
        ("weights per GPU", f"{plan.weights_gib_per_gpu:.2f} GiB"),
        ("activation + CUDA graph reserve", f"{plan.reserve_gib_per_gpu:.2f} GiB"),
        (
            "KV cache per token per GPU",
            f"{plan.kv_bytes_per_token_per_gpu:,} bytes (full-attention layers only)",
        ),
        (
            "linear-attention state per sequence",
            f"{plan.state_bytes_per_sequence_per_gpu / 2**20:,.1f} MiB per GPU",
        ),
        ("vLLM block size", f"{plan.vllm_block_size} tokens"),
        (
            "KV cache per GPU",
            f"{plan.kv_cache_gib_per_gpu:.2f} GiB at utilization {plan.gpu_memory_utilization}",
        ),
        (
            f"sequences of {plan.max_model_len:,} tokens",
            f"{plan.max_sequences_at_max_model_len:.2f}",
        ),
        ("fits", "yes" if plan.fits else Text("no", style="red")),
        (
            "recommended",
            f"--max-num-seqs {recommended.max_num_seqs} --gpu-memory-utilization "
            f"{recommended.gpu_memory_utilization} --dtype {recommended.dtype} "
            f"--max-num-batched-tokens {recommended.max_num_batched_tokens}",
        ),
        ("why that many sequences", recommended.max_num_seqs_reason),
    ]
    if plan.ttft_estimate_s:
        estimate = plan.ttft_estimate_s
        queue = estimate["by_queue_position_s"]
        shown = ", ".join(
            f"#{k}: {queue[k - 1]:.1f} s" for k in SHOWN_QUEUE_POSITIONS if k <= len(queue)
        )
        rows.append(
            (
                f"first token, {estimate['prompt_tokens']:,}-token prompt (estimate)",
                f"alone {estimate['alone_s']:.1f} s; queued {shown}",
            )
        )
    return rows


def print_capacity(
    plan: CapacityPlan,
    model: str,
    multimodal: bool,
    alternatives: list[Alternative],
    console: Console,
) -> None:
    """The plan as a table, its warnings, and the ``vllm serve`` command to start with (one
    flag a line, pasteable); when the plan is not runnable, what would fit instead."""
    table = Table(
        title=data(f"{plan.model} on {plan.tensor_parallel_size}x {plan.gpu}"), show_header=False
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in _capacity_rows(plan):
        table.add_row(cell(what), value if isinstance(value, Text) else cell(value))
    console.print(table)
    for warning in plan.warnings:
        console.print(Text.assemble(("warning:", "yellow"), " ", data(warning)))
    if plan.runnable:
        console.print(data("start with:"))
        console.print(data(vllm_serve_lines(model, plan, multimodal)), soft_wrap=True)
        return
    if not alternatives:
        console.print(
            Text.assemble(
                ("does not fit:", "bold red"),
                " nor with a shorter context, a smaller quantization or up to "
                f"{MAX_SUGGESTED_GPUS} GPUs of this kind",
            )
        )
        return
    console.print(
        Text.assemble(
            ("does not fit as given;", "bold red"),
            " it would fit with one of these changes (run reviewbot capacity with it):",
        )
    )
    for alternative in alternatives:
        console.print(data(f"  {alternative.flags}  ({alternative.why})"), soft_wrap=True)


def print_router_plan(pool: RouterPlan, console: Console) -> None:
    """The vllm-router flags and reviewbot's settings for ``pool.replicas`` boxes."""
    console.print(data(f"{pool.replicas} box(es) behind vllm-router (deploy/vllm-router/):"))
    console.print(data("vllm-router " + " \\\n    ".join(pool.flags)), soft_wrap=True)
    for name, value in pool.settings.items():
        console.print(data(f"{name}={value}"), soft_wrap=True)
    for note in pool.notes:
        console.print(data(f"note: {note}"))


# --- doctor ----------------------------------------------------------------------------------


def print_checks(checks: list[Check], console: Console) -> None:
    table = Table("status", "check", "found", "fix")
    for check in checks:
        style = STATUS_STYLES[check.status]
        table.add_row(
            Text(check.status.value, style=style),
            cell(check.name),
            cell(check.detail),
            cell(check.fix),
        )
    console.print(table)
    console.print(data(tally(checks)))


# --- loadtest --------------------------------------------------------------------------------


def _figure(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


def _load_rows(report: LoadReport) -> list[tuple[str, str]]:
    ttft, e2e, decode = report.ttft_ms, report.e2e_ms, report.decode_tokens_per_s
    cache = report.prefix_cache_hit_rate
    return [
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
            f"chunks per review, around the clock at this load{_pool_words(report.pool)})",
        ),
        ("deep reviews per day", report.deep.describe()),
    ]


def _pool_words(pool: dict | None) -> str:
    return "" if pool is None else f"; the whole pool of {pool['boxes']} box(es)"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def print_pool(pool: dict, console: Console) -> None:
    """Per box behind the router, from its own /metrics; a box that could not be read is named
    with the reason, never shown as 0."""
    table = Table(
        "box",
        "requests",
        "TTFT p50 ms",
        "TTFT p95 ms",
        "prompt tokens",
        "cached",
        "prefix-cache queries / hits",
        title=data(
            f"{pool['boxes']} box(es) behind vllm-router at {pool['router']} (their /metrics; "
            "TTFT at bucket resolution: the bucket's upper bound)"
        ),
    )
    for box in pool["per_box"]:
        if box["error"] is not None:
            add_row(table, box["url"], f"unreadable: {box['error']}", "", "", "", "", "")
            continue
        ttft = box["ttft_ms"]
        add_row(
            table,
            box["url"],
            box["requests"],
            _figure(ttft["p50"]),
            _figure(ttft["p95"]),
            _figure(box["prompt_tokens"]),
            _share(box["cache_share"]),
            f"{_figure(box['prefix_cache_queries'])} / {_figure(box['prefix_cache_hits'])}",
        )
    console.print(table)
    share = pool["cache_share_by_boxes"]
    cache = (
        "the pool's cache share is unknown (a box unread, or without "
        "vllm:prompt_tokens_cached_total)"
        if share is None
        else f"{share:.1%} of their prompt tokens from their caches"
    )
    console.print(
        data(
            f"pool: {pool['requests_counted_by_boxes']} requests counted by "
            f"{pool['boxes_read']} of {pool['boxes']} box(es); {cache}"
        )
    )


def print_load_report(report: LoadReport, console: Console) -> None:
    """The figures, TTFT by queue position, the first errors and each SLO's verdict."""
    load = report.load
    loop = (
        f"open loop, Poisson arrivals at {load.get('rate_per_s')}/s"
        if load.get("mode") == "open"
        else f"closed loop, {load.get('concurrency')} in flight"
    )
    table = Table(title=data(f"{load.get('input')}: {loop}"), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in _load_rows(report):
        add_row(table, what, value)
    console.print(table)
    if report.pool is not None:
        print_pool(report.pool, console)
    positions = Table("queue position", "requests", "TTFT p50 ms", "TTFT p95 ms")
    for row in report.ttft_by_queue_position:
        add_row(
            positions,
            row["position"],
            row["requests"],
            f"{row['p50_ms']:,.0f}",
            f"{row['p95_ms']:,.0f}",
        )
    console.print(positions)
    console.print(
        data(f"TTFT p95 meets the SLO up to queue position {report.queue_depth_within_ttft_slo}")
    )
    for error in report.first_errors:
        console.print(Text.assemble(("error:", "red"), " ", data(error)))
    for item in report.slo:
        verdict = Text("met", "green") if item["pass"] else Text("missed", "bold red")
        figures = f"{_figure(item['value'], digits=3)} (target {item['target']:g})"
        console.print(Text.assemble(data(f"SLO {item['name']}: {figures} "), verdict))
