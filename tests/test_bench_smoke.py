"""The benchmark's synthetic diff generator and planner run end to end at a tiny size."""

from __future__ import annotations

import ast

import pytest

from reviewbot.chunking import Budget, plan
from reviewbot.diff import parse_git_diff
from reviewbot.tokens import local_counter
from tests.bench.bench_plan import RunFigures, generate_diff, run_plan
from tests.bench.bench_scope import edit_sources

SMOKE_FILES = 20
SMOKE_LINES = 500


def _assert_complete(figures: RunFigures) -> None:
    coverage = figures.result.coverage
    skipped = sum(s.changed_lines for s in coverage.skipped)
    assert coverage.changed_lines_covered + skipped == coverage.changed_lines_total
    assert coverage.files_reviewed + len(coverage.skipped) == coverage.files_total
    assert figures.result.chunks


def test_generator_is_deterministic_and_sized_as_asked() -> None:
    first = generate_diff(SMOKE_FILES, SMOKE_LINES, seed=3)
    again = generate_diff(SMOKE_FILES, SMOKE_LINES, seed=3)
    other = generate_diff(SMOKE_FILES, SMOKE_LINES, seed=4)
    assert first.text == again.text
    assert first.text != other.text
    files = parse_git_diff(first.text)
    assert len(files) == SMOKE_FILES
    assert not any(file.warnings for file in files)
    assert sum(file.changed_count for file in files) == first.changed_lines


def test_head_contents_agree_with_the_diff() -> None:
    synthetic = generate_diff(SMOKE_FILES, SMOKE_LINES)
    for file in parse_git_diff(synthetic.text):
        head = synthetic.contents.get(file.new_path)
        if head is None:
            continue
        head_lines = head.splitlines()
        for line in file.lines():
            if line.new_no is not None:
                assert head_lines[line.new_no - 1] == line.text


def test_plan_covers_every_changed_line_with_and_without_contents() -> None:
    synthetic = generate_diff(SMOKE_FILES, SMOKE_LINES)
    counter = local_counter()
    _assert_complete(run_plan(synthetic.text, counter))
    _assert_complete(run_plan(synthetic.text, counter, synthetic.contents))


def test_scope_benchmark_input_is_real_code_that_still_parses() -> None:
    edited = edit_sources(files=3, lines=60, seed=3)
    files = parse_git_diff(edited.diff)
    assert len(files) == 3 and edited.changed_lines > 0
    for file in files:
        ast.parse(edited.contents[file.new_path])
        head_lines = edited.contents[file.new_path].splitlines()
        for line in file.lines():
            if line.new_no is not None:
                assert head_lines[line.new_no - 1] == line.text
    result = plan(files, Budget(), local_counter(), contents=edited.contents)
    assert result.coverage.changed_lines_covered == result.coverage.changed_lines_total
    assert result.totals()["scoped_hunks"] > 0


@pytest.mark.slow
def test_the_incremental_benchmark_meets_its_targets_at_a_small_size() -> None:
    """Not a timing: the push reviews one file, the rebase and the same head cost no call."""
    from tests.bench.bench_incremental import main

    assert main(["--files", "6", "--lines", "120"]) == 0


@pytest.mark.slow
def test_tools_benchmark_runs_and_only_tools_find_the_cross_file_bugs() -> None:
    from tests.bench.bench_tools import HEADER, run_mode, synthetic_mr
    from tests.fakes.vllm_server import LatencyModel

    synthetic = synthetic_mr(files=8)
    off = run_mode(synthetic, False, LatencyModel())
    on = run_mode(synthetic, True, LatencyModel())
    assert len(synthetic.planted) == 2
    assert off.found_planted == 0 and on.found_planted == len(synthetic.planted)
    assert len(on.result.calls) > len(off.result.calls)
    assert on.result.complete and off.result.complete
    assert len(on.row().split()) == len(HEADER.splitlines()[0].split())


@pytest.mark.slow
def test_unused_tools_keep_the_chunks_of_tools_off_and_cost_only_their_schemas() -> None:
    """Issue 34 part 2, on the tool-cost benchmark's large MR at a smaller size: with the
    tools on and never called, the chunks and calls are those of tools off, and the prompt
    tokens at most 5% more; when the model calls tools, every chunk still gets reviewed."""
    from tests.bench.bench_tool_cost import GOAL, MergeRequest, run_mode
    from tests.bench.bench_tools import synthetic_mr

    synthetic = synthetic_mr(files=150)
    mr = MergeRequest("large", parse_git_diff(synthetic.diff), synthetic.head)
    off, unused, used = (run_mode([mr], mode) for mode in ("off", "on-unused", "on-used"))
    assert off.chunks == unused.chunks >= 2 and off.calls == unused.calls == off.chunks
    assert unused.prompt <= GOAL * off.prompt
    assert used.rounds > 0 and used.chunks >= off.chunks and used.findings > 0


@pytest.mark.slow
def test_the_compact_tool_costs_one_chunk_reviews_at_most_five_percent_when_unused() -> None:
    """Issue 34 part 2 on the small MRs, where a schema's tokens weigh most: the 26 one-chunk
    eval items with the compact tool offered and never called cost at most 5% more prompt
    tokens than tools off (the four typed schemas cost about 27%), and with the model looking
    things up through it, the bugs whose evidence is in another file are found."""
    from tests.bench.bench_tool_cost import GOAL, eval_items, run_mode

    items = eval_items()
    off, unused, typed = (run_mode(items, m) for m in ("off", "on-unused", "typed-unused"))
    assert off.calls == unused.calls == len(items) and unused.rounds == 0
    assert unused.prompt <= GOAL * off.prompt < typed.prompt
    used = run_mode(items, "on-used")
    assert used.rounds > 0 and used.findings > off.findings


@pytest.mark.slow
def test_the_repository_benchmark_runs_and_its_cache_asks_gitlab_for_no_file() -> None:
    """Not a timing: through the API every head file is a request; through the cache none is,
    two fetches serve the first review and the no-op re-run fetches nothing."""
    from tests.bench.bench_repo import by_run, measure_all

    figures = by_run(measure_all(files=6, lines=2))
    api, cache = figures[("api", "first review")], figures[("cache", "first review")]
    assert api.counts["raw"] == 6 and api.counts["fetches"] == 0
    assert cache.counts["raw"] == 0 and cache.counts["fetches"] == 2
    assert figures[("cache", "no-op re-run")].counts["fetches"] == 0
    assert figures[("cache", "no-op re-run")].model_calls == 0
    assert all(not row.warnings for row in figures.values())
