"""A deep review (3 passes) against the real vLLM (issue 37, docs/effort.md).

``reviewbot run --effort deep`` of a two-file MR that fits one chunk: each of the three passes
sends the chunk once (pass 1 the standard request; passes 2 and 3 with their own ``seed``,
``deep_temperature`` and the background priority, the files rotated in the diff), the scripted
model answers every pass with the same findings, and the vote keeps them at 3 of 3. Every
pass is served at least the warmed system turn from vLLM's prefix cache (tools, system prompt
and MR context are byte-identical; only the diff's file order differs): ``cached_tokens`` in
whole KV blocks. The shares are printed (``-s``) for docs/effort.md: measured 28%, 28% and 98%
(the pass whose rotation brings the files back to an order already seen gets every whole
block). The passes go without a ``seed``: vLLM 0.32's CPU engine dies on a seeded request.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.store import Store
from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import BOT_TOKEN, PROJECT, World, git, init_repo
from tests.realvllm.server import SharedServer
from tests.realvllm.test_cache_and_repair_real import (
    block_size,
    env,
    system_turn_tokens,
    warm_the_system_turn,
)
from tests.realvllm.test_review_real import diff_note_lines
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

PASSES = 3
LINES_PER_FILE = 60


def two_small_files(tmp_path: Path, server: SharedServer, gitlab: FakeGitLab) -> World:
    repo = init_repo(tmp_path / "repo")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "feature")
    for name in ("a.py", "b.py"):
        lines = [f"{name[0]}{i} = {i}\n" for i in range(LINES_PER_FILE)]
        lines[10] = "value = eval(source)\n"
        (repo / name).write_text("".join(lines))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two files")
    gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
    gitlab.add_project(PROJECT, project_id=7)
    gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Two files")
    database = f"sqlite:///{tmp_path / 'reviewbot.db'}"
    return World(repo, gitlab, server, database, tmp_path / "repo-cache")  # type: ignore[arg-type]


def test_a_deep_review_votes_and_serves_the_later_passes_from_the_cache(
    tmp_path: Path, real_vllm: SharedServer
) -> None:
    block = block_size(real_vllm)
    shared = system_turn_tokens(real_vllm)
    warm_the_system_turn(real_vllm)
    with FakeGitLab() as gitlab:
        world = two_small_files(tmp_path, real_vllm, gitlab)
        ran = CliRunner().invoke(
            main,
            ["run", "1", "--project", PROJECT, "--effort", "deep", "--json"],
            # one request at a time: each pass after the first finds the prefix cached
            # no seed: vLLM 0.32's CPU engine dies on one (docs/effort.md)
            env=env(
                world,
                REVIEWBOT_CONCURRENCY="1",
                REVIEWBOT_DEEP_PASSES=str(PASSES),
                REVIEWBOT_DEEP_SEED="false",
            ),
        )
        assert ran.exit_code == 0, ran.output
        assert diff_note_lines(world) == {("a.py", 11), ("b.py", 11)}
        notes = [d["notes"][0] for d in gitlab.discussions(PROJECT, 1)]
    store = Store.from_url(world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    calls = sorted(store.llm_calls(review["id"]), key=lambda call: call["started_at"])
    shares = [call["cached_tokens"] / call["prompt_tokens"] for call in calls]
    print(
        f"block {block}, system turn {shared} tokens; per call (in the order sent): "
        + ", ".join(
            f"{call['cached_tokens']}/{call['prompt_tokens']} cached ({share:.0%})"
            for call, share in zip(calls, shares, strict=True)
        )
    )
    bodies = [note["body"] for note in notes if note["type"] == "DiffNote"]
    assert len(bodies) == 2
    assert all(f"reported by {PASSES} of {PASSES} passes" in body for body in bodies)
    assert (review["effort"], review["effort_reason"], review["passes"]) == (
        "deep",
        "--effort",
        PASSES,
    )
    findings = store.findings(review["id"])
    posted = [f for f in findings if f["state"] == "posted"]
    assert [(f["votes"], f["passes"]) for f in posted] == [(PASSES, PASSES)] * 2
    assert len(calls) == PASSES
    assert all(call["cached_tokens"] % block == 0 for call in calls)
    later = calls[1:]
    assert all(call["cached_tokens"] >= shared // block * block > 0 for call in later)
    assert min(shares[1:]) >= shared // block * block / max(c["prompt_tokens"] for c in calls)
