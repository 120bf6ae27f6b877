"""What the repository tools cost when the model calls none, and when it calls some (issue 34).

Run: ``.venv/bin/python -m tests.bench.bench_tool_cost``

Held-out-like merge requests, in three groups: the 26 items of the eval dataset
``tests/fixtures/eval/context`` (small MRs, one chunk each, most of them bugs whose evidence is
in another file), and two synthetic ones from :mod:`tests.bench.bench_tools` (a mid-size MR of
``MID_FILES`` modules, a large one of ``LARGE_FILES``), each module's change inside a function
long enough for the enclosing-scope context to matter. Each group is reviewed against a fresh
fake vLLM (``MAX_MODEL_LEN`` context, its prefix cache, ``/tokenize``) three ways:

- ``off``: ``tools = "off"``;
- ``on-unused``: tools on (the compact ``repo`` tool, the default), and a model that never
  calls a tool (the fake without its needs-evidence rule);
- ``on-used``: tools on, and a model that looks up what a change calls in another file
  (``def NAME``, then ``sed -n 'A,Bp' FILE``: the needs-evidence rule);
- ``typed-unused``, ``typed-used``: the same with ``tools = "typed"`` (the four typed tools:
  ``find_definition``, then ``read_file``).

Printed per group and mode: chunks, model calls, prompt tokens (and their ratio to ``off``),
cached prompt tokens, uncached ones (what the server prefilled; the eval items share one fake,
so the tools and the system prompt are cached after the first item, as on a server reviewing
many MRs), tool rounds and findings; then the tokens of each tool's schema as the
chat template renders it (JSON, counted with the Qwen3.5 BPE reviewbot counts with). The goal
of issue 34 part 2: ``on-unused`` costs at most 5% more prompt tokens than ``off``, with the
same chunks. Figures only: nothing here asserts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.eval import load_dataset
from reviewbot.llm.factory import runner_for
from reviewbot.model import LLMSettings
from reviewbot.prompts import ReviewContext, file_summaries, tool_schemas
from reviewbot.repo.tools import ToolForm, repository_tool_schemas
from reviewbot.repo.view import MemoryView
from reviewbot.review import ReviewOptions, ReviewResult, review_files
from reviewbot.tokens import QwenBPECounter, local_counter
from tests.bench.bench_tools import synthetic_mr
from tests.fakes.vllm_server import FakeVLLM

DATASET = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "context"
MAX_MODEL_LEN = 32_768
MAX_OUTPUT = 2048
MID_FILES = 60
LARGE_FILES = 400
SHA = "c0" * 20
MODES = ("off", "on-unused", "on-used", "typed-unused", "typed-used")
GOAL = 1.05


@dataclass(frozen=True)
class MergeRequest:
    name: str
    files: list[FileDiff]
    head: dict[str, str]


@dataclass
class Totals:
    chunks: int = 0
    calls: int = 0
    prompt: int = 0
    cached: int = 0
    rounds: int = 0
    findings: int = 0

    @property
    def uncached(self) -> int:
        return self.prompt - self.cached

    def add(self, result: ReviewResult) -> None:
        self.chunks += len(result.plan.chunks)
        self.calls += len(result.calls)
        self.prompt += result.prompt_tokens
        self.cached += result.cached_tokens
        self.rounds += sum(1 for call in result.calls if call.repo_tool_calls)
        self.findings += len(result.findings.findings)


def eval_items() -> list[MergeRequest]:
    """The 26 one-chunk merge requests of the eval dataset."""
    return [MergeRequest(i.name, i.files, i.head) for i in load_dataset(DATASET)]


def groups() -> dict[str, list[MergeRequest]]:
    """The held-out-like merge requests, by group."""
    dataset = eval_items()
    made = {}
    for name, files in (("mid", MID_FILES), ("large", LARGE_FILES)):
        synthetic = synthetic_mr(files)
        made[name] = [MergeRequest(name, parse_git_diff(synthetic.diff), synthetic.head)]
    return {"eval items (26 small)": dataset, "mid-size MR": made["mid"], "large MR": made["large"]}


def review(
    fake: FakeVLLM, mr: MergeRequest, tools: bool, form: ToolForm = ToolForm.COMPACT
) -> ReviewResult:
    context = ReviewContext(title=mr.name, files=file_summaries(mr.files))
    settings = LLMSettings(
        base_url=fake.base_url, enable_thinking=False, max_output_tokens=MAX_OUTPUT
    )
    with runner_for(settings) as llm:
        return review_files(
            mr.files,
            context=context,
            llm=llm,
            counter=local_counter(),
            options=ReviewOptions(tools=tools, tool_form=form, max_output_tokens=MAX_OUTPUT),
            contents=mr.head,
            repository=MemoryView(SHA, mr.head),
        )


def run_mode(mrs: list[MergeRequest], mode: str) -> Totals:
    totals = Totals()
    form = ToolForm.TYPED if mode.startswith("typed") else ToolForm.COMPACT
    used = mode.endswith("-used")
    with FakeVLLM(needs_evidence=used, max_model_len=MAX_MODEL_LEN) as fake:
        for mr in mrs:
            totals.add(review(fake, mr, tools=mode != "off", form=form))
    return totals


def schema_tokens() -> list[str]:
    bpe = QwenBPECounter.load()
    rows = []
    total = 0
    for schema in repository_tool_schemas(ToolForm.TYPED):
        tokens = bpe.count(json.dumps(schema, ensure_ascii=False))
        total += tokens
        rows.append(f"  {schema['function']['name']:<16} {tokens:>4}")
    rows.append(f"  {'the four (typed)':<16} {total:>4}")
    (compact,) = repository_tool_schemas(ToolForm.COMPACT)
    tokens = bpe.count(json.dumps(compact, ensure_ascii=False))
    rows.append(f"  {compact['function']['name']:<16} {tokens:>4} (compact, the default)")
    (finding,) = (s for s in tool_schemas() if s["function"]["name"] == "report_finding")
    rows.append(f"  {'report_finding':<16} {bpe.count(json.dumps(finding)):>4} (tools off too)")
    return rows


HEADER = (
    f"{'group':<22} {'mode':<12} {'chunks':>6} {'calls':>6} {'prompt':>10} {'x off':>6} "
    f"{'cached':>10} {'uncached':>9} {'x off':>6} {'rounds':>6} {'finds':>6}"
)


def main() -> None:
    print(f"context {MAX_MODEL_LEN:,}, max_output_tokens {MAX_OUTPUT:,}")
    print("tokens per repository tool schema (Qwen3.5 BPE, JSON as the template renders it):")
    print("\n".join(schema_tokens()))
    print(HEADER)
    for group, mrs in groups().items():
        off = None
        for mode in MODES:
            totals = run_mode(mrs, mode)
            off = off or totals
            print(
                f"{group:<22} {mode:<12} {totals.chunks:>6} {totals.calls:>6} "
                f"{totals.prompt:>10,} {totals.prompt / off.prompt:>6.3f} {totals.cached:>10,} "
                f"{totals.uncached:>9,} {totals.uncached / off.uncached:>6.3f} "
                f"{totals.rounds:>6} {totals.findings:>6}"
            )
    print(f"goal: on-unused <= {GOAL} x off in prompt tokens, with the chunks of off")


if __name__ == "__main__":
    main()
