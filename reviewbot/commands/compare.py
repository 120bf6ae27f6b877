"""`reviewbot eval DATASET --compare A.toml B.toml ...`: the wiring and the output.

Owns: building one model client per configuration (same server, the configuration's settings),
the progress bar per configuration, storing the comparison, and printing it (tables for
people, one document with ``--json``). The work is `reviewbot.compare`; the `eval` command
(reviewbot/commands/accuracy.py) calls :func:`compare_command_run`.

Must not: score, pair or judge anything itself (reviewbot.compare does), or load the database
layer before the configurations have been read and checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reviewbot.commands.common import emit_json
from reviewbot.commands.progress import progress_bar
from reviewbot.commands.render import add_row, ratio, score_cells
from reviewbot.commands.terminal import console, data

__all__ = ["compare_command_run", "print_comparison"]


def _reviewers(closers: list[Any]) -> Callable[[Any], Callable[[Any], Any]]:
    """The item reviewer of a configuration: a model client of its own settings (closed at the
    end through ``closers``)."""
    from reviewbot.eval import item_reviewer
    from reviewbot.llm.factory import model_from_settings

    def reviewer(configuration: Any) -> Callable[[Any], Any]:
        llm = model_from_settings(configuration.settings)
        closers.append(llm)
        return item_reviewer(llm, configuration.settings)

    return reviewer


def compare_command_run(
    dataset_dir: Path,
    config_files: Sequence[Path],
    *,
    tolerance: int,
    limit: int | None,
    as_json: bool,
    config_file: str | None,
    overrides: Mapping[str, Any],
) -> None:
    """Read the dataset and every configuration (errors before any model call), review the
    items under each, store and print the comparison; an incomplete configuration ends the
    command with EvalIncompleteError (exit 1) once the rest is printed and stored."""
    from reviewbot.app import App
    from reviewbot.compare import (
        compare,
        comparison_json,
        comparison_rows,
        pair_results,
        read_configurations,
    )
    from reviewbot.eval import EvalIncompleteError, load_dataset

    items = load_dataset(dataset_dir, limit)
    dataset = str(dataset_dir.resolve())
    closers: list[Any] = []
    with App.from_config(config_file, overrides) as app:
        configurations = read_configurations(config_files, app.settings)
        store = app.store  # a database that cannot be opened fails before any model call
        started = datetime.now(UTC)
        try:
            with progress_bar(console(stderr=True), quiet=as_json) as bar:
                tasks = {
                    c.name: bar.add_task(f"{c.name}: reviewing items", total=len(items))
                    for c in configurations
                }
                results = compare(
                    dataset,
                    items,
                    configurations,
                    _reviewers(closers),
                    tolerance=tolerance,
                    on_item=lambda configuration, _: bar.advance(tasks[configuration.name]),
                )
        finally:
            for llm in closers:
                llm.close()
        pairs = pair_results(results)
        comparison, runs = comparison_rows(dataset, results, pairs, started, datetime.now(UTC))
        comparison_id, run_ids = store.record_eval_comparison(comparison, [row for _, row in runs])
    for (index, _), run_id in zip(runs, run_ids, strict=True):
        results[index].run_id = run_id
    document = comparison_json(dataset, tolerance, results, pairs, comparison_id)
    if as_json:
        emit_json(document)
    else:
        print_comparison(document, console())
    incomplete = [entry.incomplete for entry in results if entry.incomplete]
    if incomplete:
        raise EvalIncompleteError(f"not every configuration was scored: {incomplete[0]}")


def _per_item(value: float) -> str:
    return f"{value:,.1f}"


def _scores_table(configurations: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(
        "configuration", "TP", "FP", "FN", "precision", "recall", "F1", "mean F1", "voted out"
    )
    for entry in configurations:
        if not entry["complete"]:
            add_row(table, entry["name"], "incomplete", *[""] * 7)
            continue
        out = entry.get("voted_out") or {}
        add_row(
            table,
            entry["name"],
            *score_cells(entry["total"]),
            ratio(entry["mean"]["f1"]),
            _voted_out(out),
        )
    return table


def _voted_out(out: Mapping[str, Any]) -> str:
    """``5 (1 TP)``: findings a vote kept off, and how many would have been true positives."""
    if not out.get("findings"):
        return "0"
    return f"{out['findings']} ({out['would_be_true_positives']} TP)"


def _cost_table(configurations: Sequence[Mapping[str, Any]]) -> Table:
    table = Table("per item", "calls", "prompt tokens", "cached", "output", "thinking", "wall s")
    for entry in configurations:
        if not entry["complete"]:
            continue
        cost = entry["cost_per_item"]
        add_row(
            table,
            entry["name"],
            _per_item(cost["model_calls"]),
            _per_item(cost["prompt_tokens"]),
            _per_item(cost["cached_tokens"]),
            _per_item(cost["completion_tokens"]),
            _per_item(cost.get("reasoning_tokens", 0)),
            f"{cost['wall_s']:.2f}",
        )
    return table


def _sources_table(configurations: Sequence[Mapping[str, Any]]) -> Table | None:
    """Findings by source (model, analyzer, both) per configuration, the analyzer findings
    merged with the model's, and the digest tokens the prompts carried; None when no
    configuration had an analyzer finding (every finding is the model's)."""
    complete = [entry for entry in configurations if entry["complete"]]
    if not any(entry["analyzers"]["findings"] for entry in complete):
        return None
    heads = [f"{source} TP/FP" for source in ("model", "analyzer", "both")]
    table = Table("by source", *heads, "merged", "digest tokens")
    for entry in complete:
        cells = [f"{row['tp']}/{row['fp']}" for row in entry["sources"]]
        tally = entry["analyzers"]
        add_row(table, entry["name"], *cells, tally["merged"], tally["digest_tokens"])
    return table


def _pairs_table(pairs: Sequence[Mapping[str, Any]]) -> Table:
    table = Table("pair", "mean ΔF1", "95% interval", "improved", "worsened", "same")
    for pair in pairs:
        interval = pair["interval"]
        add_row(
            table,
            f"{pair['b']} vs {pair['a']}",
            "" if pair["mean_f1_difference"] is None else f"{pair['mean_f1_difference']:+.3f}",
            "" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]",
            pair["improved"],
            pair["worsened"],
            pair["unchanged"],
        )
    return table


