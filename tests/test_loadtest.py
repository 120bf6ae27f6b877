"""``reviewbot loadtest`` against the fake vLLM's latency model, and its figures on plain data.

The latency models are chosen far on either side of the SLO targets (a pass at 1,000 decode
tokens/s against a 150 target, a miss at 50), so the verdicts do not depend on this machine's
speed; the tests never compare measured times with each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reviewbot.chunking import Budget, plan
from reviewbot.commands import main
from reviewbot.ops.loadtest import (
    SLO,
    ReviewInput,
    Sample,
    percentile,
    summarize,
    synthetic_input,
)
from reviewbot.tokens import local_counter
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.mr_world import git, make_repo

FAST = LatencyModel(ttft_base_s=0.01, decode_s_per_token=0.001, max_num_seqs=4)
SLOW_DECODE = LatencyModel(ttft_base_s=0.01, decode_s_per_token=0.02, max_num_seqs=4)
JSON_KEYS = {
    "requests",
    "errors",
    "ttft_ms",
    "decode_tokens_per_s",
    "aggregate_tokens_per_s",
    "reviews_per_day",
    "slo",
    "e2e_latency_ms",
    "prefix_cache_hit_rate",
    "ttft_by_queue_position",
}
SMALL_DIFF_TOKENS = 400
# Far above what the fake takes to send its first event, so the TTFT it adds is unmistakable.
FIRST_OUTPUT_DELAY_S = 0.3
ONE_LINE_TOKENS = 16


def loadtest(server: FakeVLLM, *args: str) -> tuple[int, dict[str, Any], str]:
    env = {
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_LLM_BASE_URL": server.base_url,
        "REVIEWBOT_ENABLE_THINKING": "false",
    }
    result = CliRunner().invoke(main, ["loadtest", "--json", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    report = json.loads(result.stdout) if result.exit_code in (0, 3) else {}
    return result.exit_code, report, result.output


def slo(report: dict[str, Any]) -> dict[str, bool]:
    return {item["name"]: item["pass"] for item in report["slo"]}


# --- against the fake ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_fast_server_meets_the_slo() -> None:
    with FakeVLLM(latency=FAST) as server:
        code, report, _ = loadtest(
            server, "--synthetic", str(SMALL_DIFF_TOKENS), "--concurrency", "4", "--requests", "8"
        )
        bodies = list(server.requests)
    assert code == 0
    assert set(report) >= JSON_KEYS
    assert (
        set(report["ttft_ms"]) == {"p50", "p95", "p99"} and "p50" in report["decode_tokens_per_s"]
    )
    assert report["requests"] == 8 and report["errors"] == 0
    assert slo(report) == {"ttft_p95_ms": True, "decode_tokens_per_s_p50": True, "error_rate": True}
    assert all(isinstance(item["target"], float) for item in report["slo"])
    assert report["load"] == {
        "mode": "closed",
        "concurrency": 4,
        "requests": 8,
        "duration_s": None,
        "input": f"synthetic diff of {SMALL_DIFF_TOKENS} tokens",
        "model": server.model,
    }
    assert report["reviews_per_day"] > 0 and report["chunks_per_review"] == 1
    # the bot's real prompts: its system prompt, its tool, a diff in its chunk format
    assert len(bodies) == 8
    assert all(b["tools"][0]["function"]["name"] == "report_finding" for b in bodies)
    assert all(b["stream"] for b in bodies)
    assert "Diff to review: part 1 of 1" in bodies[0]["messages"][-1]["content"]


@pytest.mark.slow
def test_slow_decoding_misses_the_slo_with_exit_3() -> None:
    with FakeVLLM(latency=SLOW_DECODE) as server:
        code, report, _ = loadtest(
            server, "--synthetic", str(SMALL_DIFF_TOKENS), "--concurrency", "4", "--requests", "4"
        )
    assert code == 3
    assert slo(report) == {
        "ttft_p95_ms": True,
        "decode_tokens_per_s_p50": False,
        "error_rate": True,
    }
    assert report["decode_tokens_per_s"]["p50"] < 150


@pytest.mark.slow
def test_a_slow_first_token_misses_the_ttft_slo() -> None:
    with FakeVLLM(latency=FAST) as server:
        code, report, _ = loadtest(
            server,
            "--synthetic",
            str(SMALL_DIFF_TOKENS),
            "--requests",
            "2",
            "--slo-ttft-p95-ms",
            "0.001",
        )
    assert code == 3 and slo(report)["ttft_p95_ms"] is False


@pytest.mark.slow
def test_ttft_waits_for_the_first_output_not_the_role_event() -> None:
    """TTFT is taken at the first streamed byte of content, reasoning or a tool call: vLLM's
    role-only first event (``"content": ""``) does not count, so the parser's wait after it
    (here FIRST_OUTPUT_DELAY_S) is part of every TTFT, and misses an SLO shorter than it."""
    latency = LatencyModel(first_output_delay_s=FIRST_OUTPUT_DELAY_S, max_num_seqs=1)
    delay_ms = FIRST_OUTPUT_DELAY_S * 1000
    with FakeVLLM(latency=latency) as server:
        code, report, _ = loadtest(
            server,
            "--synthetic",
            str(SMALL_DIFF_TOKENS),
            "--concurrency",
            "1",
            "--requests",
            "2",
            "--slo-ttft-p95-ms",
            str(delay_ms / 2),
        )
    assert report["errors"] == 0
    assert report["ttft_ms"]["p50"] >= delay_ms
    assert code == 3 and slo(report)["ttft_p95_ms"] is False


@pytest.mark.slow
def test_errors_count_against_the_error_rate() -> None:
    with FakeVLLM(tool_parser=False) as server:
        code, report, _ = loadtest(server, "--synthetic", "300", "--requests", "3")
    assert code == 3
    assert report["errors"] == 3 and report["error_rate"] == 1.0
    assert slo(report)["error_rate"] is False
    assert "--enable-auto-tool-choice" in report["first_errors"][0]


@pytest.mark.slow
def test_open_loop_sends_poisson_arrivals() -> None:
    with FakeVLLM(latency=FAST) as server:
        code, report, _ = loadtest(
            server, "--synthetic", "300", "--rate", "50", "--requests", "6", "--seed", "3"
        )
        sent = len(server.requests)
    assert code == 0
    assert report["requests"] == 6 == sent
    assert report["load"]["mode"] == "open" and report["load"]["arrivals"] == "poisson"
    assert report["load"]["rate_per_s"] == 50.0


@pytest.mark.slow
def test_ttft_is_reported_by_queue_position() -> None:
    with FakeVLLM(latency=LatencyModel(ttft_base_s=0.01, max_num_seqs=1)) as server:
        _, report, _ = loadtest(
            server, "--synthetic", "300", "--concurrency", "3", "--requests", "3"
        )
    rows = report["ttft_by_queue_position"]
    assert sum(row["requests"] for row in rows) == 3
    assert {row["position"] for row in rows} <= {1, 2, 3} and rows[0]["position"] == 1
    assert all(row["p95_ms"] >= row["p50_ms"] > 0 for row in rows)


@pytest.mark.slow
def test_cache_reuse_comes_from_cached_tokens() -> None:
    # one at a time: every request after the first finds the tools and system prompt cached
    with FakeVLLM(latency=FAST) as server:
        _, report, _ = loadtest(
            server, "--synthetic", "300", "--concurrency", "1", "--requests", "3"
        )
        stats = server.stats_after(completed=3)  # counted after the answers were sent
    assert report["prefix_cache_hit_rate"] == pytest.approx(
        stats.cached_tokens / stats.prompt_tokens, abs=1e-4
    )
    assert 0 < report["prefix_cache_hit_rate"] < 1
    with FakeVLLM(latency=FAST, report_cached_tokens=False) as server:
        _, report, _ = loadtest(server, "--synthetic", "300", "--requests", "2")
    assert report["prefix_cache_hit_rate"] is None


@pytest.mark.slow
def test_a_git_range_is_replayed_as_its_review_would_send_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with FakeVLLM(latency=FAST) as server:
        code, report, _ = loadtest(
            server,
            "--git",
            "main...feature",
            "--repo",
            str(repo),
            "--requests",
            "4",
            "--concurrency",
            "2",
        )
        bodies = list(server.requests)
    assert code == 0 and report["load"]["input"] == "main...feature"
    diffs = [b["messages"][-1]["content"] for b in bodies]
    assert all('<file path="app.py"' in diff and "eval(text)" in diff for diff in diffs)
    # each pass is a new merge request: its title names the pass
    assert any("main...feature (load test pass 2)" in diff for diff in diffs)


@pytest.mark.slow
def test_a_directory_of_diffs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    diffs = tmp_path / "diffs"
    diffs.mkdir()
    (diffs / "one.diff").write_text(git(repo, "diff", "main...feature", "--", "app.py") + "\n")
    (diffs / "two.patch").write_text(git(repo, "diff", "main...feature", "--", "util.py") + "\n")
    (diffs / "notes.txt").write_text("not a diff")
    with FakeVLLM(latency=FAST) as server:
        code, report, _ = loadtest(server, "--diffs", str(diffs), "--requests", "4")
        paths = [b["messages"][-1]["content"] for b in server.requests]
    assert code == 0 and report["load"]["input"] == "2 diffs"
    assert sum('<file path="app.py"' in p for p in paths) == 2
    assert sum('<file path="util.py"' in p for p in paths) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--synthetic", "500000"], "more than the"),
        (["--synthetic", "100", "--git", "a..b"], "at most one of"),
        (["--rate", "1", "--concurrency", "2"], "not both"),
        (["--concurrency", "1000"], "between 1 and 100"),
        (["--concurrency", "0"], "between 1 and 100, got 0"),
        (["--diffs", "/nonexistent"], "not a directory"),
        (["--slo-error-rate", "2"], "SLO targets"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    with FakeVLLM() as server:
        env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_LLM_BASE_URL": server.base_url}
        result = CliRunner().invoke(main, ["loadtest", *args], env=env)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_an_unreachable_server_is_one_line_and_exit_1() -> None:
    with FakeVLLM() as server:
        gone = server.base_url
    result = CliRunner().invoke(
        main,
        ["loadtest", "--requests", "1"],
        env={"REVIEWBOT_CONFIG": "", "REVIEWBOT_LLM_BASE_URL": gone},
    )
    assert result.exit_code == 1 and "cannot reach the model server" in result.stderr


@pytest.mark.slow
def test_the_table_for_people() -> None:
    with FakeVLLM(latency=FAST) as server:
        env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_LLM_BASE_URL": server.base_url}
        result = CliRunner().invoke(
            main, ["loadtest", "--synthetic", "300", "--requests", "2"], env=env
        )
    assert result.exit_code == 0
    assert "queue position" in result.output and "reviews per day" in result.output
    assert "SLO error_rate" in result.output and "met" in result.output


# --- on plain data ---------------------------------------------------------------------------


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 1.0) == 4.0


def test_summary_figures_and_verdicts() -> None:
    samples = [
        Sample(
            review=0,
            queue_position=1,
            ttft_s=0.1,
            e2e_s=1.1,
            prompt_tokens=1000,
            cached_tokens=400,
            completion_tokens=201,
        ),
        Sample(
            review=0,
            queue_position=2,
            ttft_s=0.3,
            e2e_s=2.3,
            prompt_tokens=1000,
            cached_tokens=600,
            completion_tokens=101,
            finish_reason="length",
        ),
        Sample(review=1, queue_position=1, ttft_s=None, e2e_s=5.0, error="HTTP 503"),
    ]
    report = summarize(samples, seconds=10.0, chunks_per_review=2.0, slo=SLO(200, 60, 0.5))
    assert report.requests == 3 and report.errors == 1 and report.truncated == 1
    assert report.decode_tokens_per_s["p50"] == pytest.approx(125.0)  # 200/1 s and 100/2 s
    assert report.prefix_cache_hit_rate == 0.5
    assert report.aggregate_tokens_per_s == pytest.approx(30.2)
    # 2 answered requests in 10 s, 2 chunks per review: 0.1 reviews/s
    assert report.reviews_per_day == pytest.approx(8640.0)
    assert [row["position"] for row in report.ttft_by_queue_position] == [1, 2]
    assert report.queue_depth_within_ttft_slo == 1  # position 2 waited 300 ms > 200
    verdicts = {item["name"]: item["pass"] for item in report.slo}
    assert verdicts == {"ttft_p95_ms": False, "decode_tokens_per_s_p50": True, "error_rate": True}
    assert not report.slo_met and report.first_errors == ["HTTP 503"]


def test_no_answer_at_all_misses_every_slo() -> None:
    report = summarize([], seconds=1.0, chunks_per_review=1.0, slo=SLO())
    assert [item["pass"] for item in report.slo] == [False, False, False]


def test_synthetic_diffs_have_the_size_asked_for() -> None:
    counter = local_counter()
    for tokens in (300, 4096, 20000):
        review_input: ReviewInput = synthetic_input(tokens, counter, seed=1)
        chunks = plan(review_input.files, Budget(max_model_len=10**6), counter).chunks
        assert len(chunks) == 1
        assert abs(chunks[0].tokens - tokens) <= max(0.02 * tokens, ONE_LINE_TOKENS)


# --- bad input that must cost nothing (issue 17 item 3) --------------------------------------


class UnusableCounter:
    """A token counter that fails when asked: nothing may be measured (or built) yet."""

    name = "unusable"
    headroom = 0.05

    def count(self, text: str) -> int:
        raise AssertionError("a token was counted: the synthetic diff was built")

    def count_many(self, texts: Any) -> list[int]:
        raise AssertionError("a token was counted: the synthetic diff was built")


class UnusableBackend:
    """A model server that must not be sent anything."""

    base_url = "http://127.0.0.1:1/v1"
    output_modes = ("tool_calls",)
    setup_hint = ""

    def execute(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("a request was sent")

    def count_prompt_tokens(self, *_: Any) -> int | None:
        raise AssertionError("the server was asked")


def test_a_synthetic_diff_larger_than_the_context_is_refused_before_it_is_built() -> None:
    from reviewbot.errors import BadInputError
    from reviewbot.ops.loadtest_plan import LoadInputs, plan_load
    from reviewbot.review import ReviewOptions

    with pytest.raises(BadInputError, match="--synthetic 70000 is more than the"):
        plan_load(
            LoadInputs(synthetic_tokens=70_000),
            UnusableBackend(),  # type: ignore[arg-type]
            UnusableCounter(),
            ReviewOptions(),
            max_model_len=65_536,
        )


def test_an_open_loop_stops_at_its_duration_even_before_the_first_arrival() -> None:
    """At 0.001 requests/s the first Poisson gap (seed 0) is about half an hour: the run ends
    when its 0.05 s are over (it used to sleep out the gap), having sent nothing."""
    from reviewbot.ops.loadtest_driver import Schedule, run_load

    schedule = Schedule(rate_per_s=0.001, duration_s=0.05, seed=0)
    run = run_load(
        UnusableBackend(),  # type: ignore[arg-type]
        iter([]),
        [],
        schedule,
        max_tokens=16,
        temperature=None,
    )
    assert run.samples == []


@pytest.mark.slow
def test_each_replayed_review_has_its_own_session_key() -> None:
    """Behind vllm-router's consistent_hash, the load spreads over the boxes as reviews do:
    the chunks of one replayed review share a key, the next review has another."""
    with FakeVLLM(latency=FAST) as server:
        code, _, _ = loadtest(server, "--synthetic", "300", "--concurrency", "1", "--requests", "3")
        keys = [headers.get("x-session-id") for headers in server.request_headers]
    assert code == 0 and len(keys) == 3
    assert all(key and key.startswith("loadtest/") for key in keys)
    assert len(set(keys)) == 3  # one chunk per synthetic review: three reviews, three keys
