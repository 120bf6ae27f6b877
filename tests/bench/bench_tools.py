"""Benchmark of the model's repository tools: a 40-file MR reviewed with tools off and on.

Run: ``.venv/bin/python -m tests.bench.bench_tools``

A merge request changes ``FILES`` modules; every ``CROSS_FILE_EVERY``-th change calls a helper
defined in an unchanged module of the repository, whose definition carries a hazard marker
(the fake's needs-evidence rule: the bug is reported only when the definition is in the
conversation). The fake vLLM runs with ``needs_evidence`` and a latency model; the review goes
through ``review_files`` with the repository at the head as a MemoryView. Printed per mode:
model calls, tool rounds, repository calls, prompt / cached / completion tokens, the tokens of
tool answers, findings (and how many of the planted cross-file bugs), and wall time. Figures
only: nothing here asserts a time.
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from dataclasses import dataclass

from reviewbot.diff import parse_git_diff
from reviewbot.llm.factory import runner_for
from reviewbot.model import LLMSettings
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.repo.view import MemoryView
from reviewbot.review import ReviewOptions, ReviewResult, review_files
from reviewbot.tokens import local_counter
from tests.fakes.vllm_server import FakeVLLM, LatencyModel

LATENCY = LatencyModel(
    ttft_base_s=0.05, prefill_tokens_per_s=20000, decode_s_per_token=0.002, max_num_seqs=8
)
FILES = 40
HELPERS = 10
CROSS_FILE_EVERY = 4  # one changed module in four calls a helper of another file
BODY_LINES = 30
SHA = "be" * 20
# One chunk per few files, so the figures show several chunks and their rounds.
MAX_MODEL_LEN = 16_384
MAX_OUTPUT = 1024


@dataclass(frozen=True)
class Synthetic:
    diff: str
    head: dict[str, str]
    planted: set[tuple[str, int]]  # (path, line) of each cross-file bug


@dataclass(frozen=True)
class Figures:
    mode: str
    result: ReviewResult
    wall_s: float
    planted: set[tuple[str, int]]

    @property
    def found_planted(self) -> int:
        found = {(f.path, f.line) for f in self.result.findings.findings}
        return len(found & self.planted)

    def row(self) -> str:
        calls = self.result.calls
        rounds = sum(1 for call in calls if call.repo_tool_calls)
        return (
            f"{self.mode:<5} {len(calls):>6} {rounds:>6} "
            f"{sum(c.repo_tool_calls for c in calls):>6} "
            f"{self.result.prompt_tokens:>9,} {self.result.cached_tokens:>9,} "
            f"{self.result.completion_tokens:>8,} "
            f"{sum(c.tool_answer_tokens for c in calls):>7,} "
            f"{len(self.result.findings.findings):>5} "
            f"{self.found_planted:>3}/{len(self.planted):<3} {self.wall_s:>6.2f}"
        )


HEADER = (
    "mode   calls rounds  repo   prompt    cached  complet  answers  finds planted   wall\n"
    "                    calls   tokens    tokens   tokens   tokens              s"
)


def helper_source(index: int) -> str:
    return (
        f'"""Helper {index}."""\n\n\n'
        f"def helper_{index}(value):  # hazard(helper_{index}): returns None for negative values\n"
        "    if value < 0:\n        return None\n    return value * 2\n"
    )


def module_source(index: int, changed: bool) -> str:
    lines = [f'"""Module {index}."""', "", "", f"def work_{index}(items):"]
    lines += [f"    total_{n} = len(items) + {n}" for n in range(BODY_LINES)]
    if changed:
        if index % CROSS_FILE_EVERY == 0:
            lines.append(f"    doubled = helper_{index % HELPERS}(total_0) + 1")
        else:
            lines.append(f"    doubled = total_0 * 2  # module {index}")
    lines.append("    return total_0")
    return "\n".join(lines) + "\n"


def synthetic_mr(files: int = FILES) -> Synthetic:
    """``files`` changed modules and the unchanged helpers, as a diff and the head tree."""
    head = {f"lib/helper_{k}.py": helper_source(k) for k in range(HELPERS)}
    diff, planted = "", set()
    for index in range(files):
        path = f"src/module_{index}.py"
        old, new = module_source(index, False), module_source(index, True)
        head[path] = new
        lines = difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"
        )
        diff += f"diff --git a/{path} b/{path}\n" + "".join(lines)
        if index % CROSS_FILE_EVERY == 0:
            planted.add(
                (
                    path,
                    new.splitlines().index(f"    doubled = helper_{index % HELPERS}(total_0) + 1")
                    + 1,
                )
            )
    return Synthetic(diff, head, planted)


def run_mode(
    synthetic: Synthetic, tools: bool, latency: LatencyModel, max_model_len: int = MAX_MODEL_LEN
) -> Figures:
    """One review of ``synthetic`` against a fresh fake (an empty prefix cache)."""
    files = parse_git_diff(synthetic.diff)
    context = ReviewContext(title="Double the totals", files=file_summaries(files))
    fake = FakeVLLM(needs_evidence=True, latency=latency, max_model_len=max_model_len)
    settings = LLMSettings(base_url="", enable_thinking=False, max_output_tokens=MAX_OUTPUT)
    with fake, runner_for(dataclasses.replace(settings, base_url=fake.base_url)) as llm:
        started = time.monotonic()
        result = review_files(
            files,
            context=context,
            llm=llm,
            counter=local_counter(),
            options=ReviewOptions(tools=tools, max_output_tokens=MAX_OUTPUT),
            contents=synthetic.head,
            repository=MemoryView(SHA, synthetic.head),
        )
        wall_s = time.monotonic() - started
    return Figures("on" if tools else "off", result, wall_s, synthetic.planted)


def main() -> None:
    synthetic = synthetic_mr()
    print(f"{FILES}-file MR, {len(synthetic.planted)} cross-file bugs, {HELPERS} helper modules")
    print(HEADER)
    for tools in (False, True):
        figures = run_mode(synthetic, tools, LATENCY)
        print(figures.row())
        print(f"      chunks {len(figures.result.plan.chunks)}; {figures.result.tools}")


if __name__ == "__main__":
    main()