def _changes_table(pairs: Sequence[Mapping[str, Any]]) -> Table | None:
    """The items whose F1 differs, per pair (the unchanged ones are only counted)."""
    table = Table("pair B vs A", "item", "F1 of A", "F1 of B", "ΔF1")
    for pair in pairs:
        for row in pair["differences"]:
            if row["difference"]:
                add_row(
                    table,
                    f"{pair['b']} vs {pair['a']}",
                    row["item"],
                    ratio(row["a_f1"]),
                    ratio(row["b_f1"]),
                    f"{row['difference']:+.3f}",
                )
    return table if table.row_count else None


def print_comparison(document: Mapping[str, Any], out: Console) -> None:
    """Scores and cost per configuration, the items whose F1 differs in each pair, then each
    pair with its interval and verdict."""
    out.print(_scores_table(document["configurations"]))
    out.print(_cost_table(document["configurations"]))
    sources = _sources_table(document["configurations"])
    if sources is not None:
        out.print(sources)
    changes = _changes_table(document["pairs"])
    if changes is not None:
        out.print(changes)
    out.print(_pairs_table(document["pairs"]))
    for pair in document["pairs"]:
        out.print(data(pair["verdict"]))
    for entry in document["configurations"]:
        if not entry["complete"]:
            out.print(data(f"{entry['name']} is incomplete: {entry['incomplete']}"))
    first = next((c for c in document["configurations"] if c["complete"]), None)
    model = f"model {first['model']}, prompt {first['prompt_version']}, " if first else ""
    out.print(
        data(
            f"{model}±{document['tolerance']} lines; F1 differences per item, paired bootstrap "
            f"95% interval; stored as eval comparison {document['comparison_id']}"
        )
    )
