"""Benchmark: the same 20-MR workload through the real vllm-router, ``consistent_hash`` (with
reviewbot's ``X-Session-ID``) versus ``round_robin``, over three fake vLLMs; prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_router``

Each MR is a synthetic diff (tests/bench/bench_plan.py's generator, one seed per MR) reviewed
by reviewbot's own pipeline (``review_files``: real prompts, tools and MR context) with a
context small enough to cut it into several chunks. Three workers review MRs at once, as three
``reviewbot worker`` processes would. Every box is a fake vLLM with its own prefix cache and
``LatencyModel(ttft_base_s=0.05, prefill_tokens_per_s=20000, decode_s_per_token=0.001,
max_num_seqs=8, prefill_in_turn=True)`` (one prefill at a time, as vLLM's chunked prefill).

Four workloads: short and long MR descriptions, VERIFY=on, and the repository tools with
VERIFY=on (bench_tools' cross-file MRs: a tool round, an answer and a verification per chunk).

Figures per policy: prompt tokens prefilled (uncached) for all MRs and for MRs of 3+ chunks,
the prefix-cache hit rate, the follow-up calls' (later tool rounds, verifications) prompt
and uncached tokens, client TTFT p50/p95 and the wall time. Goal (issue 22): with
affinity, uncached prompt tokens <= 40% of round robin's on MRs of 3+ chunks.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from reviewbot.chunking import PlanOptions
from reviewbot.diff import parse_git_diff
from reviewbot.llm.factory import runner_for
from reviewbot.llm.runner import ChunkRunner
from reviewbot.model import CallRecord, LLMSettings, session_key
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.repo.view import MemoryView
from reviewbot.review import ReviewOptions, review_files
from reviewbot.states import CallPurpose
from reviewbot.tokens import local_counter
from reviewbot.verify import VerifyOptions
from tests.bench.bench_plan import generate_diff
from tests.bench.bench_tools import SHA, synthetic_mr
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
# The fourth workload: MRs that call helpers of unchanged modules, reviewed with the
# repository tools on and VERIFY=on (tests/fixtures/eval/configs/tools-verify.toml, the
# configuration with the best F1 in docs/verification.md). The fakes run with needs_evidence:
# a chunk reads the helper's definition in a tool round before it reports the bug, and each
# round resends the chunk's whole conversation, as does the verification.
TOOL_MR_FILES = 24


@dataclass(frozen=True)
class Workload:
    description_sentences: int = 0
    verify: bool = False
    tools: bool = False


WORKLOADS = {
    "short MR context": Workload(),
    "long MR context": Workload(description_sentences=LONG_DESCRIPTION_SENTENCES),
    "short MR context, VERIFY=on": Workload(verify=True),
    "repository tools and VERIFY=on": Workload(verify=True, tools=True),
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


def _tool_mr(iid: int) -> tuple[str, dict[str, str]]:
    """bench_tools' cross-file MR, its module names made this MR's own."""
    synthetic = synthetic_mr(TOOL_MR_FILES)
    own = f"mr{iid}_module_"
    head = {path.replace("module_", own): text for path, text in synthetic.head.items()}
    return synthetic.diff.replace("module_", own), head


def _review(runner: ChunkRunner, iid: int, workload: Workload) -> MRFigures:
    if workload.tools:
        diff, head = _tool_mr(iid)
        repository: MemoryView | None = MemoryView(SHA, head)
    else:
        diff, head, repository = generate_diff(FILES_PER_MR, LINES_PER_MR, seed=iid).text, {}, None
    files = parse_git_diff(diff)
    context = ReviewContext(
        title=f"Change {iid}: refactor the loaders",
        description=_description(iid, workload.description_sentences),
        files=file_summaries(files, {}),
    )
    options = ReviewOptions(
        max_model_len=CONTEXT,
        max_output_tokens=OUTPUT_TOKENS,
        plan_options=PlanOptions(context_lines=3),
        verify=VerifyOptions(enabled=workload.verify),
        tools=workload.tools,
    )
    result = review_files(
        files,
        context=context,
        llm=runner,
        counter=local_counter(),
        options=options,
        contents=head,
        repository=repository,
        session=session_key(GITLAB, PROJECT_ID, iid),
    )
    return MRFigures(len(result.plan.chunks), [*result.calls, *result.verification.calls])


def run_policy(policy: str, workload: Workload) -> PolicyFigures:
    with router_pool(3, policy=policy, latency=LATENCY, needs_evidence=workload.tools) as pool:
        settings = LLMSettings(
            base_url=pool.base_url,
            concurrency=LATENCY.max_num_seqs,
            max_output_tokens=OUTPUT_TOKENS,  # as the plan reserves (one setting in the product)
        )
        with runner_for(settings) as runner, ThreadPoolExecutor(WORKERS) as workers:
            runner.server_info()
            started = time.perf_counter()
            reviews = workers.map(lambda iid: _review(runner, iid, workload), range(1, MRS + 1))
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


def _is_follow_up(call: CallRecord) -> bool:
    """A call that resends an earlier call's conversation: a later tool round, a verification."""
    return call.tool_round > 0 or call.purpose != CallPurpose.REVIEW


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
    follow_ups = [c for mr in figures.mrs for c in mr.calls if _is_follow_up(c)]
    follow_prompt = sum(c.prompt_tokens for c in follow_ups)
    follow_uncached = follow_prompt - sum(c.cached_tokens or 0 for c in follow_ups)
    print(
        f"follow-up calls             {len(follow_ups)} (tool rounds after the first, "
        f"verifications): prompt {follow_prompt:,}, uncached {follow_uncached:,}"
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
    for name, workload in WORKLOADS.items():
        print(f"##### {name}")
        big = {policy: report(run_policy(policy, workload)) for policy in POLICIES}
        hashed, robin = big["consistent_hash"][0], big["round_robin"][0]
        share = hashed / robin if robin else 0.0
        verdict = (
            "no MR of that size" if not robin else ("met" if share <= GOAL_SHARE else "NOT met")
        )
        print(
            f"=== {name}: uncached prompt tokens on MRs of {MIN_CHUNKS}+ chunks: "
            f"consistent_hash {hashed:,} = {share:.1%} of round_robin's {robin:,} "
            f"(goal <= {GOAL_SHARE:.0%}: {verdict})"
        )


if __name__ == "__main__":
    main()
