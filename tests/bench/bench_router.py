"""Benchmark: the same 20-MR workload through the real vllm-router, ``consistent_hash`` (with
reviewbot's ``X-Session-ID``) versus ``round_robin``, over three fake vLLMs; prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_router``

Each MR is a synthetic diff (tests/bench/bench_plan.py's generator, one seed per MR) reviewed
by reviewbot's own pipeline (``review_files``: real prompts, tools and MR context) with a
context small enough to cut it into several chunks. Three workers review MRs at once, as three
``reviewbot worker`` processes would. Every box is a fake vLLM with its own prefix cache and
``LatencyModel(ttft_base_s=0.05, prefill_tokens_per_s=20000, decode_s_per_token=0.001,
max_num_seqs=8, prefill_in_turn=True)`` (one prefill at a time, as vLLM's chunked prefill).

Figures per policy: prompt tokens prefilled (uncached) for all MRs and for MRs of 3+ chunks,
the prefix-cache hit rate, client TTFT p50/p95 and the wall time. Goal (issue 22): with
affinity, uncached prompt tokens <= 40% of round robin's on MRs of 3+ chunks.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from reviewbot.chunking import PlanOptions
from reviewbot.diff import parse_git_diff
from reviewbot.llm.backend import CallRecord, LLMSettings, session_key
from reviewbot.llm.factory import runner_for
from reviewbot.llm.runner import ChunkRunner
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.review import ReviewOptions, review_files
from reviewbot.tokens import local_counter
from reviewbot.verification import VerifyOptions
from tests.bench.bench_plan import generate_diff
from tests.fakes.vllm_server import LatencyModel
from tests.router_pool import NO_ROUTER_REASON, ROUTER_BINARY, router_pool

LATENCY = LatencyModel(
    ttft_base_s=0.05,
    prefill_tokens_per_s=20000,
    decode_s_per_token=0.001,
    max_num_seqs=8,
    prefill_in_turn=True,
)
MRS = 20
FILES_PER_MR = 8
LINES_PER_MR = 900  # with CONTEXT: mostly 3 to 6 chunks per MR
CONTEXT = 8_000
OUTPUT_TOKENS = 1024
WORKERS = 3  # reviews at once, as three reviewbot workers
GOAL_SHARE = 0.40
MIN_CHUNKS = 3
GITLAB = "https://gitlab.example.com"
PROJECT_ID = 42
MS_PER_S = 1000.0
POLICIES = ("consistent_hash", "round_robin")
# The second workload: MRs whose description is long (a template with a checklist, a pasted
# design note): about 2,000 tokens of MR context shared by the MR's chunks and no other MR's.
LONG_DESCRIPTION_SENTENCES = 120
# (description sentences, verification on): VERIFY=on sends each chunk's whole review prompt
# again with the verdict tool, a prefix only the chunk's own box has cached.
WORKLOADS = {
    "short MR context": (0, False),
    "long MR context": (LONG_DESCRIPTION_SENTENCES, False),
    "short MR context, VERIFY=on": (0, True),
}


@dataclass(frozen=True)
class MRFigures:
    chunks: int
    calls: list[CallRecord]


@dataclass(frozen=True)
class PolicyFigures:
    policy: str
    wall_s: float
    mrs: list[MRFigures]
    requests_per_box: list[int]


def _description(iid: int, sentences: int) -> str:
    lines = [f"MR {iid} moves the loaders behind one interface and adds tests."]
    lines += [
        f"- [x] Step {n} of change {iid}: checked that loader {n} keeps its error messages "
        f"and that the migration note for team {iid % 7} mentions it."
        for n in range(sentences)
    ]
    return "\n".join(lines)


def _review(runner: ChunkRunner, iid: int, sentences: int, verify: bool) -> MRFigures:
    synthetic = generate_diff(FILES_PER_MR, LINES_PER_MR, seed=iid)
    files = parse_git_diff(synthetic.text)
    context = ReviewContext(
        title=f"Change {iid}: refactor the loaders",
        description=_description(iid, sentences),
        files=file_summaries(files, {}),
    )
    options = ReviewOptions(
        max_model_len=CONTEXT,
        max_output_tokens=OUTPUT_TOKENS,
        plan_options=PlanOptions(context_lines=3),
        verify=VerifyOptions(enabled=verify),
    )
    result = review_files(
        files,
        context=context,
        llm=runner,
        counter=local_counter(),
        options=options,
        session=session_key(GITLAB, PROJECT_ID, iid),
    )
    return MRFigures(len(result.plan.chunks), [*result.calls, *result.verification.calls])


def run_policy(policy: str, sentences: int, verify: bool) -> PolicyFigures:
    with router_pool(3, policy=policy, latency=LATENCY) as pool:
        settings = LLMSettings(base_url=pool.base_url, concurrency=LATENCY.max_num_seqs)
        with runner_for(settings) as runner, ThreadPoolExecutor(WORKERS) as workers:
            runner.server_info()
            started = time.perf_counter()
            reviews = workers.map(
                lambda iid: _review(runner, iid, sentences, verify), range(1, MRS + 1)
            )
            mrs = list(reviews)
            wall = time.perf_counter() - started
        return PolicyFigures(policy, wall, mrs, pool.chat_counts())


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


def _uncached(mrs: list[MRFigures]) -> tuple[int, int]:
    calls = [call for mr in mrs for call in mr.calls]
    prompt = sum(call.prompt_tokens for call in calls)
    return prompt - sum(call.cached_tokens or 0 for call in calls), prompt


def report(figures: PolicyFigures) -> tuple[int, int]:
    """Print one policy's figures; (uncached tokens, prompt tokens) of the MRs of 3+ chunks."""
    uncached, prompt = _uncached(figures.mrs)
    big = [mr for mr in figures.mrs if mr.chunks >= MIN_CHUNKS]
    big_uncached, big_prompt = _uncached(big)
    ttfts = [c.ttft_ms for mr in figures.mrs for c in mr.calls if c.ttft_ms is not None]
    chunks = sum(mr.chunks for mr in figures.mrs)
    print(f"--- {figures.policy}")
    print(
        f"MRs / chunks / calls        {len(figures.mrs)} / {chunks} / "
        f"{sum(len(mr.calls) for mr in figures.mrs)}"
    )
    print(f"requests per box            {figures.requests_per_box}")
    print(f"prompt tokens (all MRs)     {prompt:,}, uncached {uncached:,}")
    print(
        f"MRs of {MIN_CHUNKS}+ chunks             {len(big)}: prompt {big_prompt:,}, "
        f"uncached {big_uncached:,}"
    )
    print(
        f"prefix-cache hit rate       {1 - uncached / prompt:.1%} (MRs of {MIN_CHUNKS}+ "
        f"chunks: {1 - big_uncached / big_prompt if big_prompt else 0:.1%})"
    )
    print(
        f"TTFT p50 / p95              {_percentile(ttfts, 0.5):.0f} / "
        f"{_percentile(ttfts, 0.95):.0f} ms"
    )
    print(f"wall time                   {figures.wall_s:.2f} s")
    return big_uncached, big_prompt


def main() -> None:
    if ROUTER_BINARY is None:
        print(f"skipped: {NO_ROUTER_REASON}")
        return
    for workload, (sentences, verify) in WORKLOADS.items():
        print(f"##### {workload}")
        big = {policy: report(run_policy(policy, sentences, verify)) for policy in POLICIES}
        hashed, robin = big["consistent_hash"][0], big["round_robin"][0]
        share = hashed / robin if robin else 0.0
        verdict = (
            "no MR of that size" if not robin else ("met" if share <= GOAL_SHARE else "NOT met")
        )
        print(
            f"=== {workload}: uncached prompt tokens on MRs of {MIN_CHUNKS}+ chunks: "
            f"consistent_hash {hashed:,} = {share:.1%} of round_robin's {robin:,} "
            f"(goal <= {GOAL_SHARE:.0%}: {verdict})"
        )


if __name__ == "__main__":
    main()
