"""Prefix caching and unreadable tool calls against the real vLLM.

- The second chunk of one MR is served from the prefix cache: vLLM reports ``cached_tokens`` in
  whole KV blocks (640 tokens for this hybrid DeltaNet model on CPU, read from ``/metrics``), at
  least the shared system turn (with the repository tools' schemas, the default) rounded down
  to whole blocks, and ``reviews show`` prints it. The server is warmed first: on a fresh one
  this model's cache hits a prefix only once it has been seen twice.
- A planted mistake (``scripted-mistake: wrong_type``) makes the scripted model write a call's
  ``line`` as ``L11``: vLLM's qwen3_coder parser keeps the text that does not convert, reviewbot
  refuses the call and asks again in a repair turn, and the resent call is published.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.prompts import ReviewContext, render_messages, tool_schemas
from reviewbot.repo.tools import RepositoryTools
from reviewbot.repo.view import MemoryView
from reviewbot.store import Store
from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import BOT_TOKEN, PROJECT, World, git, init_repo
from tests.realvllm.server import SERVED_MODEL, SharedServer
from tests.realvllm.test_review_real import diff_note_lines
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

LINES_PER_FILE = 1000  # about 20K tokens of diff: one file per chunk in a 32K context
SMALL_CONTEXT = 32_768
BLOCK_SIZE_RE = re.compile(r'vllm:cache_config_info\{(?:[^}]*,)?block_size="(\d+)"')


def block_size(server: SharedServer) -> int:
    metrics = httpx.get(f"{server.root_url}/metrics", timeout=30).text
    match = BLOCK_SIZE_RE.search(metrics)
    assert match, "vllm:cache_config_info has no block_size"
    return int(match[1])


def system_turn_tokens(server: SharedServer) -> int:
    """The system turn with the tools: the least two chunks of one MR share."""
    [system, _] = render_messages(ReviewContext(title="Two files"), None)
    body = {
        "model": SERVED_MODEL,
        "messages": [system],
        "tools": review_tools_schemas(),
        "add_generation_prompt": False,
    }
    return httpx.post(f"{server.root_url}/tokenize", json=body, timeout=30).json()["count"]


def review_tools_schemas() -> list[dict]:
    """What a review with the repository tools (the default) offers: report_finding first."""
    return tool_schemas() + RepositoryTools(MemoryView("0" * 40, {})).schemas()


def warm_the_system_turn(server: SharedServer, headers: dict[str, str] | None = None) -> None:
    """Send the system turn twice, as a server's warm-up does: this hybrid (DeltaNet) model's
    prefix cache keeps a prefix's state only once it has been seen again (a fresh server gave
    the second chunk of a first MR 0 cached tokens; the tier's earlier tests used to warm it)."""
    [system, _] = render_messages(ReviewContext(title="Two files"), None)
    for turn in ("warm-up", "warm-up again"):
        body = {
            "model": SERVED_MODEL,
            "messages": [system, {"role": "user", "content": turn}],
            "tools": review_tools_schemas(),
            "max_tokens": 1,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        httpx.post(
            f"{server.base_url}/chat/completions", json=body, headers=headers, timeout=300
        ).raise_for_status()


def two_file_world(tmp_path: Path, server: SharedServer, gitlab: FakeGitLab) -> World:
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


def env(world: World, **extra: str) -> dict[str, str]:
    return {
        "REVIEWBOT_GITLAB_URL": world.gitlab.url,
        "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
        "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
        "REVIEWBOT_DATABASE_URL": world.database_url,
        "REVIEWBOT_MIN_SEVERITY": "info",
        "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000",
        "REVIEWBOT_ENABLE_THINKING": "false",
        **extra,
    }


def review_two_chunks(world: World, **extra_env: str) -> tuple[int, list[dict]]:
    """``reviewbot run`` of two_file_world's MR, one chunk after the other; both findings are
    posted. The review's id and its model calls in chunk order."""
    ran = CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT, "--json"],
        env=env(
            world,
            REVIEWBOT_MAX_MODEL_LEN=str(SMALL_CONTEXT),
            REVIEWBOT_CONCURRENCY="1",  # the second chunk after the first one's prefill
            **extra_env,
        ),
    )
    assert ran.exit_code == 0, ran.output
    assert diff_note_lines(world) == {("a.py", 11), ("b.py", 11)}
    store = Store.from_url(world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    calls = sorted(store.llm_calls(review["id"]), key=lambda call: call["chunk_index"])
    assert len(calls) == 2
    return review["id"], calls


def test_the_second_chunk_of_an_mr_is_served_from_the_prefix_cache(
    tmp_path: Path, real_vllm: SharedServer
) -> None:
    block = block_size(real_vllm)
    shared = system_turn_tokens(real_vllm)
    assert shared >= block, "the test needs a shared prefix of at least one block"
    warm_the_system_turn(real_vllm)
    with FakeGitLab() as gitlab:
        world = two_file_world(tmp_path, real_vllm, gitlab)
        review_id, calls = review_two_chunks(world)
    second = calls[1]
    assert second["cached_tokens"] >= shared // block * block
    assert all(call["cached_tokens"] % block == 0 for call in calls)
    assert second["cached_tokens"] < second["prompt_tokens"]
    shown = CliRunner().invoke(main, ["reviews", "show", str(review_id)], env=env(world))
    assert shown.exit_code == 0, shown.output
    assert "cached" in shown.stdout and str(second["cached_tokens"]) in shown.stdout
    as_json = CliRunner().invoke(
        main, ["reviews", "show", str(review_id), "--json"], env=env(world)
    )
    shown_calls = json.loads(as_json.stdout)["llm_calls"]
    assert sorted(c["cached_tokens"] for c in shown_calls) == sorted(
        c["cached_tokens"] for c in calls
    )


def test_a_call_the_real_parser_leaves_mistyped_is_repaired(
    tmp_path: Path, real_vllm: SharedServer
) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "feature")
    (repo / "app.py").write_text(
        "def parse(text):\n    return eval(text)  # scripted-mistake: wrong_type\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "parse")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Parse")
        database = f"sqlite:///{tmp_path / 'reviewbot.db'}"
        world = World(repo, gitlab, real_vllm, database, tmp_path / "repo-cache")  # type: ignore[arg-type]
        ran = CliRunner().invoke(main, ["run", "1", "--project", PROJECT], env=env(world))
        assert ran.exit_code == 0, ran.output
        assert diff_note_lines(world) == {("app.py", 2)}
    store = Store.from_url(world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    outcomes = [call["outcome"] for call in store.llm_calls(review["id"])]
    assert outcomes == ["invalid_calls", "repair"]
    [call] = [c for c in store.llm_calls(review["id"]) if c["outcome"] == "invalid_calls"]
    assert call["invalid_tool_calls"] == 1
