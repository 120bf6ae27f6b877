"""Incremental reviews, measured: what a push, a rebase and a repeated head cost the model.

Run: ``.venv/bin/python -m tests.bench.bench_incremental [--files 40 --lines 2000]``

An MR of ~2,000 changed lines in 40 files (a real git repository), the fake GitLab and the fake
vLLM (which reports prefix-cache hits as ``cached_tokens``). Four reviews in one process:

1. the first, full review;
2. after a push that changes one file: its uncached prompt tokens against the first review's
   (target: at most 10%), and whether its model calls saw only that file;
3. after a rebase that leaves the patch as it was (target: 0 model calls);
4. the same head again (target: 0 model calls).

It also prints what enclosing-scope context cost in the first review's plan.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reviewbot.app import App
from reviewbot.config import Settings
from reviewbot.mr import RunOptions, RunReport, run_merge_request
from tests.bench.bench_run import PROJECT, TOKEN, make_repo
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM

TARGET_UNCACHED_SHARE = 0.10
FILE_TAG = re.compile(r'<file path="([^"]+)"')
FAST_NOTES_PER_MINUTE = 60_000


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return done.stdout.decode().strip()


def files_in(call: dict) -> set[str]:
    """The files whose diff a chat request carried (the <file path=...> blocks)."""
    text = "".join(str(message["content"]) for message in call["messages"])
    return set(FILE_TAG.findall(text))


def uncached(report: RunReport) -> int:
    return sum(call.prompt_tokens - (call.cached_tokens or 0) for call in report.review.calls)


def review(app: App, label: str, vllm: FakeVLLM) -> tuple[RunReport, list[dict]]:
    before = len(vllm.requests)
    report = run_merge_request(app, PROJECT, 1, RunOptions())
    calls = vllm.requests[before:]
    carried = report.review.carried
    print(
        f"{label:<32} model calls {len(calls):>3}  prompt tokens "
        f"{report.review.prompt_tokens:>7}  uncached {uncached(report):>7}  "
        f"findings kept {carried.findings if carried else 0:>3}  posted {len(report.posted):>3}"
    )
    return report, calls


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, FakeGitLab() as gitlab, FakeVLLM() as vllm:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        make_repo(repo, args.files, args.lines)
        gitlab.add_user("reviewbot", token=TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=1)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Bench MR")
        settings = Settings(
            gitlab_url=gitlab.url,
            gitlab_token=TOKEN,
            llm_base_url=vllm.base_url,
            database_url=f"sqlite:///{tmp}/bench.db",
            min_severity="info",
            gitlab_notes_per_minute=FAST_NOTES_PER_MINUTE,
            repo_cache_dir=f"{tmp}/repo-cache",
        )
        with App(settings) as app:
            first, _ = review(app, "1. first review (full)", vllm)
            totals = first.review.plan.totals()
            target = repo / "pkg0" / "mod0.py"
            git(repo, "checkout", "-q", "feature")
            target.write_text(target.read_text() + "\n\ndef late(x):\n    return eval(x)\n")
            git(repo, "commit", "-qam", "one file changes")
            gitlab.push(PROJECT, 1, git(repo, "rev-parse", "HEAD"))
            pushed, pushed_calls = review(app, "2. push changing one file", vllm)
            git(repo, "checkout", "-q", "main")
            (repo / "NOTES.md").write_text("unrelated\n")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", "unrelated change on main")
            git(repo, "checkout", "-q", "feature")
            git(repo, "rebase", "-q", "main")
            gitlab.push(PROJECT, 1, git(repo, "rev-parse", "HEAD"))
            _, rebase_calls = review(app, "3. rebase, same patch", vllm)
            _, again_calls = review(app, "4. same head again", vllm)
    share = uncached(pushed) / max(1, uncached(first))
    only_that_file = all(files_in(call) == {"pkg0/mod0.py"} for call in pushed_calls)
    print(
        f"uncached prompt tokens after the push: {share:.1%} of the first review's "
        f"(target <= {TARGET_UNCACHED_SHARE:.0%}); its calls saw only that file: "
        f"{only_that_file}"
    )
    print(
        f"enclosing-scope context in the first review: {totals.get('context_tokens')} tokens "
        f"of {totals.get('tokens')} ({totals.get('scoped_hunks')} hunks with their scope, "
        f"{totals.get('whole_files')} whole files)"
    )
    met = share <= TARGET_UNCACHED_SHARE and only_that_file and not rebase_calls and not again_calls
    print("targets met" if met else "TARGET MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
